import Deadlines
import Kafka
import Logging
import Messages
import Observability
import Synchronization

/// Publishes one job and returns once Kafka acknowledged it. The gateway answers 2xx only after this returns.
public protocol JobPublishing: Sendable {
    /// - Throws: ``GatewayError`` with code `kafka_unavailable` when Kafka did not acknowledge in time (a retry with
    ///   the same `job_id` may succeed), `too_large` for a record larger than Kafka takes, `kafka_refused` when Kafka
    ///   refused it for good.
    func publish(_ job: ReceiptJob) async throws(GatewayError) -> KafkaDeliveryReport
}

/// Publishes jobs to `receipt-jobs` keyed by `account_id` through an idempotent producer (`acks=all`), each
/// within a deadline.
///
/// Its readiness follows the brokers, not the traffic: ``watchKafka(interval:probeTimeout:)`` asks them for the jobs
/// topic's metadata once every interval, so a gateway taken out of its load balancer (which then sends it no request)
/// becomes ready again by itself when they answer.
public final class KafkaJobPublisher: JobPublishing {
    public let producer: KafkaProducer
    public let topic: String
    private let codec: MessageCodec
    private let deadline: Duration
    /// The largest record the producer takes (``KafkaProducerRecord/framedSize`` against its `message.max.bytes`).
    private let maximumRecordBytes: Int
    private let logger: Logger
    private let reachability = Mutex(KafkaReachability())

    /// - Parameters:
    ///   - deadline: how long `publish` waits for the delivery report. Give the producer a `message.timeout.ms` no
    ///     longer than this so librdkafka gives up on the message at the same time.
    ///   - maximumRecordBytes: the producer's `message.max.bytes`; a larger job is refused before Kafka is asked.
    public init(
        producer: KafkaProducer, topic: String = Topics.jobs, codec: MessageCodec = MessageCodec(),
        deadline: Duration, maximumRecordBytes: Int = KafkaProducerConfiguration().messageMaxBytes, logger: Logger
    ) {
        self.producer = producer
        self.topic = topic
        self.codec = codec
        self.deadline = deadline
        self.maximumRecordBytes = maximumRecordBytes
        self.logger = logger
    }

    public func publish(_ job: ReceiptJob) async throws(GatewayError) -> KafkaDeliveryReport {
        let record = KafkaProducerRecord(topic: topic, key: job.messageKey, value: codec.encode(job))
        // librdkafka would fail it at once with MSG_SIZE_TOO_LARGE: the request is too large, not Kafka unavailable.
        guard record.framedSize <= maximumRecordBytes else {
            throw GatewayError(
                .tooLarge,
                "the job is \(record.framedSize) bytes as a Kafka record; the producer's limit (message.max.bytes) is "
                    + "\(maximumRecordBytes)")
        }
        let producer = self.producer
        // librdkafka's own message timeout is the same, but it is checked only about once a second (and not
        // at all for a message waiting for a place in the in-flight bound): the request's answer keeps to the
        // deadline. A message answered 503 may still reach Kafka later; the retry with its job_id is harmless.
        let outcome = await waitWithin(deadline) { try await producer.sendConfirmed(record) }
        switch outcome {
        case .value(let report):
            reachability.withLock { $0.publishAcknowledged() }
            return report
        case .failure(let error as KafkaError) where error.isPermanent:
            // The same record can never be stored (too large for a broker, a topic this client may not write, an
            // invalid record): not a reason to retry it, nor a sign that Kafka is unavailable to other jobs.
            logger.warning(
                "job refused by kafka for good",
                metadata: [
                    LogKeys.jobID: "\(job.jobID)", LogKeys.topic: "\(topic)", LogKeys.kafkaErrorCode: "\(error.code)",
                ])
            if error.isRecordTooLarge {
                throw GatewayError(
                    .tooLarge, "Kafka refused the job as too large (\(error.code.name)); a smaller job may be accepted")
            }
            throw GatewayError(
                .kafkaRefused,
                "Kafka refused the job for good (\(error.code.name)); sending it again cannot succeed until the "
                    + "operator fixes the cause")
        case .failure(let error):
            reachability.withLock { $0.publishFailed() }
            logger.warning(
                "job not acknowledged by kafka",
                metadata: [LogKeys.jobID: "\(job.jobID)", LogKeys.topic: "\(topic)", LogKeys.error: "\(error)"])
            if let kafka = error as? KafkaError, kafka.code == .shuttingDown {
                throw GatewayError(.shuttingDown, "the gateway is shutting down; retry with the same job_id")
            }
            throw GatewayError(.kafkaUnavailable, "Kafka did not acknowledge the job; retry with the same job_id")
        case .timedOut:
            reachability.withLock { $0.publishFailed() }
            logger.warning(
                "job not acknowledged by kafka within the deadline",
                metadata: [LogKeys.jobID: "\(job.jobID)", LogKeys.topic: "\(topic)"])
            throw GatewayError(
                .kafkaUnavailable, "Kafka did not acknowledge the job in time; retry with the same job_id")
        }
    }

    /// Ready unless the producer failed for good (`kafka_fatal`), no broker answers (`brokers_down`: librdkafka
    /// reports every broker down, or the watch's last probes got no answer), or a publish found Kafka unavailable and
    /// no broker answered since (`kafka_unavailable`).
    public var readiness: (isReady: Bool, reasons: [String]) {
        if producer.fatalError != nil { return (false, ["kafka_fatal"]) }
        let state = reachability.withLock { $0 }
        var reasons: [String] = []
        if producer.allBrokersDown || state.brokersUnanswered { reasons.append("brokers_down") }
        if state.unacknowledgedPublish != nil { reasons.append("kafka_unavailable") }
        return (reasons.isEmpty, reasons)
    }

    /// Until cancelled: once every `interval`, asks the brokers for the jobs topic's metadata (on a thread of its
    /// own, off the cooperative pool) and keeps ``readiness`` to what they answer; logs each change once.
    public func watchKafka(interval: Duration = .seconds(1), probeTimeout: Duration = .seconds(5)) async {
        var wasReady = true
        while !Task.isCancelled {
            let probe = reachability.withLock { $0.probeStarted() }
            let answered = await producer.probeBrokers(timeout: probeTimeout, topic: topic)
            reachability.withLock { $0.probeEnded(probe, answered: answered) }
            let state = readiness
            if state.isReady != wasReady {
                if state.isReady {
                    logger.notice("kafka: a broker answers again; ready")
                } else {
                    logger.warning(
                        "kafka: not ready until a broker answers",
                        metadata: [LogKeys.reason: "\(state.reasons.joined(separator: ","))"])
                }
                wasReady = state.isReady
            }
            do {
                try await Task.sleep(for: interval)
            } catch {
                return
            }
        }
    }
}

/// What the gateway's publisher knows of Kafka's reachability, from publishes and from the watch's probes.
struct KafkaReachability: Sendable {
    /// Probes without an answer in a row that make the gateway unready: one slow answer on a busy machine is not an
    /// outage.
    static let unansweredProbesForDown = 2

    /// Numbers publish failures and probes in the order they happened, so that a probe clears only failures that
    /// came before it started.
    private var sequence: UInt64 = 0
    /// The number of the last publish that Kafka did not acknowledge, until a later publish is acknowledged or a
    /// probe started after it is answered.
    private(set) var unacknowledgedPublish: UInt64?
    private var unansweredProbes = 0

    var brokersUnanswered: Bool { unansweredProbes >= Self.unansweredProbesForDown }

    mutating func publishAcknowledged() { unacknowledgedPublish = nil }

    mutating func publishFailed() {
        sequence += 1
        unacknowledgedPublish = sequence
    }

    /// The probe's number, for ``probeEnded(_:answered:)``.
    mutating func probeStarted() -> UInt64 {
        sequence += 1
        return sequence
    }

    mutating func probeEnded(_ probe: UInt64, answered: Bool) {
        guard answered else {
            unansweredProbes += 1
            return
        }
        unansweredProbes = 0
        if let failed = unacknowledgedPublish, failed < probe { unacknowledgedPublish = nil }
    }
}
