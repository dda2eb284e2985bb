/// The offsets of one partition that are in flight, and the offset that is safe to commit.
///
/// Jobs of a partition finish out of order (different accounts run in parallel, Apple answers some in 100 ms and
/// others after retries), but Kafka stores one committed offset per partition: everything below it counts as
/// done. So the committable offset is the lowest offset still unfinished, or one past the highest offset seen
/// when nothing is in flight. Committing further would lose the unfinished jobs below it on a crash (漏单);
/// committing less only means some finished jobs are redelivered, which the ledger makes harmless.
///
/// Offsets need not be contiguous (compaction and transaction markers leave gaps), so the tracker keeps the set
/// of unfinished offsets rather than counting.
public struct PartitionOffsets: Sendable, Hashable {
    /// Unfinished offsets, ascending. Offsets arrive in increasing order from a partition, so appending keeps
    /// the order and the lowest unfinished offset is always the first element.
    private var unfinished: [Int64] = []
    /// Index of the first unfinished entry; entries before it are finished and waiting to be compacted away.
    private var head = 0
    /// Finished flags, parallel to `unfinished`.
    private var finished: [Bool] = []
    /// One past the highest offset started; the committable offset when nothing is in flight.
    public private(set) var nextOffset: Int64?
    /// The last offset handed to a commit, so unchanged positions are not committed again.
    public private(set) var committed: Int64?

    public init() {}

    /// How many offsets of this partition are started and not finished.
    public private(set) var inFlight = 0

    /// Records that the message at `offset` was taken for processing. Offsets must increase; an offset at or
    /// below one already started (a redelivery after a seek) is refused and returns false.
    @discardableResult
    public mutating func start(_ offset: Int64) -> Bool {
        if let next = nextOffset, offset < next { return false }
        unfinished.append(offset)
        finished.append(false)
        nextOffset = offset + 1
        inFlight += 1
        return true
    }

    /// Records that the message at `offset` is done (its verdict or dead letter is delivered). Returns false for
    /// an offset that was not in flight.
    @discardableResult
    public mutating func finish(_ offset: Int64) -> Bool {
        guard let index = binarySearch(offset), !finished[index] else { return false }
        finished[index] = true
        inFlight -= 1
        while head < unfinished.count, finished[head] { head += 1 }
        if head > 64, head * 2 > unfinished.count {
            unfinished.removeFirst(head)
            finished.removeFirst(head)
            head = 0
        }
        return true
    }

    /// The offset to commit: the lowest unfinished one, or one past the highest started; nil before any start.
    public var committable: Int64? {
        head < unfinished.count ? unfinished[head] : nextOffset
    }

    /// The offset to commit now, if it moved since the last call; marks it as committed.
    public mutating func takeCommit() -> Int64? {
        guard let offset = committable, offset != committed else { return nil }
        committed = offset
        return offset
    }

    private func binarySearch(_ offset: Int64) -> Int? {
        var low = head
        var high = unfinished.count - 1
        while low <= high {
            let mid = (low + high) / 2
            if unfinished[mid] == offset { return mid }
            if unfinished[mid] < offset { low = mid + 1 } else { high = mid - 1 }
        }
        return nil
    }
}
