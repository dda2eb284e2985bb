import CRdKafka
import Dispatch
import Logging
import Observability
import Synchronization

/// What librdkafka's client-wide callbacks (error, log, rebalance, offset commit) reach through the
/// handle's opaque pointer. Owned by the `RDKafkaClient`, so it outlives the handle.
final class RDKafkaCallbackContext: Sendable {
    let logger: Logger
    /// Set once by the error callback when librdkafka raises a fatal error.
    let fatalError = Mutex<KafkaError?>(nil)
    /// Present for consumers only.
    let rebalance: ConsumerRebalanceHandler?
    /// Set by the error callback when librdkafka reports every broker down.
    let brokers = KafkaBrokerState()

    init(logger: Logger, rebalance: ConsumerRebalanceHandler? = nil) {
        self.logger = logger
        self.rebalance = rebalance
    }

    static func from(_ opaque: UnsafeMutableRawPointer?) -> RDKafkaCallbackContext? {
        opaque.map { Unmanaged<RDKafkaCallbackContext>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Installs the callbacks every client gets (error, log) and those of its kind. The conf's opaque must be
    /// this context.
    static func installCallbacks(on conf: OpaquePointer, kind: RDKafkaClient.Kind) {
        rd_kafka_conf_set_error_cb(conf, rdKafkaErrorCallback)
        rd_kafka_conf_set_log_cb(conf, rdKafkaLogCallback)
        switch kind {
        case .producer:
            rd_kafka_conf_set_dr_msg_cb(conf, rdKafkaDeliveryReportCallback)
        case .consumer:
            rd_kafka_conf_set_rebalance_cb(conf, rdKafkaRebalanceCallback)
            rd_kafka_conf_set_offset_commit_cb(conf, rdKafkaOffsetCommitCallback)
        }
    }
}

/// librdkafka reports client-wide errors here (from its own threads or from a poll call). Most are
/// informational (a broker went away and librdkafka reconnects); `_FATAL` makes the client unusable.
private func rdKafkaErrorCallback(
    rk: OpaquePointer?, err: Int32, reason: UnsafePointer<CChar>?, opaque: UnsafeMutableRawPointer?
) {
    guard let context = RDKafkaCallbackContext.from(opaque) else { return }
    let code = rd_kafka_resp_err_t(rawValue: err)
    if code == RD_KAFKA_RESP_ERR__FATAL, let rk {
        let fatal =
            KafkaError.fatalError(of: rk)
            ?? KafkaError(code, context: reason.map { String(cString: $0) })
        context.fatalError.withLock { if $0 == nil { $0 = fatal } }
        context.logger.critical("kafka fatal error", metadata: [LogKeys.error: "\(fatal)"])
        return
    }
    // librdkafka reports no recovery: `KafkaProducer.watchBrokers` asks the brokers until one answers.
    if code == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN { context.brokers.markAllDown() }
    context.logger.warning(
        "kafka client error",
        metadata: [
            LogKeys.kafkaErrorCode: "\(KafkaError.Code(rawValue: err))",
            LogKeys.kafkaReason: "\(reason.map { String(cString: $0) } ?? "")",
        ])
}

/// Routes librdkafka's syslog-levelled log lines to swift-log.
private func rdKafkaLogCallback(
    rk: OpaquePointer?, level: Int32, facility: UnsafePointer<CChar>?, text: UnsafePointer<CChar>?
) {
    guard let rk, let context = RDKafkaCallbackContext.from(rd_kafka_opaque(rk)) else { return }
    let message = text.map { String(cString: $0) } ?? ""
    let facilityName = facility.map { String(cString: $0) } ?? ""
    var logLevel: Logger.Level
    switch level {
    case ...3: logLevel = .error
    case 4: logLevel = .warning
    case 5: logLevel = .notice
    case 6: logLevel = .info
    default: logLevel = .debug
    }
    // One property set (`kafka_properties`) serves a worker's consumers and producers alike, so librdkafka's note
    // that a consumer property is ignored by a producer (or the reverse) is expected, not a warning.
    if facilityName == "CONFWARN", message.contains(" property and will be ignored by this ") { logLevel = .debug }
    context.logger.log(level: logLevel, "\(message)", metadata: [LogKeys.kafkaFacility: "\(facilityName)"])
}

/// librdkafka's rebalance callback (eager protocol), on the consumer's poll thread.
private func rdKafkaRebalanceCallback(
    rk: OpaquePointer?, err: rd_kafka_resp_err_t, partitions: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?,
    opaque: UnsafeMutableRawPointer?
) {
    guard let rk else { return }
    guard let handler = RDKafkaCallbackContext.from(opaque)?.rebalance else {
        _ = rd_kafka_assign(rk, err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS ? partitions : nil)
        return
    }
    let list = RDKafkaTopicPartitionList.read(partitions).map(\.topicPartition)
    let member = RDKafkaRebalanceHandle(rk: rk)
    switch err {
    case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS:
        handler.assign(list, member: member)
    default:
        // RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS, or an error in the rebalance itself: librdkafka asks us to clear
        // the assignment.
        handler.revoke(list, member: member)
    }
}

/// Results of `commitAsync` (and of librdkafka's own commits on close); failures are logged.
private func rdKafkaOffsetCommitCallback(
    rk: OpaquePointer?, err: rd_kafka_resp_err_t, offsets: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?,
    opaque: UnsafeMutableRawPointer?
) {
    guard err != RD_KAFKA_RESP_ERR_NO_ERROR, err != RD_KAFKA_RESP_ERR__NO_OFFSET,
        let context = RDKafkaCallbackContext.from(opaque)
    else { return }
    context.logger.warning(
        "kafka asynchronous commit failed", metadata: [LogKeys.error: "\(KafkaError(err, context: "commit"))"])
}

/// Called on the producer's poll thread, once per message, with the message's opaque (a retained
/// `DeliveryPromise`, taken back here).
private func rdKafkaDeliveryReportCallback(
    rk: OpaquePointer?, message: UnsafePointer<rd_kafka_message_t>?, opaque: UnsafeMutableRawPointer?
) {
    guard let message, let messageOpaque = message.pointee._private else { return }
    let promise = Unmanaged<DeliveryPromise>.fromOpaque(messageOpaque).takeRetainedValue()
    let err = message.pointee.err
    if err != RD_KAFKA_RESP_ERR_NO_ERROR {
        let error: KafkaError
        if err == RD_KAFKA_RESP_ERR__FATAL, let rk, let fatal = KafkaError.fatalError(of: rk) {
            error = fatal
        } else {
            error = KafkaError(err, context: "delivery failed")
        }
        promise.deliver(.failure(error))
        return
    }
    promise.deliver(
        .success(
            KafkaDeliveryReport(
                topicPartition: KafkaTopicPartition(topic: promise.topic, partition: message.pointee.partition),
                offset: message.pointee.offset)))
}
