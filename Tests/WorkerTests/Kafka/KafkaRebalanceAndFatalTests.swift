import Foundation
import Synchronization
import Testing

@testable import Kafka

/// The revoke hook and the fatal-error path of the Kafka layer.
@Suite("Kafka revoke hook and fatal errors")
struct KafkaRebalanceAndFatalTests {
    @Test(
        "the revoke hook is told which assignment it takes away; the next assignment has a higher number",
        .timeLimit(.minutes(2)))
    func revocationNamesItsAssignment() async throws {
        let topic = "kt-generation"
        let cluster = try KafkaTest.cluster(brokers: 1, topics: [topic: 4])
        let group = KafkaTest.uniqueGroup("generation")
        let revocations = Mutex<[UInt64]>([])
        let first = try KafkaTest.consumer(cluster.bootstrapServers, group: group) { revocation in
            revocations.withLock { $0.append(revocation.generation) }
        }
        try first.subscribe(topics: [topic])
        var assignments: [UInt64] = []
        var second: KafkaConsumer?
        for try await event in first.events {
            if case .partitionsAssigned(let partitions, _, _, let generation) = event, !partitions.isEmpty {
                assignments.append(generation)
                if assignments.count == 1 {
                    // A second member joins: the first one's assignment is revoked, then it gets a new one.
                    let joining = try KafkaTest.consumer(cluster.bootstrapServers, group: group)
                    try joining.subscribe(topics: [topic])
                    Task { for try await _ in joining.events {} }
                    second = joining
                } else {
                    break
                }
            }
        }
        #expect(revocations.withLock { $0 } == [assignments[0]])
        #expect(assignments[1] > assignments[0])
        await first.close()
        #expect(revocations.withLock { $0 } == [assignments[0], assignments[1]])
        await second?.close()
    }

    @Test(
        "close runs the revoke hook before giving partitions back, and its commit is where the next member starts",
        .timeLimit(.minutes(2)))
    func revokeHookCommitsBeforeRevocation() async throws {
        let topic = "kt-hook"
        let cluster = try KafkaTest.cluster(topics: [topic: 2])
        let producer = try KafkaTest.producer(cluster)
        _ = try await KafkaTest.produce(producer, topic: topic, count: 40, prefix: "hook", partitions: 2)
        await producer.shutdown()
        let group = KafkaTest.uniqueGroup("hook")

        struct HookState: Sendable {
            var finished: [KafkaTopicPartition: Int64] = [:]
            var revokedCalls: [[KafkaTopicPartition]] = []
            var assignmentDuringHook: Set<KafkaTopicPartition> = []
            var commitFailure: String?
        }
        let state = Mutex(HookState())
        let consumerBox = Mutex<KafkaConsumer?>(nil)
        // A session that outlives a loaded stretch of a full run: a member whose heartbeats were held back past a
        // 6 s session is no longer in the group when it closes, so its hook's commit is refused (UNKNOWN_MEMBER_ID)
        // and the next member starts over; that is the session's rule, not the hook's. The next member asks for the
        // same session (the mock coordinator holds its join for the group's session less a second).
        let session = 15_000
        let first = try KafkaTest.consumer(
            cluster.bootstrapServers, group: group, sessionTimeoutMilliseconds: session
        ) { revoked in
            guard let consumer = consumerBox.withLock({ $0 }) else { return }
            let finished = state.withLock { state in
                state.revokedCalls.append(revoked.partitions)
                state.assignmentDuringHook = consumer.assignment
                return state.finished
            }
            // Give librdkafka a moment of real async work, as a pipeline draining in-flight jobs would.
            await Task.yield()
            do {
                try await consumer.commit(
                    finished.map { KafkaCommitOffset(topicPartition: $0.key, offset: $0.value) })
            } catch {
                state.withLock { $0.commitFailure = "\(error)" }
            }
        }
        consumerBox.withLock { $0 = first }
        try first.subscribe(topics: [topic])
        // "Finish" the first 5 messages of each partition only.
        var perPartition: [Int32: Int] = [:]
        _ = try await KafkaTest.collect(first.events, messages: 40) { message in
            perPartition[message.partition, default: 0] += 1
            if message.offset < 5 {
                state.withLock { $0.finished[message.topicPartition] = message.offset + 1 }
            }
            return true
        }
        await first.close()

        let hookState = state.withLock { $0 }
        #expect(hookState.revokedCalls.count == 1)
        #expect(Set(hookState.revokedCalls.first ?? []).count == 2)
        #expect(hookState.assignmentDuringHook.count == 2, "partitions are still assigned while the hook runs")
        #expect(first.assignment.isEmpty)
        #expect(hookState.commitFailure == nil, "the hook's commit: \(hookState.commitFailure ?? "")")

        let second = try KafkaTest.consumer(cluster.bootstrapServers, group: group, sessionTimeoutMilliseconds: session)
        try second.subscribe(topics: [topic])
        let rest = try await KafkaTest.collect(second.events, messages: 30)
        await second.close()
        #expect(Dictionary(grouping: rest, by: \.partition).mapValues { $0.map(\.offset).min() } == [0: 5, 1: 5])
    }

    @Test(
        "a partition paused before a rebalance and assigned again after it is fetched: a new assignment starts unpaused",
        .timeLimit(.minutes(2)))
    func reassignedPartitionStartsUnpaused() async throws {
        // librdkafka keeps an application's pause on its partition object across an eager rebalance; a pipeline
        // that paused at its in-flight bound and is given the same partitions back would never read them again.
        let topic = "kt-repause"
        let cluster = try KafkaTest.cluster(brokers: 1, topics: [topic: 4])
        let group = KafkaTest.uniqueGroup("repause")
        // A join left unanswered after a stall is given up after 13 s, not 303 s (see `KafkaTest.consumer`).
        let maxPollInterval = 10_000
        let first = try KafkaTest.consumer(
            cluster.bootstrapServers, group: group, maxPollIntervalMilliseconds: maxPollInterval)
        try first.subscribe(topics: [topic])
        let initial = try await KafkaTest.awaitAssignment(first.events)
        #expect(initial.count == 4)
        try first.pause(initial)

        // A second member joins: the first gets some of the same partitions back, and is not told to resume them. A
        // machine stalled past the first member's session can rebalance the group without the second one (the mock
        // coordinator may leave its join unanswered until it gives up): the first gets all four back, paused just the
        // same.
        let second = try KafkaTest.consumer(
            cluster.bootstrapServers, group: group, maxPollIntervalMilliseconds: maxPollInterval)
        try second.subscribe(topics: [topic])
        let reassigned = try await KafkaTest.awaitAssignment(first.events)
        #expect(!reassigned.isEmpty && Set(reassigned).isSubset(of: initial))

        let producer = try KafkaTest.producer(cluster)
        _ = try await KafkaTest.produce(producer, topic: topic, count: 40, prefix: "after", partitions: 4)
        await producer.shutdown()
        // Every partition of the first member's assignment delivers its ten messages. A stall past a session rebalances
        // the group again: the member reads again from the committed offsets (nothing is committed here) and may be
        // given other partitions, all of them paused before. So what counts is what the latest assignment delivered.
        var assignment = Set(reassigned)
        var read: [KafkaTopicPartition: Set<Int64>] = [:]
        for try await event in first.events {
            switch event {
            case .partitionsAssigned(let partitions, _, _, _):
                assignment = Set(partitions)
                read = [:]
            case .partitionsRevoked(let partitions):
                assignment.subtract(partitions)
                read = [:]
            case .message(let message):
                read[message.topicPartition, default: []].insert(message.offset)
            case .rewound:
                break
            }
            if !assignment.isEmpty, assignment.allSatisfy({ read[$0]?.count == 10 }) { break }
        }
        #expect(Set(read.keys) == assignment)
        await second.close()
        await first.close()
    }

    @Test(
        "a partition read ahead of its commit, paused, and assigned again is read from the committed offset",
        .timeLimit(.minutes(2)), arguments: [false, true])
    func reassignedPartitionRestartsAtCommittedOffset(pausedAgain: Bool) async throws {
        // A worker reads ahead of what it finished (thousands in flight), pauses at its bound, and a rebalance gives
        // it the same partitions back. Reading must restart at the group's committed offset: starting where the
        // pause left the fetcher would skip the unfinished jobs below it, which nobody else will ever read.
        let topic = "kt-readahead"
        let cluster = try KafkaTest.cluster(brokers: 1, topics: [topic: 4])
        let producer = try KafkaTest.producer(cluster)
        _ = try await KafkaTest.produce(producer, topic: topic, count: 80, prefix: "before", partitions: 4)
        let group = KafkaTest.uniqueGroup("readahead")
        let first = try KafkaTest.consumer(cluster.bootstrapServers, group: group)
        try first.subscribe(topics: [topic])
        let (initial, initialStarts) = try await KafkaTest.awaitAssignmentAndStarts(first.events)
        #expect(initial.count == 4)
        #expect(initialStarts.isEmpty, "nothing committed yet: auto.offset.reset decides")
        _ = try await KafkaTest.collect(first.events, messages: 80)
        try await first.commit(initial.map { KafkaCommitOffset(topicPartition: $0, offset: 5) })
        try first.pause(initial)

        let second = try KafkaTest.consumer(cluster.bootstrapServers, group: group)
        try second.subscribe(topics: [topic])
        let (reassigned, starts) = try await KafkaTest.awaitAssignmentAndStarts(first.events)
        #expect(!reassigned.isEmpty && reassigned.count < 4)
        #expect(starts == Dictionary(uniqueKeysWithValues: reassigned.map { ($0, Int64(5)) }))
        if pausedAgain {
            // The worker is still at its bound: it pauses the new assignment at once and resumes it later.
            try first.pause(reassigned)
            _ = try await KafkaTest.produce(producer, topic: topic, count: 4, prefix: "paused", partitions: 4)
            try first.resume(reassigned)
        }
        _ = try await KafkaTest.produce(producer, topic: topic, count: 8, prefix: "after", partitions: 4)
        await producer.shutdown()

        // Each reassigned partition holds offsets 0-21 (0-22 paused again): from 5 on is to be read again.
        let read = try await KafkaTest.collect(first.events, messages: (pausedAgain ? 18 : 17) * reassigned.count)
        let lowest = Dictionary(grouping: read, by: \.topicPartition).mapValues { $0.map(\.offset).min() ?? -1 }
        #expect(lowest == Dictionary(uniqueKeysWithValues: reassigned.map { ($0, Int64(5)) }))
        await second.close()
        await first.close()
    }

    @Test("a fatal error finishes the consumer's events by throwing", .timeLimit(.minutes(2)))
    func fatalErrorStopsConsumerLoudly() async throws {
        let topic = "kt-fatal"
        let cluster = try KafkaTest.cluster(topics: [topic: 1])
        let consumer = try KafkaTest.consumer(cluster.bootstrapServers, group: KafkaTest.uniqueGroup("fatal"))
        try consumer.subscribe(topics: [topic])
        _ = try await KafkaTest.awaitAssignment(consumer.events)
        consumer.triggerFatalErrorForTesting(reason: "test")
        let error = await #expect(throws: KafkaError.self) {
            for try await _ in consumer.events {}
        }
        #expect(error?.isFatal == true)
        #expect(error?.isRetryable == false)
        #expect(consumer.fatalError != nil)
        await consumer.close()
    }

    @Test("after a fatal error the producer refuses to send", .timeLimit(.minutes(2)))
    func fatalErrorStopsProducer() async throws {
        let topic = "kt-fatal-producer"
        let cluster = try KafkaTest.cluster(topics: [topic: 1])
        let producer = try KafkaTest.producer(cluster)
        _ = try await producer.send(KafkaProducerRecord(topic: topic, value: Array("before".utf8)))
        producer.triggerFatalErrorForTesting(reason: "test")
        let error = await #expect(throws: KafkaError.self) {
            _ = try await producer.send(KafkaProducerRecord(topic: topic, value: Array("after".utf8)))
        }
        #expect(error?.isFatal == true)
        await producer.shutdown()
    }

    @Test("send suspends while the in-flight bound is reached", .timeLimit(.minutes(2)))
    func inFlightBound() async throws {
        let limiter = InFlightLimiter(limit: 2)
        try await limiter.acquire()
        try await limiter.acquire()
        let third = Task { try await limiter.acquire() }
        let cancelled = Task { try await limiter.acquire() }
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        #expect(limiter.inFlight == 2)
        limiter.release()
        try await third.value
        #expect(limiter.inFlight == 2)
        limiter.release()
        limiter.release()
        #expect(limiter.inFlight == 0)
    }
}
