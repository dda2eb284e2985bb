extension KafkaProducer {
    /// Looks up the partitions and leaders of `topics` now (`rd_kafka_metadata`, on a thread of its own), so the
    /// first `send` to each goes straight to its partition.
    ///
    /// Without it, librdkafka 2.0 holds the first messages to a topic it has not produced to yet until a metadata
    /// refresh places them: in `bench pipeline` (b) the frontend's first 2,000 jobs waited 0.93 s for their delivery
    /// reports, the workers meanwhile idle. A worker calls it for its output topics before it reads, so the first
    /// verdicts after a start do not wait either.
    /// - Throws: `KafkaError` when the cluster did not answer within `timeout` or a topic is unknown.
    public func prepare(topics: [String], timeout: Duration = .seconds(10)) async throws(KafkaError) {
        let milliseconds = timeout.rdKafkaMilliseconds
        let client = self.rdKafkaClient
        for topic in topics {
            let failure: KafkaError? = await BlockingCall.run(name: "kafka-metadata") {
                client.lookUpTopic(topic, timeoutMilliseconds: milliseconds)
            }
            if let failure { throw failure }
        }
    }
}
