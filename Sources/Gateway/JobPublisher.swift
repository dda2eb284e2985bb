import Deadlines
import Kafka
import Logging
import Messages
import Observability
import Synchronization

/// Publishes one job and returns once Kafka acknowledged it. The gateway answers 2xx only after this returns.
public protocol JobPublishing: Sendable {
    /// - Throws: ``GatewayError`` with code `kafka_unavailable` when Kafka did not acknowledge in time or
    ///   refused the message.
    func publish(_ job: ReceiptJob) async throws(GatewayError) -> KafkaDeliveryReport
}

/// Publishes jobs to `receipt-jobs` keyed by `account_id` through an idempotent producer (`acks=all`), each
/// within a deadline.
public final class KafkaJobPublisher: JobPublishing {
    public let producer: KafkaProducer
    public let topic: String
    private let codec: MessageCodec
    private let deadline: Duration
    private let logger: Logger
    /// Whether the last publish failed for want of Kafka (cleared by the next success): the readiness signal.
    private let lastPublishFailed = Mutex(false)

    /// - Parameter deadline: how long `publish` waits for the delivery report. Give the producer a
    ///   `message.timeout.ms` no longer than this so librdkafka gives up on the message at the same time.
    public init(
        producer: KafkaProducer, topic: String = Topics.jobs, codec: MessageCodec = MessageCodec(),
        deadline: Duration, logger: Logger
    ) {
        self.producer = producer
        self.topic = topic
        self.codec = codec
        self.deadline = deadline
        self.logger = logger
    }

    public func publish(_ job: ReceiptJob) async throws(GatewayError) -> KafkaDeliveryReport {
        let record = KafkaProducerRecord(topic: topic, key: job.messageKey, value: codec.encode(job))
        let producer = self.producer
        // librdkafka's own message timeout is the same, but it is checked only about once a second (and not
        // at all for a message waiting for a place in the in-flight bound): the request's answer keeps to the
        // deadline. A message answered 503 may still reach Kafka later; the retry with its job_id is harmless.
        let outcome = await Deadline.race(deadline) { try await producer.sendConfirmed(record) }
        switch outcome {
        case .value(let report):
            lastPublishFailed.withLock { $0 = false }
            return report
        case .failure(let error):
            lastPublishFailed.withLock { $0 = true }
            logger.warning(
                "job not acknowledged by kafka",
                metadata: [LogKeys.jobID: "\(job.jobID)", LogKeys.topic: "\(topic)", LogKeys.error: "\(error)"])
            if let kafka = error as? KafkaError, kafka.code == .shuttingDown {
                throw GatewayError(.shuttingDown, "the gateway is shutting down; retry with the same job_id")
            }
            throw GatewayError(.kafkaUnavailable, "Kafka did not acknowledge the job; retry with the same job_id")
        case .timedOut:
            lastPublishFailed.withLock { $0 = true }
            logger.warning(
                "job not acknowledged by kafka within the deadline",
                metadata: [LogKeys.jobID: "\(job.jobID)", LogKeys.topic: "\(topic)"])
            throw GatewayError(
                .kafkaUnavailable, "Kafka did not acknowledge the job in time; retry with the same job_id")
        }
    }

    /// Ready unless the producer failed for good, every broker is down, or the last publish found Kafka
    /// unavailable.
    public var readiness: (isReady: Bool, reasons: [String]) {
        if producer.fatalError != nil { return (false, ["kafka_fatal"]) }
        var reasons: [String] = []
        if producer.allBrokersDown { reasons.append("brokers_down") }
        if lastPublishFailed.withLock({ $0 }) { reasons.append("kafka_unavailable") }
        return (reasons.isEmpty, reasons)
    }
}

/// Waits for an operation up to a deadline. The operation is not cancelled when the deadline passes (a
/// produce already handed to librdkafka cannot be taken back); its late result is dropped.
enum Deadline {
    enum Outcome<T: Sendable>: Sendable {
        case value(T)
        case failure(any Error)
        case timedOut
    }

    static func race<T: Sendable>(
        _ deadline: Duration, _ operation: @escaping @Sendable () async throws -> T
    ) async -> Outcome<T> {
        let gate = ResumeGate<Outcome<T>, Never>()
        return await withCheckedContinuation { continuation in
            gate.install(continuation)
            let timer = Task {
                try? await Task.sleep(for: deadline)
                gate.resume(.success(.timedOut))
            }
            Task {
                do {
                    gate.resume(.success(.value(try await operation())))
                } catch {
                    gate.resume(.success(.failure(error)))
                }
                timer.cancel()
            }
        }
    }
}
