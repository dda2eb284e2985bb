import CRdKafka

/// The offsets a broker holds for one partition: `low` is the oldest offset still stored (anything below it was
/// deleted by retention), `high` the offset the next message will get.
public struct KafkaWatermarks: Hashable, Sendable, CustomStringConvertible {
    public var low: Int64
    public var high: Int64
    public init(low: Int64, high: Int64) {
        self.low = low
        self.high = high
    }
    public var description: String { "\(low)..<\(high)" }
}

extension KafkaProducer {
    /// Asks the partition's leader for its watermarks (`rd_kafka_query_watermark_offsets`), on a thread of its own:
    /// the call blocks for up to `timeout`.
    /// - Throws: `KafkaError` when the leader did not answer in time or the partition is unknown.
    public func watermarks(
        topic: String, partition: Int32, timeout: Duration = .seconds(10)
    ) async throws(KafkaError) -> KafkaWatermarks {
        let milliseconds = Int32(
            clamping: timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        let client = self.rdKafkaClient
        let (err, low, high) = await BlockingCall.run(name: "kafka-watermarks") {
            client.withHandle { handle -> (rd_kafka_resp_err_t, Int64, Int64) in
                var low: Int64 = -1
                var high: Int64 = -1
                let err = rd_kafka_query_watermark_offsets(handle, topic, partition, &low, &high, milliseconds)
                return (err, low, high)
            }
        }
        if err != RD_KAFKA_RESP_ERR_NO_ERROR {
            throw KafkaError(err, context: "watermarks of \(topic)[\(partition)]")
        }
        return KafkaWatermarks(low: low, high: high)
    }
}
