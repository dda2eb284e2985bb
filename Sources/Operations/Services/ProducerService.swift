import Kafka
import Logging
import Observability
import ServiceLifecycle

// The long-running parts every command shares (`run`, `gateway`, `entitlements`, `reconcile`), each a
// swift-service-lifecycle `Service`. A command builds its parts and runs them in one ``ServiceGroup`` (see
// `ServiceGroup.command`), listed so that the group's reverse-order shutdown is the command's: its consumer or HTTP
// server first, the producer last.

/// A command's Kafka producer (the worker's verdicts, dead letters and throttle signals; the gateway's jobs; the
/// reconciler's recovered jobs). Started first, so stopped last: it flushes what the parts stopped before it handed
/// it, then closes.
public struct ProducerService: Service {
    let producer: KafkaProducer
    /// Topics whose partitions are looked up at start: a fresh producer would otherwise hold the first outputs until
    /// librdkafka's next metadata refresh (about a second; `bench pipeline` (b)).
    let outputTopics: [String]
    /// The lookup starts once this is resolved true (the operations port listens; see ``BackgroundService/after``).
    let after: OneShot<Bool>?
    /// How long the outputs in hand may take to be delivered before the producer closes; nil: no flush of its own
    /// (closing waits for them for up to ``closeTimeout``).
    let flushTimeout: Duration?
    let closeTimeout: Duration
    let logger: Logger

    /// - Parameters:
    ///   - flushTimeout: the flush at shutdown (the worker's 10 s); nil to go straight to closing.
    ///   - closeTimeout: how long closing may take (the worker's 5 s, the gateway's drain timeout).
    public init(
        producer: KafkaProducer, outputTopics: [String] = [], after: OneShot<Bool>? = nil,
        flushTimeout: Duration? = .seconds(10), closeTimeout: Duration = .seconds(5), logger: Logger
    ) {
        self.producer = producer
        self.outputTopics = outputTopics
        self.after = after
        self.flushTimeout = flushTimeout
        self.closeTimeout = closeTimeout
        self.logger = logger
    }

    public func run() async throws {
        await withTaskGroup(of: Void.self) { group in
            if !outputTopics.isEmpty {
                group.addTask { [producer, outputTopics, after, logger] in
                    if let after { guard await after.wait() == true else { return } }
                    do {
                        try await producer.prepare(topics: outputTopics, timeout: .seconds(5))
                    } catch {
                        logger.notice(
                            "kafka: output topics' partitions not looked up at start; the first outputs may wait",
                            metadata: [LogKeys.error: "\(error)"])
                    }
                }
            }
            // Cancelled (the group failed) or asked to stop: the outputs in hand are flushed either way.
            try? await gracefulShutdown()
            group.cancelAll()
        }
        if let flushTimeout {
            do {
                try await producer.flush(timeout: flushTimeout)
            } catch {
                logger.warning("kafka: flush at shutdown failed", metadata: [LogKeys.error: "\(error)"])
            }
        }
        await producer.shutdown(timeout: closeTimeout)
    }
}
