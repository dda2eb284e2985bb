import Kafka
import Synchronization

/// The scheduling state of one worker under one lock: offsets in flight per partition (commit up to the lowest
/// unfinished one), jobs waiting behind an earlier job of the same key, the in-flight bound, and partitions being
/// revoked. Every transition is one short critical section, so a message is never half admitted when a revoke
/// begins.
final class WorkerScheduler: Sendable {
    /// A message taken for processing, with the assignment generation of its partition: work finished for an
    /// earlier assignment never moves the offsets of a later one.
    struct Admitted: Sendable {
        var message: KafkaConsumerMessage
        var generation: UInt64
    }

    /// What became of a consumed message.
    enum Admission {
        /// Taken: the job to start now (this message's, unless its key is busy) and what flow control asks.
        case taken(ready: Admitted?, flow: FlowControl.Action)
        /// Not taken: its partition is being revoked, its offset was taken already (a redelivery), or its
        /// partition is being rewound (the message was read before the seek and comes again after it).
        case ignored
        /// Not taken: its offset skips past `expected`, the lowest offset of the partition not taken yet. Nothing
        /// more of the partition is taken until it was rewound to `expected` (``rewound(_:to:)``): committing past
        /// a message never taken would lose it for good.
        case gap(expected: Int64)
    }

    /// A revoke begun by ``beginRevoke(_:assignment:)``: the partitions it holds back, each with the generation it
    /// found, so that waiting and forgetting leave a later assignment of the same partition alone.
    struct Revocation: Sendable {
        fileprivate var generations: [KafkaTopicPartition: UInt64]
        var partitions: [KafkaTopicPartition] { Array(generations.keys) }
    }

    private struct Partition {
        var offsets = PartitionOffsets()
        /// This worker's own number for this state of the partition; work admitted under an earlier one never
        /// moves its offsets.
        var generation: UInt64
        /// The consumer's number of the assignment that brought the partition (`partitionsAssigned`), if known.
        var assignment: UInt64?
        /// Jobs of this partition being processed now (not those waiting for their key).
        var running = 0
        /// Set while the partition is being rewound to this offset: its messages are ignored until then.
        var rewindingTo: Int64?
        /// After a rewind to this offset, a first message beyond it is taken: the log has no record there (a
        /// transaction marker, a deleted or compacted record), since the consumer read from exactly there.
        var gapConfirmedAt: Int64?
        /// The committed offset the assignment starts from, if known: the first message must not be past it.
        var start: Int64?
        /// Set while the committed offset the assignment starts from could not be read yet: nothing of the partition
        /// is committed until it is (``WorkerScheduler/startsLearned(_:assignment:)``), since its first message
        /// may have been past it.
        var startPending = false
        /// The first offset taken under this state, to check against a start learned late.
        var firstTaken: Int64?

        mutating func take(_ offset: Int64) -> TakeOutcome {
            if rewindingTo != nil { return .ignored }
            if let next = offsets.nextOffset {
                if offset < next { return .ignored }
                if offset > next, gapConfirmedAt != next {
                    rewindingTo = next
                    return .gap(expected: next)
                }
            } else if let start, offset > start, gapConfirmedAt != start {
                rewindingTo = start
                return .gap(expected: start)
            }
            gapConfirmedAt = nil
            guard offsets.start(offset) else { return .ignored }
            if firstTaken == nil { firstTaken = offset }
            return .taken
        }
    }

    private enum TakeOutcome {
        case taken
        case ignored
        case gap(expected: Int64)
    }

    private struct State {
        var partitions: [KafkaTopicPartition: Partition] = [:]
        var revoking: Set<KafkaTopicPartition> = []
        var queue = KeyOrderedQueue<LaneKey, Admitted>()
        var flow: FlowControl
        var nextGeneration: UInt64 = 1
        var idleWaiters: [(revocation: Revocation, continuation: CheckedContinuation<Void, Never>)] = []

        /// Where `partition`'s state is, made on first sight. Every per-job transition finds its partition once by
        /// this index and changes it in place: each lookup hashes the topic's name, and reading a `Partition` out of
        /// the dictionary copies it (its offsets are arrays) only to be written back.
        mutating func index(of partition: KafkaTopicPartition) -> [KafkaTopicPartition: Partition].Index {
            if let index = partitions.index(forKey: partition) { return index }
            partitions[partition] = Partition(generation: nextGeneration)
            nextGeneration += 1
            return partitions.index(forKey: partition)!
        }

        /// Whether `partition` is being revoked; no hashing while nothing is (every job asks, twice).
        func isRevoking(_ partition: KafkaTopicPartition) -> Bool {
            !revoking.isEmpty && revoking.contains(partition)
        }

        /// No job of the revocation's partitions runs under the generation it found (a partition assigned anew
        /// since is idle as far as that revocation is concerned).
        func isIdle(_ revocation: Revocation) -> Bool {
            revocation.generations.allSatisfy { key, generation in
                guard let partition = partitions[key], partition.generation == generation else { return true }
                return partition.running == 0
            }
        }

        /// Removes and returns the waiters whose partitions are all idle now.
        mutating func takeIdleWaiters() -> [CheckedContinuation<Void, Never>] {
            var ready: [CheckedContinuation<Void, Never>] = []
            var waiting: [(revocation: Revocation, continuation: CheckedContinuation<Void, Never>)] = []
            for waiter in idleWaiters {
                if isIdle(waiter.revocation) {
                    ready.append(waiter.continuation)
                } else {
                    waiting.append(waiter)
                }
            }
            idleWaiters = waiting
            return ready
        }
    }

    private let state: Mutex<State>
    /// `flow.inFlight` as of the last transition, stored under the lock: the worker reads it after every admission
    /// and completion (its gauge), and a lock of its own there made the lock's contention with the lanes worse.
    private let inFlightNow = Atomic<Int>(0)

    init(maximumInFlight: Int) {
        state = Mutex(State(flow: FlowControl(maximumInFlight: maximumInFlight)))
    }

    /// Jobs held (running or waiting for their key).
    var inFlight: Int { inFlightNow.load(ordering: .relaxed) }

    /// Publishes the in-flight count to ``inFlight``; called under the lock by every transition that changes it.
    private func publish(_ flow: FlowControl) {
        inFlightNow.store(flow.inFlight, ordering: .relaxed)
    }

    var isPaused: Bool { state.withLock { $0.flow.isPaused } }

    /// Takes a consumed message, unless its partition is being revoked or rewound, its offset was taken already,
    /// or it skips past an offset not taken yet (then the caller rewinds the partition).
    func admit(_ message: KafkaConsumerMessage) -> Admission {
        let key = LaneKey(message.key ?? [])
        return state.withLock { state in
            let partition = message.topicPartition
            guard !state.isRevoking(partition) else { return .ignored }
            let index = state.index(of: partition)
            let generation = state.partitions.values[index].generation
            switch state.partitions.values[index].take(message.offset) {
            case .taken:
                let flow = state.flow.admitted()
                publish(state.flow)
                let admitted = Admitted(message: message, generation: generation)
                return .taken(ready: state.queue.enqueue(admitted, key: key), flow: flow)
            case .gap(let expected):
                return .gap(expected: expected)
            case .ignored:
                return .ignored
            }
        }
    }

    /// The consumer sought `partition` back to `offset` (after ``Admission/gap(expected:)``): its messages are
    /// taken again from there. Returns false for a rewind this worker no longer waits for (the partition was
    /// assigned anew meanwhile), which changes nothing.
    @discardableResult
    func rewound(_ partition: KafkaTopicPartition, to offset: Int64) -> Bool {
        state.withLock { state in
            guard state.partitions[partition]?.rewindingTo == offset else { return false }
            state.partitions[partition]?.rewindingTo = nil
            state.partitions[partition]?.gapConfirmedAt = offset
            return true
        }
    }

    /// Marks a job as running; false when its partition was revoked meanwhile (the job is then skipped: the next
    /// owner of the partition reads it again).
    func beginProcessing(_ admitted: Admitted) -> Bool {
        state.withLock { state in
            let partition = admitted.message.topicPartition
            guard !state.isRevoking(partition), let index = state.partitions.index(forKey: partition),
                state.partitions.values[index].generation == admitted.generation
            else { return false }
            state.partitions.values[index].running += 1
            return true
        }
    }

    /// Ends a job: `processed` if ``beginProcessing(_:)`` let it run, `delivered` if its output reached Kafka (only
    /// then may the offset be committed past it). Returns the next job of the same key and what flow control asks.
    func complete(
        _ admitted: Admitted, processed: Bool, delivered: Bool
    ) -> (
        next: Admitted?, flow: FlowControl.Action
    ) {
        let key = LaneKey(admitted.message.key ?? [])
        let (result, waiters) = state.withLock { state in
            let partition = admitted.message.topicPartition
            if processed, let index = state.partitions.index(forKey: partition),
                state.partitions.values[index].generation == admitted.generation
            {
                state.partitions.values[index].running -= 1
                if delivered { state.partitions.values[index].offsets.finish(admitted.message.offset) }
            }
            let next = state.queue.complete(key: key)
            let flow = state.flow.released()
            publish(state.flow)
            return ((next, flow), state.idleWaiters.isEmpty ? [] : state.takeIdleWaiters())
        }
        for waiter in waiters { waiter.resume() }
        return result
    }

    /// The offsets to commit now: for each partition whose lowest unfinished offset moved since the last call.
    func takeCommits() -> [KafkaCommitOffset] {
        state.withLock { state in
            var commits: [KafkaCommitOffset] = []
            for (key, partition) in state.partitions where !state.revoking.contains(key) && !partition.startPending {
                if let offset = state.partitions[key]?.offsets.takeCommit() {
                    commits.append(KafkaCommitOffset(topicPartition: key, offset: offset))
                }
            }
            return commits
        }
    }

    /// Offsets consumed but not yet committable, per partition (the commit lag gauge).
    func uncommitted() -> [(KafkaTopicPartition, Int64)] {
        state.withLock { state in
            state.partitions.compactMap { key, partition in
                guard let next = partition.offsets.nextOffset else { return nil }
                return (key, next - (partition.offsets.committable ?? next))
            }
        }
    }

    /// Starts revoking: no job of these partitions is admitted or started any more; jobs waiting behind a busy key
    /// are dropped (the next owner reads them again). Returns the revocation, for ``waitUntilIdle(_:)`` and
    /// ``endRevoke(_:)``, and what flow control asks.
    ///
    /// With `assignment` (the consumer's number of the assignment being revoked), a partition is revoked only if
    /// it still belongs to that assignment: a revoke hook that runs late, after the consumer gave the partitions
    /// back and the group assigned them again, must not stop or forget the new assignment (its waiting jobs would
    /// be dropped and the partition never read again, or its offsets forgotten and committed past). Without it
    /// (a drain), every partition named is revoked as it is now.
    func beginRevoke(
        _ partitions: [KafkaTopicPartition], assignment: UInt64? = nil
    ) -> (revocation: Revocation, flow: FlowControl.Action) {
        state.withLock { state in
            var generations: [KafkaTopicPartition: UInt64] = [:]
            for key in partitions {
                guard let partition = state.partitions[key] else {
                    // Nothing taken from it yet: without a generation to match, only a drain holds it back.
                    if assignment == nil { state.revoking.insert(key) }
                    continue
                }
                if let assignment, partition.assignment != assignment { continue }
                generations[key] = partition.generation
                state.revoking.insert(key)
            }
            let revocation = Revocation(generations: generations)
            let dropped = state.queue.removeWaiting { admitted in
                generations[admitted.message.topicPartition] == admitted.generation
            }
            let flow = dropped.isEmpty ? .none : state.flow.released(count: dropped.count)
            publish(state.flow)
            return (revocation, flow)
        }
    }

    /// Waits until no job of the revocation is running (cancellable: the consumer bounds the revoke hook).
    func waitUntilIdle(_ revocation: Revocation) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let idle = state.withLock { state -> Bool in
                    // Checked under the lock: a cancellation after this point finds the waiter and resumes it.
                    if state.isIdle(revocation) || Task.isCancelled { return true }
                    state.idleWaiters.append((revocation, continuation))
                    return false
                }
                if idle { continuation.resume() }
            }
        } onCancel: {
            releaseIdleWaiters()
        }
    }

    /// Gives up waiting (the revoke deadline passed): resumes every idle waiter.
    func releaseIdleWaiters() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            defer { state.idleWaiters = [] }
            return state.idleWaiters.map(\.continuation)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Ends a revoke: forgets the revocation's partitions and returns the offsets to commit for them. A partition
    /// assigned anew since ``beginRevoke(_:assignment:)`` is left as it is, and nothing is committed for it here.
    func endRevoke(_ revocation: Revocation) -> [KafkaCommitOffset] {
        state.withLock { state in
            revocation.generations.compactMap { key, generation in
                guard let partition = state.partitions[key], partition.generation == generation else { return nil }
                state.partitions[key] = nil
                // Not checked against its committed offset yet: the next owner reads it again from the commit.
                guard !partition.startPending else { return nil }
                return partition.offsets.committable.map { KafkaCommitOffset(topicPartition: key, offset: $0) }
            }
        }
    }

    /// A new assignment: these partitions are read again from their committed offsets (`startingAt`, where
    /// known: a first message past it is a gap). `startsUnknown` are partitions whose committed offset could not be
    /// read yet: they are read and processed, but nothing of them is committed until ``startsLearned(_:assignment:)``
    /// checked where they started. `assignment` is the consumer's number for it (`partitionsAssigned`), which its
    /// revoke will name.
    func assigned(
        _ partitions: [KafkaTopicPartition], startingAt starts: [KafkaTopicPartition: Int64] = [:],
        startsUnknown: Set<KafkaTopicPartition> = [], assignment: UInt64? = nil
    ) {
        state.withLock { state in
            state.revoking.subtract(partitions)
            for key in partitions {
                var partition = Partition(generation: state.nextGeneration, assignment: assignment, start: starts[key])
                partition.startPending = startsUnknown.contains(key)
                state.partitions[key] = partition
                state.nextGeneration += 1
            }
        }
    }

    /// Whether `partition` of assignment `assignment` still waits for its committed offset.
    func awaitsStart(_ partition: KafkaTopicPartition, assignment: UInt64) -> Bool {
        state.withLock { state in
            guard let known = state.partitions[partition], known.assignment == assignment else { return false }
            return known.startPending
        }
    }

    /// The committed offsets of partitions that started without them (`startsUnknown`), read late (nil: no commit).
    /// Each is checked as the first message would have been: a partition whose first offset taken is past its
    /// committed offset skipped messages, so it is started afresh there (jobs taken under the old state finish but
    /// move no offset; those read again are decided again, which the ledger makes harmless). Returns those
    /// partitions with the offset to rewind the consumer to; the others may commit from now on. A partition assigned
    /// anew since, or not waiting, is left alone.
    func startsLearned(_ committed: [KafkaTopicPartition: Int64?], assignment: UInt64) -> [KafkaCommitOffset] {
        state.withLock { state in
            var rewinds: [KafkaCommitOffset] = []
            for (key, offset) in committed {
                guard var partition = state.partitions[key], partition.assignment == assignment,
                    partition.startPending
                else { continue }
                partition.startPending = false
                if let offset, let first = partition.firstTaken, first > offset {
                    var fresh = Partition(generation: state.nextGeneration, assignment: assignment, start: offset)
                    fresh.rewindingTo = offset
                    state.nextGeneration += 1
                    state.partitions[key] = fresh
                    rewinds.append(KafkaCommitOffset(topicPartition: key, offset: offset))
                } else {
                    if let offset, partition.firstTaken == nil { partition.start = offset }
                    state.partitions[key] = partition
                }
            }
            return rewinds
        }
    }
}

/// The key a job's lane is ordered by: its message key (the account), hashed once as a whole before the scheduler's
/// lock is taken. (An array's own hashing feeds the hasher one byte at a time, inside the lock: 2 % of a worker's CPU
/// in `bench pipeline` (b).) Equality still compares the bytes.
struct LaneKey: Hashable, Sendable {
    let bytes: [UInt8]
    let digest: Int

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
        var hasher = Hasher()
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
        digest = hasher.finalize()
    }

    func hash(into hasher: inout Hasher) { hasher.combine(digest) }

    static func == (lhs: LaneKey, rhs: LaneKey) -> Bool { lhs.digest == rhs.digest && lhs.bytes == rhs.bytes }
}
