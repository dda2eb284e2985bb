/// Keeps the jobs of one key (one account) in order while jobs of different keys run in parallel.
///
/// A job is runnable when no earlier job of its key is running. `enqueue` says whether the job may start now;
/// `complete` hands back the next job of the same key, if one was waiting. The queue holds only waiting jobs:
/// memory is bounded by the pipeline's in-flight limit, which counts waiting and running jobs alike.
public struct KeyOrderedQueue<Key: Hashable & Sendable, Job: Sendable>: Sendable {
    /// Waiting jobs per key whose head is running. A key is present while one of its jobs runs.
    private var waiting: [Key: ArraySlice<Job>] = [:]

    public init() {}

    /// The number of keys with a job running.
    public var activeKeys: Int { waiting.count }

    /// The number of jobs waiting behind a running job of the same key.
    public private(set) var waitingCount = 0

    /// Adds a job. Returns it back if it may start now, nil if it waits behind an earlier job of its key.
    public mutating func enqueue(_ job: Job, key: Key) -> Job? {
        if waiting[key] != nil {
            waiting[key]!.append(job)
            waitingCount += 1
            return nil
        }
        waiting[key] = []
        return job
    }

    /// Marks the running job of `key` as complete and returns the next job of that key to start, if any.
    public mutating func complete(key: Key) -> Job? {
        guard var queue = waiting[key] else { return nil }
        guard let next = queue.popFirst() else {
            waiting[key] = nil
            return nil
        }
        waitingCount -= 1
        waiting[key] = queue
        return next
    }

    /// Removes every waiting job whose key matches, returning them in order (for a revoked partition; running jobs
    /// are the caller's to finish or abandon).
    public mutating func removeWaiting(where shouldRemove: (Job) -> Bool) -> [Job] {
        var removed: [Job] = []
        for (key, queue) in waiting {
            let kept = queue.filter { !shouldRemove($0) }
            if kept.count != queue.count {
                removed.append(contentsOf: queue.filter(shouldRemove))
                waitingCount -= queue.count - kept.count
                waiting[key] = ArraySlice(kept)
            }
        }
        return removed
    }
}
