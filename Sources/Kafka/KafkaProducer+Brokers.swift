import Logging
import Synchronization

/// Whether a client reaches any broker. librdkafka raises `_ALL_BROKERS_DOWN` through the error callback when every
/// broker it knows is down, and reports nothing when one is back; a metadata request that a broker answers clears it.
final class KafkaBrokerState: Sendable {
    private let down = Atomic<Bool>(false)

    var allDown: Bool { down.load(ordering: .acquiring) }

    func markAllDown() { down.store(true, ordering: .releasing) }

    func markReachable() { down.store(false, ordering: .releasing) }
}

extension KafkaProducer {
    /// True from librdkafka's `_ALL_BROKERS_DOWN` report until a broker answers again (see ``watchBrokers(interval:logger:onChange:)``).
    public var allBrokersDown: Bool { rdKafkaClient.brokerState.allDown }

    /// Asks the cluster for metadata (`rd_kafka_metadata`, on a thread of its own), of `topic` when one is given;
    /// true when a broker answered within `timeout`, whatever it said of the topic. An answer clears
    /// ``allBrokersDown``.
    public func probeBrokers(timeout: Duration, topic: String? = nil) async -> Bool {
        let milliseconds = timeout.rdKafkaMilliseconds
        let client = rdKafkaClient
        let answered = await BlockingCall.run(name: "kafka-broker-probe") {
            client.probeMetadata(topic: topic, timeoutMilliseconds: milliseconds)
        }
        if answered { client.brokerState.markReachable() }
        return answered
    }

    /// Until cancelled: once every `interval`, while all brokers are down, asks them for metadata; calls `onChange`
    /// with `true` when the client finds every broker down and `false` when one answers again (each logged once).
    public func watchBrokers(
        interval: Duration = .seconds(1), logger: Logger,
        onChange: @escaping @Sendable (_ allDown: Bool) -> Void = { _ in }
    ) async {
        var reportedDown = false
        while !Task.isCancelled {
            if allBrokersDown {
                if !reportedDown {
                    reportedDown = true
                    logger.warning("kafka: every broker is down; not ready until one answers")
                    onChange(true)
                }
                _ = await probeBrokers(timeout: interval)
            }
            if reportedDown, !allBrokersDown {
                reportedDown = false
                logger.notice("kafka: a broker answers again")
                onChange(false)
            }
            do {
                try await Task.sleep(for: interval)
            } catch {
                return
            }
        }
    }
}
