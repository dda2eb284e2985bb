import Foundation
import Kafka
import Synchronization
import Testing

/// Shared pieces of the Kafka suites (prefixed `KafkaTest` to keep the test target's names apart).
enum KafkaTest {
    /// A group id no other test (or earlier run) uses.
    static func uniqueGroup(_ name: String) -> String { "\(name)-\(UUID().uuidString.prefix(8))" }

    /// A mock cluster with these topics.
    static func cluster(brokers: Int = 3, topics: [String: Int]) throws -> MockKafkaCluster {
        let cluster = try MockKafkaCluster(brokers: brokers)
        for (topic, partitions) in topics { try cluster.createTopic(topic, partitions: partitions) }
        return cluster
    }

    static func producer(_ cluster: MockKafkaCluster, properties: [String: String] = [:]) throws -> KafkaProducer {
        try producer(bootstrap: cluster.bootstrapServers, properties: properties)
    }

    static func producer(bootstrap: String, properties: [String: String] = [:]) throws -> KafkaProducer {
        try KafkaProducer(
            configuration: KafkaProducerConfiguration(
                bootstrapServers: bootstrap, lingerMilliseconds: 1, properties: properties))
    }

    /// A consumer of `group`, heartbeating every 500 ms. Its session ends 6 s after its last heartbeat unless
    /// `sessionTimeoutMilliseconds` says otherwise: a test in which a member must outlive a starved stretch of the
    /// full run asks for more. The mock coordinator lets a rebalance of a group that had members wait the group's
    /// session less one second, so every member of one group should ask for the same session.
    ///
    /// librdkafka waits for the answer to a JoinGroup up to `max.poll.interval.ms` + 3 s (303 s by default), and the
    /// mock coordinator can leave a join unanswered when the process stalls during a rebalance: a test that must see
    /// the group settle again within its time limit passes a shorter `maxPollIntervalMilliseconds` (at least the
    /// session), after which the member joins again.
    static func consumer(
        _ bootstrap: String, group: String, sessionTimeoutMilliseconds: Int = 6_000,
        maxPollIntervalMilliseconds: Int? = nil, onRevoke: KafkaConsumer.RevokeHook? = nil
    ) throws -> KafkaConsumer {
        var properties = [
            "reconnect.backoff.max.ms": "500", "topic.metadata.refresh.interval.ms": "1000",
            "heartbeat.interval.ms": "500",
        ]
        if let maxPollIntervalMilliseconds { properties["max.poll.interval.ms"] = String(maxPollIntervalMilliseconds) }
        return try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(
                bootstrapServers: bootstrap, groupID: group, sessionTimeoutMilliseconds: sessionTimeoutMilliseconds,
                properties: properties),
            onRevoke: onRevoke)
    }

    /// The value of message `index` of a run: `"<prefix>-<index>"`.
    static func value(_ prefix: String, _ index: Int) -> [UInt8] { Array("\(prefix)-\(index)".utf8) }

    /// Sends `count` messages concurrently and returns their delivery reports, in index order. `confirmed` sends
    /// with `sendConfirmed`, as the product does wherever a message must not go missing: under produce errors
    /// librdkafka 2.0.2 can acknowledge a message without storing it (see `KafkaProducer.sendConfirmed`).
    static func produce(
        _ producer: KafkaProducer, topic: String, count: Int, prefix: String, partitions: Int? = nil,
        confirmed: Bool = false, onDelivered: (@Sendable (Int) -> Void)? = nil
    ) async throws -> [KafkaDeliveryReport] {
        try await withThrowingTaskGroup(of: (Int, KafkaDeliveryReport).self) { group in
            for index in 0..<count {
                group.addTask {
                    let record = KafkaProducerRecord(
                        topic: topic, partition: partitions.map { Int32(index % $0) }, key: Array("k\(index)".utf8),
                        value: value(prefix, index),
                        headers: [KafkaHeader(name: "index", value: Array(String(index).utf8))])
                    let report = try await confirmed ? producer.sendConfirmed(record) : producer.send(record)
                    onDelivered?(index)
                    return (index, report)
                }
            }
            var reports = [KafkaDeliveryReport?](repeating: nil, count: count)
            for try await (index, report) in group { reports[index] = report }
            return reports.compactMap { $0 }
        }
    }

    /// Reads events until `count` messages arrived; returns them.
    static func collect(
        _ events: KafkaConsumerEvents, messages count: Int,
        where include: (KafkaConsumerMessage) -> Bool = { _ in true }
    ) async throws -> [KafkaConsumerMessage] {
        var collected: [KafkaConsumerMessage] = []
        guard count > 0 else { return collected }
        for try await event in events {
            guard case .message(let message) = event, include(message) else { continue }
            collected.append(message)
            if collected.count == count { break }
        }
        return collected
    }

    /// How many messages the topic's partitions hold (the leaders' high watermarks, the log starting at 0): what a
    /// test then reads, so that a missing message fails an expectation instead of hanging the read.
    static func storedCount(_ producer: KafkaProducer, topic: String, partitions: Int) async throws -> Int {
        var stored = 0
        for partition in 0..<partitions {
            stored += Int(try await producer.watermarks(topic: topic, partition: Int32(partition)).high)
        }
        return stored
    }

    /// Each report names the message it acknowledged: the message stored at the report's partition and offset holds
    /// the value sent as message `index` of `prefix` (`reports` in index order).
    static func expectReportsName(
        _ reports: [KafkaDeliveryReport], prefix: String, in messages: [KafkaConsumerMessage],
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let stored = Dictionary(
            messages.map { ("\($0.topicPartition)@\($0.offset)", text($0.value)) },
            uniquingKeysWith: { first, _ in first })
        let misnamed = reports.enumerated().filter { index, report in
            stored["\(report.topicPartition)@\(report.offset)"] != text(value(prefix, index))
        }
        #expect(
            misnamed.isEmpty, "reports naming another message or none: \(misnamed.prefix(5).map(\.element))",
            sourceLocation: sourceLocation)
    }

    /// Reads events until an assignment arrives; returns it.
    static func awaitAssignment(_ events: KafkaConsumerEvents) async throws -> [KafkaTopicPartition] {
        try await awaitAssignmentAndStarts(events).partitions
    }

    /// Reads events until an assignment arrives; returns it with the committed offsets it starts from.
    static func awaitAssignmentAndStarts(
        _ events: KafkaConsumerEvents
    ) async throws -> (partitions: [KafkaTopicPartition], starts: [KafkaTopicPartition: Int64]) {
        let assignment = try await awaitFullAssignment(events)
        return (assignment.partitions, assignment.starts)
    }

    /// Reads events until an assignment arrives; returns it with the committed offsets it starts from and the
    /// partitions whose committed offset could not be read.
    static func awaitFullAssignment(
        _ events: KafkaConsumerEvents
    ) async throws -> (
        partitions: [KafkaTopicPartition], starts: [KafkaTopicPartition: Int64], unknown: Set<KafkaTopicPartition>
    ) {
        for try await event in events {
            if case .partitionsAssigned(let partitions, let starts, let unknown, _) = event, !partitions.isEmpty {
                return (partitions, starts, unknown)
            }
        }
        throw KafkaTestFailure("the consumer's events ended before an assignment")
    }

    static func text(_ bytes: [UInt8]?) -> String { bytes.map { String(decoding: $0, as: UTF8.self) } ?? "<null>" }
}

struct KafkaTestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Shared state several tasks update, with `wait(until:)` to await a condition on it (no sleeping).
final class KafkaTestProgress<State: Sendable>: Sendable {
    private struct Storage {
        var state: State
        var waiters: [(id: Int, condition: @Sendable (State) -> Bool, continuation: CheckedContinuation<Void, Never>)] =
            []
        var nextID = 0
    }
    private let storage: Mutex<Storage>

    init(_ initial: State) { storage = Mutex(Storage(state: initial)) }

    var state: State { storage.withLock { $0.state } }

    func update(_ change: (inout State) -> Void) {
        let ready = storage.withLock { storage -> [CheckedContinuation<Void, Never>] in
            change(&storage.state)
            let state = storage.state
            let (met, unmet) = (
                storage.waiters.filter { $0.condition(state) }, storage.waiters.filter { !$0.condition(state) }
            )
            storage.waiters = unmet
            return met.map(\.continuation)
        }
        ready.forEach { $0.resume() }
    }

    func wait(until condition: @escaping @Sendable (State) -> Bool) async {
        await withCheckedContinuation { continuation in
            let met = storage.withLock { storage -> Bool in
                if condition(storage.state) { return true }
                storage.nextID += 1
                storage.waiters.append((storage.nextID, condition, continuation))
                return false
            }
            if met { continuation.resume() }
        }
    }
}
