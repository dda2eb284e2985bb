import Kafka
import Logging
import Messages
import ServiceLifecycle
import Synchronization

/// Reads `receipt-verdicts` (and, when asked, `receipt-jobs-dlq`) from the beginning in a consumer group of its own,
/// and hands every record to `received`: the one verdict reader of the demo, the benchmarks and the chaos harness.
/// A service: it reads until the group shuts down (or its owner closes it, having read enough).
public final class TrafficReader: Service, Sendable {
    /// One record read.
    public enum Record: Sendable {
        /// A verdict, with the record's timestamp (milliseconds since 1970), if the broker gave one.
        case verdict(Verdict, recordedMilliseconds: Int64?)
        /// A record on the verdicts topic that is no verdict, and why.
        case unreadableVerdict(error: String)
        /// A dead letter: its key and the reason its headers give.
        case deadLetter(key: String, reason: String)
    }

    /// The consumer, for its assignment (a harness waits until the reader holds every partition).
    public let consumer: KafkaConsumer
    private let received: @Sendable (Record, KafkaTopicPartition, Int64) -> Void
    private let closed = Atomic(false)

    /// Subscribes a consumer in `groupID` to the verdicts (and, with `deadLetters`, the dead letters).
    ///
    /// - Parameters:
    ///   - properties: librdkafka properties over the defaults (the demo fetches eagerly to time verdicts).
    ///   - received: called on the reader's task for each record, with its partition and offset.
    public init(
        bootstrapServers: String, groupID: String, deadLetters: Bool, properties: [String: String] = [:],
        logger: Logger, received: @escaping @Sendable (Record, KafkaTopicPartition, Int64) -> Void
    ) throws {
        consumer = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(
                bootstrapServers: bootstrapServers, groupID: groupID, properties: properties),
            logger: logger)
        try consumer.subscribe(topics: deadLetters ? [Topics.verdicts, Topics.deadLetters] : [Topics.verdicts])
        self.received = received
    }

    /// Reads until the group shuts down, which closes the consumer; closed earlier by its owner, it waits for that.
    public func run() async throws {
        try await withGracefulShutdownHandler {
            try await read()
        } onGracefulShutdown: {
            Task { await self.close() }
        }
        try? await gracefulShutdown()
    }

    /// Reads until the consumer is closed (outside a service group).
    public func read() async throws {
        let codec = MessageCodec()
        for try await event in consumer.events {
            guard case .message(let message) = event else { continue }
            let value = message.value ?? []
            let record: Record
            if message.topic == Topics.verdicts {
                do {
                    record = .verdict(
                        try codec.decodeVerdict(value), recordedMilliseconds: message.timestampMilliseconds)
                } catch {
                    record = .unreadableVerdict(error: "\(error)")
                }
            } else {
                let headers = message.headers.map { (name: $0.name, value: $0.value ?? []) }
                let letter = DeadLetter(key: message.key, value: value, headers: headers)
                record = .deadLetter(
                    key: String(decoding: message.key ?? [], as: UTF8.self), reason: letter?.reason ?? "no dlq headers")
            }
            received(record, message.topicPartition, message.offset)
        }
    }

    /// Closes the consumer once (its owner, or the group's shutdown): reading ends.
    public func close() async {
        guard closed.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged else { return }
        await consumer.close()
    }
}
