import CRdKafka
import Logging
import Observability

/// One polled `rd_kafka_message_t`, copied into Swift values: a message, a fatal error, or a notice to ignore.
enum RDKafkaPolledMessage {
    case message(KafkaConsumerMessage)
    case fatal(KafkaError)
    case ignored

    /// Copies the message (it stays the caller's to destroy). A consumer error that is not fatal is logged here.
    init(
        _ pointer: UnsafeMutablePointer<rd_kafka_message_t>, fatalError: () -> KafkaError?, logger: Logger
    ) {
        let message = pointer.pointee
        let topic = message.rkt.map { String(cString: rd_kafka_topic_name($0)) } ?? ""
        guard message.err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            if message.err == RD_KAFKA_RESP_ERR__PARTITION_EOF {
                self = .ignored
            } else if message.err == RD_KAFKA_RESP_ERR__FATAL {
                self = .fatal(fatalError() ?? KafkaError(message.err, context: "consume"))
            } else {
                logger.warning(
                    "kafka consumer error",
                    metadata: [
                        LogKeys.topic: "\(topic)", LogKeys.partition: "\(message.partition)",
                        LogKeys.error: "\(KafkaError(message.err, context: "consume"))",
                    ])
                self = .ignored
            }
            return
        }
        let value = message.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: message.len)) }
        let key = message.key.map { Array(UnsafeRawBufferPointer(start: $0, count: message.key_len)) }
        var timestampType = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE
        let timestamp = rd_kafka_message_timestamp(pointer, &timestampType)
        self = .message(
            KafkaConsumerMessage(
                topicPartition: KafkaTopicPartition(topic: topic, partition: message.partition),
                offset: message.offset, key: key, value: value, headers: Self.headers(of: pointer),
                timestampMilliseconds: timestampType == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? nil : timestamp))
    }

    /// Copies the headers; the list belongs to the message (no destroy here).
    private static func headers(of message: UnsafeMutablePointer<rd_kafka_message_t>) -> [KafkaHeader] {
        var list: OpaquePointer?
        guard rd_kafka_message_headers(message, &list) == RD_KAFKA_RESP_ERR_NO_ERROR, let list else { return [] }
        var result: [KafkaHeader] = []
        var index = 0
        var name: UnsafePointer<CChar>?
        var value: UnsafeRawPointer?
        var size = 0
        while rd_kafka_header_get_all(list, index, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR {
            result.append(
                KafkaHeader(
                    name: name.map { String(cString: $0) } ?? "",
                    value: value.map { Array(UnsafeRawBufferPointer(start: $0, count: size)) }))
            index += 1
        }
        return result
    }
}
