import Foundation
import Kafka
import Logging
import Observability
import RateLimiter

/// Carries throttle signals between the workers of a cluster over the compacted control topic
/// (`receipt-control`, key = worker id), so that a 21005 storm seen by one worker slows all of them.
///
/// - Outgoing: the gate hands its signal to ``publish``; only the newest unsent signal is kept (an older one is
///   obsolete the moment a newer exists), and ``run(ingest:)`` produces it.
/// - Incoming: every worker reads *all* partitions of the control topic, so it joins a consumer group of its own
///   (`<group>-control-<worker id>`), starts from the earliest retained record (compaction keeps each worker's
///   latest signal, and expired ones are ignored by the receiver) and never commits.
///
/// Trade-offs (see docs/RATE-LIMITING.md): signals are as fresh as the topic's latency (milliseconds on a healthy
/// cluster); a worker that dies stops refreshing its signal, which expires after its lifetime, so it cannot
/// throttle the cluster for long; following the most conservative signal can over-throttle briefly when one
/// worker's view is unrepresentative, which is the safe side during an Apple outage.
public final class ThrottleSignalExchange: Sendable {
    private let producer: KafkaProducer
    private let consumer: KafkaConsumer
    private let topic: String
    private let workerID: String
    private let outgoing: AsyncStream<ThrottleSignal>
    private let outgoingContinuation: AsyncStream<ThrottleSignal>.Continuation
    private let logger: Logger

    /// - Parameters:
    ///   - producer: the worker's producer (shared with verdicts).
    ///   - consumerConfiguration: connection settings; its group id is replaced by one unique to this worker.
    public init(
        producer: KafkaProducer, consumerConfiguration: KafkaConsumerConfiguration, topic: String, workerID: String,
        logger: Logger = Logger(label: "verify.control")
    ) throws(KafkaError) {
        var configuration = consumerConfiguration
        configuration.groupID = consumerConfiguration.groupID + "-control-" + workerID
        configuration.autoOffsetReset = "earliest"
        self.consumer = try KafkaConsumer(configuration: configuration, logger: logger)
        self.producer = producer
        self.topic = topic
        self.workerID = workerID
        self.logger = logger
        (outgoing, outgoingContinuation) = AsyncStream.makeStream(
            of: ThrottleSignal.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Give this to the gate as its `publish` closure. Never blocks; keeps only the newest unsent signal.
    public var publish: @Sendable (ThrottleSignal) -> Void {
        { [outgoingContinuation] signal in outgoingContinuation.yield(signal) }
    }

    /// Publishes outgoing signals and hands every incoming record value to `ingest` (normally
    /// `gate.ingest(signalJSON:)`), until cancelled. A record that is not a signal is logged and skipped.
    public func run(ingest: @escaping @Sendable ([UInt8]) -> Bool) async throws {
        try consumer.subscribe(topics: [topic])
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { [self] in
                for await signal in outgoing {
                    do {
                        _ = try await producer.send(
                            KafkaProducerRecord(
                                topic: topic, key: Array(workerID.utf8), value: Array(try signal.jsonData())))
                    } catch is CancellationError {
                        return
                    } catch {
                        // A lost signal is replaced by the next heartbeat; the worker goes on.
                        logger.warning("throttle signal not published", metadata: ["error": "\(error)"])
                    }
                }
            }
            group.addTask { [self] in
                for try await event in consumer.events {
                    guard case .message(let message) = event, let value = message.value else { continue }
                    if !ingest(value) {
                        logger.debug(
                            "control record ignored (own, expired, stale or not a signal)",
                            metadata: [LogKeys.partition: "\(message.partition)", LogKeys.offset: "\(message.offset)"])
                    }
                }
            }
            defer { outgoingContinuation.finish() }
            do {
                try await group.next()
            } catch {
                group.cancelAll()
                await consumer.close()
                throw error
            }
            group.cancelAll()
            await consumer.close()
        }
    }
}
