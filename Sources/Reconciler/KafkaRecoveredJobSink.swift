import Kafka
import Messages

/// Publishes recovered notification jobs to the jobs topic the way the gateway does: keyed by `account_id`, and
/// proven by a delivery report with an offset (a resend after an acknowledgement without one may store the job
/// twice, which the worker decides once: same `job_id`, same content).
public struct KafkaRecoveredJobSink: RecoveredJobSink {
    let producer: KafkaProducer
    let topic: String
    let codec = MessageCodec()

    public init(producer: KafkaProducer, topic: String = Topics.jobs) {
        self.producer = producer
        self.topic = topic
    }

    public func publish(_ job: ReceiptJob) async throws {
        _ = try await producer.sendConfirmed(
            KafkaProducerRecord(topic: topic, key: job.messageKey, value: codec.encode(job)))
    }
}
