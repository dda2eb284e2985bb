import Metrics
import Observability
import Synchronization

/// What `/readyz` reports: the worker joined its group, its ledger answers, a broker answers, nothing fatal happened,
/// every output is delivered within the delivery timeout, and no job has retried the ledger past its bound.
public final class WorkerHealth: Sendable {
    private struct State {
        var joinedGroup = false
        var ledgerReachable = true
        var fatal: String?
        var lastLedgerFailureLog: ContinuousClock.Instant?
        var draining = false
        var assignedPartitions = 0
        /// Readiness reasons of Apple configuration faults standing now (`StoreConfigurationWatch`).
        var appleConfigurationFaults: Set<String> = []
        var allBrokersDown = false
        /// Outputs (verdicts, dead letters) not proven delivered within the delivery timeout, still being retried.
        var overdueOutputs = 0
        /// Jobs retrying a failing ledger operation now, and those of them retried past the bound.
        var ledgerRetryingJobs = 0
        var ledgerOverdueJobs = 0
    }

    private let state = Mutex(State())
    private let clock = ContinuousClock()
    private let retryingJobs = Gauge(label: MetricNames.ledgerRetryingJobs)
    private let overdueJobs = Gauge(label: MetricNames.ledgerRetryOverdueJobs)
    private let retries = MetricCache<String, Counter> {
        Counter(label: MetricNames.ledgerRetries, dimensions: [("code", $0)])
    }

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

    /// A job's ledger operation failed with `code` and will be retried.
    func ledgerRetried(code: String) { retries[code].increment() }

    /// A job started retrying a failing ledger operation.
    func ledgerRetryBegan() {
        let count = state.withLock { state in
            state.ledgerRetryingJobs += 1
            return state.ledgerRetryingJobs
        }
        retryingJobs.record(count)
    }

    /// A retrying job passed the bound: not ready while one is overdue.
    func ledgerRetryOverdue() {
        let count = state.withLock { state in
            state.ledgerOverdueJobs += 1
            return state.ledgerOverdueJobs
        }
        overdueJobs.record(count)
    }

    /// A retrying job's ledger step ended, however it ended.
    func ledgerRetryEnded(overdue: Bool) {
        let (retrying, late) = state.withLock { state in
            state.ledgerRetryingJobs -= 1
            if overdue { state.ledgerOverdueJobs -= 1 }
            return (state.ledgerRetryingJobs, state.ledgerOverdueJobs)
        }
        retryingJobs.record(retrying)
        overdueJobs.record(late)
    }

    /// Jobs retrying a failing ledger operation now, and those retried past the bound.
    public var ledgerRetries: (retrying: Int, overdue: Int) {
        state.withLock { ($0.ledgerRetryingJobs, $0.ledgerOverdueJobs) }
    }

    /// librdkafka reports every broker down (`true`), or a broker answers again (`false`).
    public func brokers(allDown: Bool) { state.withLock { $0.allBrokersDown = allDown } }

    /// The worker is shutting down: it takes no new work.
    public func draining() { state.withLock { $0.draining = true } }

    /// Whether the worker is shutting down.
    public var isDraining: Bool { state.withLock { $0.draining } }

    /// Apple refused this worker's configuration (`reason` is the fault's readiness reason).
    public func appleConfigurationFailed(_ reason: String) {
        _ = state.withLock { $0.appleConfigurationFaults.insert(reason) }
    }

    /// Apple accepts the setting again.
    public func appleConfigurationRecovered(_ reason: String) {
        _ = state.withLock { $0.appleConfigurationFaults.remove(reason) }
    }
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
            if state.allBrokersDown { reasons.append("brokers_down") }
            if state.fatal != nil { reasons.append("fatal_error") }
            if state.overdueOutputs > 0 { reasons.append("output_undeliverable") }
            if state.ledgerOverdueJobs > 0 { reasons.append("ledger_retry_overdue") }
            if state.draining { reasons.append("draining") }
            reasons.append(contentsOf: state.appleConfigurationFaults.sorted())
            return reasons
        }
    }
}
