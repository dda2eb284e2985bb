import Foundation
import Kafka
import Logging
import Messages
import Pipeline
import Synchronization

/// The offsets in flight per partition of one worker, and which partitions are being revoked.
final class DemoOffsetBook: Sendable {
    private struct State {
        var partitions: [KafkaTopicPartition: PartitionOffsets] = [:]
        var revoking: Set<KafkaTopicPartition> = []
    }

    private let state = Mutex(State())

    /// Takes a message for processing; false when its partition is being revoked or the offset was seen already.
    func start(_ message: KafkaConsumerMessage) -> Bool {
        state.withLock { state in
            guard !state.revoking.contains(message.topicPartition) else { return false }
            return state.partitions[message.topicPartition, default: PartitionOffsets()].start(message.offset)
        }
    }

    /// Marks a message done; returns the offset to commit if the partition's lowest unfinished offset moved.
    func finish(_ message: KafkaConsumerMessage) -> KafkaCommitOffset? {
        state.withLock { state in
            guard state.partitions[message.topicPartition]?.finish(message.offset) == true else { return nil }
            return state.partitions[message.topicPartition]?.takeCommit().map {
                KafkaCommitOffset(topicPartition: message.topicPartition, offset: $0)
            }
        }
    }

    func inFlight(_ partitions: [KafkaTopicPartition]) -> Int {
        state.withLock { state in partitions.reduce(0) { $0 + (state.partitions[$1]?.inFlight ?? 0) } }
    }

    func beginRevoke(_ partitions: [KafkaTopicPartition]) {
        state.withLock { $0.revoking.formUnion(partitions) }
    }

    /// Forgets revoked partitions and returns their last committable offsets.
    func endRevoke(_ partitions: [KafkaTopicPartition]) -> [KafkaCommitOffset] {
        state.withLock { state in
            partitions.compactMap { partition in
                defer { state.partitions[partition] = nil }
                return state.partitions[partition]?.committable.map {
                    KafkaCommitOffset(topicPartition: partition, offset: $0)
                }
            }
        }
    }

    /// A new assignment: these partitions are read again from their committed offsets.
    func assign(_ partitions: [KafkaTopicPartition]) {
        state.withLock { $0.revoking.subtract(partitions) }
    }
}

/// Holds a consumer for its own revoke hook.
final class DemoConsumerSlot: Sendable {
    let consumer = Mutex<KafkaConsumer?>(nil)
}

/// One demo worker: a consumer in the jobs group; jobs of one account (one key) run in order, jobs of different
/// accounts in parallel; offsets are committed up to the lowest unfinished one; fetching pauses while too many jobs
/// are held.
///
/// A simplified stand-in for the Pipeline (issue 7), which replaces it.
final class DemoWorker: Sendable {
    let consumer: KafkaConsumer
    private let producer: KafkaProducer
    private let decider: DemoJobDecider
    private let offsets: DemoOffsetBook
    private let codec = MessageCodec()
    private let logger: Logger
    private let slot: DemoConsumerSlot
    private let queue = Mutex(KeyOrderedQueue<[UInt8], KafkaConsumerMessage>())
    private let flow: Mutex<FlowControl>

    init(
        bootstrapServers: String, groupID: String, producer: KafkaProducer, decider: DemoJobDecider,
        maximumInFlight: Int = 2_000, logger: Logger
    ) throws {
        let offsets = DemoOffsetBook()
        // The hook needs the consumer it is given to: it is set right after creation, before `subscribe`.
        let slot = DemoConsumerSlot()
        let consumer = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(bootstrapServers: bootstrapServers, groupID: groupID),
            logger: Self.kafkaLogger(logger),
            onRevoke: { revoked in
                guard let consumer = slot.consumer.withLock({ $0 }) else { return }
                await Self.handBack(revoked, offsets: offsets, consumer: consumer)
            })
        slot.consumer.withLock { $0 = consumer }
        self.slot = slot
        try consumer.subscribe(topics: [Topics.jobs])
        self.consumer = consumer
        self.producer = producer
        self.decider = decider
        self.offsets = offsets
        self.logger = logger
        self.flow = Mutex(FlowControl(maximumInFlight: maximumInFlight))
    }

    /// The Kafka layer's logger: errors only, since an asynchronous commit refused during the closing rebalance is
    /// expected (the revoke hook's synchronous commit covers it).
    static func kafkaLogger(_ logger: Logger) -> Logger {
        var kafkaLogger = logger
        kafkaLogger.logLevel = max(logger.logLevel, .error)
        return kafkaLogger
    }

    /// Leaves the group (the revoke hook commits) and breaks the hook's reference cycle, so the client is freed.
    func close() async {
        await consumer.close()
        slot.consumer.withLock { $0 = nil }
    }

    /// Reads until the consumer is closed, then lets every job in flight finish.
    func run() async throws {
        try await withThrowingDiscardingTaskGroup { group in
            for try await event in consumer.events {
                switch event {
                case .message(let message):
                    guard offsets.start(message) else { continue }
                    apply(flow.withLock { $0.admitted() })
                    let key = message.key ?? []
                    if let ready = queue.withLock({ $0.enqueue(message, key: key) }) {
                        group.addTask { await self.runKey(startingWith: ready) }
                    }
                case .partitionsAssigned(let partitions):
                    offsets.assign(partitions)
                    // A new assignment starts unpaused.
                    if flow.withLock({ $0.isPaused }) { apply(.pause) }
                case .partitionsRevoked:
                    break
                }
            }
        }
    }

    /// Runs a job, then each job of the same key that queued behind it.
    private func runKey(startingWith first: KafkaConsumerMessage) async {
        var next: KafkaConsumerMessage? = first
        while let message = next {
            let record = await output(for: message)
            await deliver(record, for: message)
            apply(flow.withLock { $0.released() })
            next = queue.withLock { $0.complete(key: message.key ?? []) }
        }
    }

    private func apply(_ action: FlowControl.Action) {
        let assignment = Array(consumer.assignment)
        do {
            switch action {
            case .none: return
            case .pause: try consumer.pause(assignment)
            case .resume: try consumer.resume(assignment)
            }
        } catch {
            logger.warning("demo: pause or resume failed", metadata: ["error": "\(error)"])
        }
    }

    /// The verdict of a job, or a dead letter for a message that is not a job.
    private func output(for message: KafkaConsumerMessage) async -> KafkaProducerRecord {
        let value = message.value ?? []
        let job: ReceiptJob
        do {
            job = try codec.decodeJob(value)
        } catch {
            let letter = DeadLetter(
                rejecting: value, key: message.key, error: error, topic: message.topic, partition: message.partition,
                offset: message.offset)
            return KafkaProducerRecord(
                topic: Topics.deadLetters, key: message.key, value: value,
                headers: letter.headers.map { KafkaHeader(name: $0.name, value: $0.value) })
        }
        let verdict = await decider.decide(job)
        return KafkaProducerRecord(topic: Topics.verdicts, key: Array(job.accountID.utf8), value: codec.encode(verdict))
    }

    /// Produces until delivered (the idempotent producer makes resending safe), then finishes the offset.
    private func deliver(_ record: KafkaProducerRecord, for message: KafkaConsumerMessage) async {
        var delivered = false
        while !delivered, !Task.isCancelled {
            do {
                _ = try await producer.send(record)
                delivered = true
            } catch {
                logger.warning("demo: verdict not delivered, retrying", metadata: ["error": "\(error)"])
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
        // An undelivered job stays unfinished, so its offset is never committed past.
        guard delivered, let commit = offsets.finish(message) else { return }
        do {
            try consumer.commitAsync([commit])
        } catch {
            logger.warning("demo: commit failed", metadata: ["error": "\(error)"])
        }
    }

    /// The revoke hook: waits for the revoked partitions' jobs in flight, then commits where they end.
    private static func handBack(
        _ revoked: [KafkaTopicPartition], offsets: DemoOffsetBook, consumer: KafkaConsumer
    )
        async
    {
        offsets.beginRevoke(revoked)
        // Lanes finish on their own; the consumer bounds this wait by its revoke deadline.
        while offsets.inFlight(revoked) > 0, !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(5))
        }
        let commits = offsets.endRevoke(revoked)
        guard !commits.isEmpty else { return }
        try? await consumer.commit(commits)
    }
}
