/// The consumer's assignment, pauses, pending rewinds and revocation, in one value behind one lock
/// (`ConsumerRebalanceHandler.state`).
///
/// Pure: no librdkafka call, no event, no log. The rebalance callback, the poll thread and the application's
/// `pause`/`resume`/`rewind` each take the lock, call one method and perform what it returns (push an event, run
/// the revoke hook, seek) after the lock is released, so no C call and no hook ever runs under the lock.
struct ConsumerStateMachine: Sendable {
    /// What to do when librdkafka revokes partitions, in this order: drop their buffered messages, run the revoke
    /// hook with `revocation` (nil when nothing was assigned), clear librdkafka's assignment, then call
    /// ``revokeFinished(_:)``.
    struct RevokeAction {
        var discardBuffered: Set<KafkaTopicPartition>
        var revocation: KafkaRevocation?
    }

    /// The partitions assigned to this member.
    private(set) var assignment: Set<KafkaTopicPartition> = []
    /// The number of the current (or last) assignment: 1 for the first.
    private(set) var generation: UInt64 = 0
    /// Assigned partitions the application paused (a new assignment starts unpaused).
    private var paused: Set<KafkaTopicPartition> = []
    /// The committed offsets the assignment started from (partitions without a commit are absent).
    private var starts: [KafkaTopicPartition: Int64] = [:]
    /// Rewinds asked for and not yet performed: the offset to read again from, per partition.
    private var rewinds: [KafkaTopicPartition: Int64] = [:]
    /// The partitions being revoked (the revoke hook runs), empty otherwise.
    private var revoking: Set<KafkaTopicPartition> = []

    /// The assigned partitions not paused (those librdkafka fetches), each with the committed offset its
    /// assignment started from (-1 without a commit).
    var fetching: [KafkaCommitOffset] {
        assignment.subtracting(paused).map { KafkaCommitOffset(topicPartition: $0, offset: starts[$0] ?? -1) }
    }

    /// Whether a rewind waits to be performed.
    var hasPendingRewinds: Bool { !rewinds.isEmpty }

    // MARK: Rebalance (the poll thread, inside librdkafka's rebalance callback)

    /// librdkafka took the new assignment. Returns the event announcing it, numbered here (before it is pushed), so
    /// that a revoke hook told this number can never take it for a later assignment, however late it runs.
    mutating func assigned(
        _ partitions: [KafkaTopicPartition], startingOffsets: [KafkaTopicPartition: Int64],
        startsUnknown: Set<KafkaTopicPartition>
    ) -> KafkaConsumerEvent {
        generation += 1
        assignment = Set(partitions)
        paused = []
        starts = startingOffsets
        revoking = []
        // Eager rebalancing: whatever was pending was about the previous assignment.
        rewinds = [:]
        return .partitionsAssigned(
            partitions, startingOffsets: startingOffsets, startsUnknown: startsUnknown, generation: generation)
    }

    /// librdkafka revokes `partitions`. Rewinds of them are dropped now (the next owner reads from the committed
    /// offsets) and rewinds asked for while the hook runs are refused.
    mutating func revokeRequested(_ partitions: [KafkaTopicPartition]) -> RevokeAction {
        let revoked = Set(partitions)
        revoking = revoked
        for partition in revoked { rewinds[partition] = nil }
        return RevokeAction(
            discardBuffered: revoked,
            revocation: partitions.isEmpty ? nil : KafkaRevocation(partitions: partitions, generation: generation))
    }

    /// librdkafka's assignment is cleared; returns the event announcing the revocation.
    mutating func revokeFinished(_ partitions: [KafkaTopicPartition]) -> KafkaConsumerEvent {
        let revoked = Set(partitions)
        assignment.subtract(revoked)
        paused.subtract(revoked)
        for partition in revoked {
            starts[partition] = nil
            rewinds[partition] = nil
        }
        revoking = []
        return .partitionsRevoked(partitions)
    }

    // MARK: The application's requests

    /// librdkafka paused (or resumed) these partitions. Only assigned ones are remembered: a new assignment starts
    /// unpaused anyway.
    mutating func pauseApplied(_ partitions: [KafkaTopicPartition], paused isPaused: Bool) {
        if isPaused {
            paused.formUnion(assignment.intersection(partitions))
        } else {
            paused.subtract(partitions)
        }
    }

    /// Records a rewind; a later one for the same partition replaces one not yet performed. Returns false (and
    /// records nothing) for a partition not assigned or being revoked: its next owner reads from the committed offset.
    @discardableResult
    mutating func rewindRequested(_ request: KafkaCommitOffset) -> Bool {
        let partition = request.topicPartition
        guard assignment.contains(partition), !revoking.contains(partition) else { return false }
        rewinds[partition] = request.offset
        return true
    }

    // MARK: The poll thread, between two polls

    /// The rewinds to perform now, in a stable order; they are no longer pending. For each: seek, and on success
    /// drop the partition's buffered messages and push `.rewound`; on failure call ``rewindFailed(_:)``.
    mutating func takePendingRewinds() -> [KafkaCommitOffset] {
        defer { rewinds = [:] }
        return rewinds.keys.sorted { ($0.topic, $0.partition) < ($1.topic, $1.partition) }.map {
            KafkaCommitOffset(topicPartition: $0, offset: rewinds[$0]!)
        }
    }

    /// A seek failed: it is tried again in the next round, unless a newer rewind of the partition replaced it or the
    /// partition is no longer assigned.
    mutating func rewindFailed(_ request: KafkaCommitOffset) {
        let partition = request.topicPartition
        guard assignment.contains(partition), !revoking.contains(partition), rewinds[partition] == nil else { return }
        rewinds[partition] = request.offset
    }
}
