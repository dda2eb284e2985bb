/// Keeps the jobs of one key (one account) in order while jobs of different keys run in parallel.
///
/// A job is runnable when no earlier job of its key is running. `enqueue` says whether the job may start now;
/// `complete` hands back the next job of the same key, if one was waiting. The queue holds only waiting jobs:
/// memory is bounded by the pipeline's in-flight limit, which counts waiting and running jobs alike.
public struct KeyOrderedQueue<Key: Hashable & Sendable, Job: Sendable>: Sendable {
    /// Waiting jobs per key whose head is running. A key is present while one of its jobs runs.
    private var waiting: [Key: Lane] = [:]

    /// A FIFO that lets go of each job as it is taken (an `ArraySlice` keeps popped elements in its buffer until
    /// the whole slice is freed: a long lane kept every finished job's message alive). Two stacks: amortized O(1).
    private struct Lane: Sendable {
        /// The next jobs, the first at the end.
        var front: [Job] = []
        /// Later jobs, in arrival order.
        var back: [Job] = []

        mutating func append(_ job: Job) { back.append(job) }

        mutating func popFirst() -> Job? {
            if front.isEmpty {
                front = back.reversed()
                back = []
            }
            return front.popLast()
        }

        var inOrder: [Job] { front.reversed() + back }
    }

    public init() {}

    /// The number of keys with a job running.
    public var activeKeys: Int { waiting.count }

    /// The number of jobs waiting behind a running job of the same key.
    public private(set) var waitingCount = 0

    /// Adds a job. Returns it back if it may start now, nil if it waits behind an earlier job of its key.
    public mutating func enqueue(_ job: Job, key: Key) -> Job? {
        if waiting[key] != nil {
            waiting[key]?.append(job)
            waitingCount += 1
            return nil
        }
        waiting[key] = Lane()
        return job
    }

    /// Marks the running job of `key` as complete and returns the next job of that key to start, if any.
    public mutating func complete(key: Key) -> Job? {
        guard waiting[key] != nil else { return nil }
        // In place (optional chaining on the subscript): no copy of the lane per job.
        guard let next = waiting[key]?.popFirst() else {
            waiting[key] = nil
            return nil
        }
        waitingCount -= 1
        return next
    }

    /// Removes every waiting job whose key matches, returning them in order (for a revoked partition; running jobs
    /// are the caller's to finish or abandon).
    public mutating func removeWaiting(where shouldRemove: (Job) -> Bool) -> [Job] {
        var removed: [Job] = []
        for (key, lane) in waiting {
            let queue = lane.inOrder
            let kept = queue.filter { !shouldRemove($0) }
            if kept.count != queue.count {
                removed.append(contentsOf: queue.filter(shouldRemove))
                waitingCount -= queue.count - kept.count
                waiting[key] = Lane(back: kept)
            }
        }
        return removed
    }
}
