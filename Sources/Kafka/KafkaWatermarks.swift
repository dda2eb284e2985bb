/// The offsets a broker holds for one partition: `low` is the oldest offset still stored (anything below it was
/// deleted by retention), `high` the offset the next message will get.
public struct KafkaWatermarks: Hashable, Sendable, CustomStringConvertible {
    public var low: Int64
    public var high: Int64
    public var description: String { "\(low)..<\(high)" }
}

extension KafkaProducer {
    /// Asks the partition's leader for its watermarks (`rd_kafka_query_watermark_offsets`), on a thread of its own:
    /// the call blocks for up to `timeout`.
    /// - Throws: `KafkaError` when the leader did not answer in time or the partition is unknown.
    public func watermarks(
        topic: String, partition: Int32, timeout: Duration = .seconds(10)
    ) async throws(KafkaError) -> KafkaWatermarks {
        let milliseconds = timeout.rdKafkaMilliseconds
        let client = self.rdKafkaClient
        return try await BlockingCall.run(name: "kafka-watermarks") {
            client.queryWatermarks(topic: topic, partition: partition, timeoutMilliseconds: milliseconds)
        }.get()
    }
}
