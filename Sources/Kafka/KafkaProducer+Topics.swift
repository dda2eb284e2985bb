import CRdKafka

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
        let milliseconds = Int32(
            clamping: timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        let client = self.rdKafkaClient
        for topic in topics {
            let failure: KafkaError? = await BlockingCall.run(name: "kafka-metadata") {
                client.withHandle { handle -> KafkaError? in
                    // Ownership: `rd_kafka_topic_new` gives us a reference, released below; the client keeps the
                    // topic and the leaders learned here for later sends.
                    guard let rkt = rd_kafka_topic_new(handle, topic, nil) else {
                        return KafkaError(rd_kafka_last_error(), context: "topic \(topic)")
                    }
                    defer { rd_kafka_topic_destroy(rkt) }
                    var metadata: UnsafePointer<rd_kafka_metadata>?
                    let err = rd_kafka_metadata(handle, 0, rkt, &metadata, milliseconds)
                    // Ownership: a successful call hands us the metadata; destroyed here.
                    defer { if let metadata { rd_kafka_metadata_destroy(metadata) } }
                    if err != RD_KAFKA_RESP_ERR_NO_ERROR { return KafkaError(err, context: "metadata of \(topic)") }
                    guard let metadata, metadata.pointee.topic_cnt > 0, let first = metadata.pointee.topics else {
                        return KafkaError(RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC, context: "metadata of \(topic)")
                    }
                    if first.pointee.err != RD_KAFKA_RESP_ERR_NO_ERROR {
                        return KafkaError(first.pointee.err, context: "metadata of \(topic)")
                    }
                    return nil
                }
            }
            if let failure { throw failure }
        }
    }
}
