import Synchronization

/// What `/readyz` reports: the worker joined its group, its ledger answers, nothing fatal happened, and every output
/// is delivered within the delivery timeout.
public final class WorkerHealth: Sendable {
    private struct State {
        var joinedGroup = false
        var ledgerReachable = true
        var fatal: String?
        var lastLedgerFailureLog: ContinuousClock.Instant?
        var draining = false
        var assignedPartitions = 0
        /// Outputs (verdicts, dead letters) not proven delivered within the delivery timeout, still being retried.
        var overdueOutputs = 0
    }

    private let state = Mutex(State())
    private let clock = ContinuousClock()

    public init() {}

    /// The consumer received an assignment (possibly empty: more workers than partitions).
    public func assigned(partitions: Int) {
        state.withLock {
            $0.joinedGroup = true
            $0.assignedPartitions = partitions
        }
    }

    /// Partitions this worker holds now.
    public var assignedPartitions: Int { state.withLock { $0.assignedPartitions } }

    public func ledgerSucceeded() { state.withLock { $0.ledgerReachable = true } }

    public func ledgerFailed() { state.withLock { $0.ledgerReachable = false } }

    /// The worker is shutting down: it takes no new work.
    public func draining() { state.withLock { $0.draining = true } }

    /// How many outputs are not proven delivered within the delivery timeout (still retried; their jobs are not
    /// committed). Not ready while there is one. Returns the previous count.
    @discardableResult
    public func outputsOverdue(_ count: Int) -> Int {
        state.withLock { state in
            defer { state.overdueOutputs = count }
            return state.overdueOutputs
        }
    }

    public var overdueOutputs: Int { state.withLock { $0.overdueOutputs } }

    /// Records the first fatal fault; returns true if this call recorded it.
    @discardableResult
    public func fail(_ reason: String) -> Bool {
        state.withLock { state in
            guard state.fatal == nil else { return false }
            state.fatal = reason
            return true
        }
    }

    public var fatalReason: String? { state.withLock { $0.fatal } }

    /// Ledger failures are logged at most once every 5 s per worker, however many jobs wait on them.
    func shouldLogLedgerFailure() -> Bool {
        let now = clock.now
        return state.withLock { state in
            if let last = state.lastLedgerFailureLog, last.duration(to: now) < .seconds(5) { return false }
            state.lastLedgerFailureLog = now
            return true
        }
    }

    /// The reasons the worker is not ready (empty when ready).
    public var notReadyReasons: [String] {
        state.withLock { state in
            var reasons: [String] = []
            if !state.joinedGroup { reasons.append("not_in_group") }
            if !state.ledgerReachable { reasons.append("ledger_unreachable") }
            if state.fatal != nil { reasons.append("fatal_error") }
            if state.overdueOutputs > 0 { reasons.append("output_undeliverable") }
            if state.draining { reasons.append("draining") }
            return reasons
        }
    }
}
