import CodedErrors
import Decision
import Foundation
import Ledger
import Logging
import Messages
import Metrics
import Observability

/// The job flow's step function (``JobStepping``): reads the proof through the store, consults the ledger, asks the
/// store only when neither decides, then settles again in the ledger to record the verdict and the claims
/// atomically. The same job decided again (a redelivery) gets the recorded verdict.
///
/// ```
/// readProof: store.readProof ──▶ evidence ──▶ stateless rejection? ──▶ decided
///     ▼
/// consultLedger: LedgerSettlement (read, decide, write) ──▶ decided
///     ▼
/// askStore: store.verify (gate, retries) ──▶ evidence ──▶ LedgerSettlement ──▶ decided
/// ```
///
/// The processor never decides: the decision rules do (``LedgerSettlement``, ``DecisionRules``), on the facts the
/// store reports (``PurchaseStore``). Only here are the catalog and the sandbox policy handed to them.
public struct JobProcessor: JobStepping {
    /// The settings of the decision stage.
    public struct Configuration: Sendable {
        /// What the deployment sells (bundle ids, products and their types).
        public var catalog: Catalog
        public var allowSandbox: Bool
        /// The environments a proof read locally may name (``ProofPolicy``). Default: production and sandbox.
        public var proofEnvironments: Set<AppleEnvironment>
        /// Accept Xcode StoreKit-testing proofs read locally (``ProofPolicy``). Default: false.
        public var allowXcode: Bool
        /// The app's Apple id (`apple_app_apple_id`): production notifications must name it. Nil checks nothing.
        public var appAppleID: Int64?
        /// How long a job may wait for the store before it ends `unverifiable` / `apple_unavailable`.
        public var jobDeadline: Duration
        /// The first wait after a ledger failure; it doubles up to ``ledgerMaximumBackoff``.
        public var ledgerInitialBackoff: Duration
        public var ledgerMaximumBackoff: Duration
        /// How long a job may keep retrying a failing ledger operation before the worker reports it overdue
        /// (`/readyz` reason `ledger_retry_overdue`, ``MetricNames/ledgerRetryOverdueJobs``); it goes on retrying.
        public var ledgerRetryOverdue: Duration

        public init(
            catalog: Catalog, allowSandbox: Bool, jobDeadline: Duration = .seconds(600),
            ledgerInitialBackoff: Duration = .milliseconds(100), ledgerMaximumBackoff: Duration = .seconds(5),
            ledgerRetryOverdue: Duration = .seconds(120), appAppleID: Int64? = nil,
            proofEnvironments: Set<AppleEnvironment> = [.production, .sandbox], allowXcode: Bool = false
        ) {
            self.catalog = catalog
            self.proofEnvironments = proofEnvironments
            self.allowXcode = allowXcode
            self.appAppleID = appAppleID
            self.allowSandbox = allowSandbox
            self.jobDeadline = jobDeadline
            self.ledgerInitialBackoff = ledgerInitialBackoff
            self.ledgerMaximumBackoff = ledgerMaximumBackoff
            self.ledgerRetryOverdue = ledgerRetryOverdue
        }

        /// How a proof read locally is judged.
        public var proofPolicy: ProofPolicy {
            ProofPolicy(catalog: catalog, allowedEnvironments: proofEnvironments, allowXcode: allowXcode)
        }
    }

    /// A decided job.
    public struct Decided: Sendable {
        public var verdict: Verdict
        /// Whether the store's answer decided this job: its own call, or one it shared with jobs of the same proof
        /// (``AppleCallCoalescer``). The rest were decided locally.
        public var askedStore: Bool

        public init(verdict: Verdict, askedStore: Bool) {
            self.verdict = verdict
            self.askedStore = askedStore
        }
    }

    /// The store behind the boundary (the App Store).
    public let store: any PurchaseStore
    public let ledger: any Ledger
    public let configuration: Configuration
    let health: WorkerHealth
    let logger: Logger
    let now: @Sendable () -> Date
    /// Proofs the bytes alone rejected lately: most junk is resent as is.
    let rejectedProofs = ProofRejectionCache()
    /// Store calls avoided, by the stage that decided.
    let callsAvoided = MetricCache<String, Counter> {
        Counter(label: MetricNames.appleCallsAvoided, dimensions: [("decided_by", $0)])
    }

    public init(
        store: any PurchaseStore, ledger: any Ledger, configuration: Configuration, health: WorkerHealth,
        logger: Logger, now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.store = store
        self.ledger = ledger
        self.configuration = configuration
        self.health = health
        self.logger = logger
        self.now = now
    }

    // MARK: The steps

    public func advance(_ flow: JobFlow) async throws -> JobFlow {
        switch flow {
        case .readProof(let job, let recordedAt): return readProof(job, recordedAt: recordedAt)
        case .consultLedger(let pending): return try await consultLedger(pending)
        case .askStore(let pending): return .decided(try await askStore(pending))
        case .decided: return flow
        }
    }

    public var storeStageLimit: Int { store.stageLimit }

    /// Decides `job` from its proof alone when the proof decides (junk: most traffic); otherwise the job goes on to
    /// the ledger. Synchronous: nothing here waits, and the proof's bytes made here do not outlive it.
    @inline(never)
    private func readProof(_ job: ReceiptJob, recordedAt: Date?) -> JobFlow {
        let decidedAt = recordedAt ?? job.submittedAt ?? now()
        let text = job.proof.text
        // The key reads the proof's bytes in the decoded text; the store reads them only on a miss.
        let key = text.flatMap { rejectedProofs.key(for: $0) }
        if let key, let cached = rejectedProofs.evidence(for: key),
            let verdict = statelessRejection(job, cached, decidedAt: decidedAt)
        {
            return .decided(decidedLocally(verdict))
        }
        let local = localEvidence(store.readProof(job))
        if let verdict = statelessRejection(job, local.evidence, decidedAt: decidedAt) {
            if let key { rejectedProofs.insert(local.evidence, for: key) }
            return .decided(decidedLocally(verdict))
        }
        return .consultLedger(LedgerBoundJob(job: job, local: local, recordedAt: recordedAt))
    }

    /// The evidence of what the store read: its facts judged by the proof policy (the catalog, the environments).
    /// A proof with nothing to read locally (a bare transaction id) is evidence of nothing yet: the ledger may know
    /// the job, and otherwise the store is asked.
    @inline(never)
    private func localEvidence(_ reading: ProofReading) -> LocalEvidence {
        guard let facts = reading.facts else {
            return LocalEvidence(
                evidence: PurchaseEvidence(source: .prefilter, authenticity: .unknown), environment: reading.environment
            )
        }
        return LocalEvidence(
            evidence: EvidenceMapping.evidence(from: facts, policy: configuration.proofPolicy),
            environment: reading.environment)
    }

    /// The ledger's step: decided by what the ledger knows, or on to the store.
    private func consultLedger(_ pending: LedgerBoundJob) async throws -> JobFlow {
        if let verdict = try await settledVerdict(pending.job, pending.local.evidence, recordedAt: pending.recordedAt) {
            return .decided(decidedLocally(verdict))
        }
        // The deadline counts from here, as it does when the job goes on to the store at once.
        return .askStore(
            StoreBoundJob(
                job: pending.job, local: pending.local, recordedAt: pending.recordedAt,
                deadline: ContinuousClock.now.advanced(by: configuration.jobDeadline)))
    }

    /// The store's step: asks the store (or shares another job's answer) and settles.
    private func askStore(_ pending: StoreBoundJob) async throws -> Decided {
        let evidence = try await store.verify(pending.job, local: pending.local, deadline: pending.deadline)
        return try await settleWithStore(pending.job, evidence, local: pending.local, recordedAt: pending.recordedAt)
    }

    // MARK: Waiting jobs (the synchronous work around each await is kept out of async frames: ``AsyncFrames``)

    /// The verdict the ledger gives `evidence` (nil: the rules need the store).
    @inline(never)
    private func settledVerdict(
        _ job: ReceiptJob, _ evidence: PurchaseEvidence, recordedAt: Date?
    ) async throws -> Verdict? {
        guard case .verdict(let verdict) = try await settle(job, evidence, recordedAt: recordedAt) else { return nil }
        return verdict
    }

    /// Settles with the store's evidence.
    @inline(never)
    private func settleWithStore(
        _ job: ReceiptJob, _ evidence: PurchaseEvidence, local: LocalEvidence, recordedAt: Date?
    ) async throws -> Decided {
        if let verdict = try await settledVerdict(job, evidence, recordedAt: recordedAt) {
            return Decided(verdict: verdict, askedStore: true)
        }
        // The rules decide whenever the store answered or was unavailable; this is a safety net, never a loop.
        guard let verdict = try await settledVerdict(job, local.unavailable, recordedAt: recordedAt) else {
            throw WorkerFatalError("the decision rules asked for the store after the store was asked")
        }
        return Decided(verdict: verdict, askedStore: true)
    }

    /// A verdict reached without calling the store, counted as a call avoided.
    @inline(never)
    private func decidedLocally(_ verdict: Verdict) -> Decided {
        callsAvoided[verdict.decidedBy.rawValue].increment()
        return Decided(verdict: verdict, askedStore: false)
    }

    /// A rejection the proof's bytes alone decide (not a receipt, another app, an unknown product, a bad
    /// signature, an environment not allowed): no claim is involved, so the ledger is neither read nor written.
    /// Most traffic is such junk (seed 000); recording it would make the ledger the bottleneck for nothing.
    /// A redelivery gets the same verdict again, `decided_at` included: it is the job record's timestamp (or the
    /// job's `submitted_at`), not the time of this delivery.
    func statelessRejection(_ job: ReceiptJob, _ evidence: PurchaseEvidence, decidedAt: Date) -> Verdict? {
        guard evidence.rejection != nil || evidence.authenticity == .notAuthenticated else { return nil }
        let policy = policy(for: evidence, now: decidedAt)
        guard case .decided(let decision) = LedgerSettlement.decide(job: job, evidence: evidence, policy: policy),
            decision.writes.isEmpty,
            decision.verdict.outcome == .rejected
        else { return nil }
        return decision.verdict
    }

    /// The policy the rules decide `evidence` under: the catalog, the sandbox setting, the app's store id.
    @inline(never)
    private func policy(for evidence: PurchaseEvidence, now: Date) -> DecisionPolicy {
        LedgerSettlement.policy(
            catalog: configuration.catalog, allowSandbox: configuration.allowSandbox, now: now,
            appAppleID: store.appIdentifier(for: evidence.bundleID))
    }

    /// Settles `job` in the ledger, retrying what may succeed later until it does. Throws ``LedgerRefusedJob`` when
    /// the ledger refuses the job's values for good (the job becomes a dead letter), ``WorkerFatalError`` for a
    /// fault no job can pass, `CancellationError` when cancelled. A job retried longer than
    /// ``Configuration/ledgerRetryOverdue`` is reported overdue until it ends.
    @inline(never)
    func settle(
        _ job: ReceiptJob, _ evidence: PurchaseEvidence, recordedAt: Date? = nil
    ) async throws -> LedgerSettlement.Outcome {
        var backoff = configuration.ledgerInitialBackoff
        var retry = LedgerRetry()
        defer { retry.end(health) }
        while true {
            do {
                let outcome = try await ledger.settle(
                    job: job, evidence: evidence, policy: policy(for: evidence, now: now()), recordedAt: recordedAt)
                health.ledgerSucceeded()
                return outcome
            } catch let error as LedgerError {
                try ledgerFailed(error, job: job)
                retryOverdue(&retry, job: job)
                try await Task.sleep(for: backoff)
                backoff = min(backoff * 2, configuration.ledgerMaximumBackoff)
            }
        }
    }

    /// Counts a job's failed attempt at the ledger and reports the job once it has retried past the bound.
    @inline(never)
    private func retryOverdue(_ retry: inout LedgerRetry, job: ReceiptJob) {
        if retry.failed(after: configuration.ledgerRetryOverdue, health) {
            logger.error(
                "ledger: a job has been retried longer than ledger_retry_overdue_s; it goes on retrying",
                metadata: [LogKeys.jobID: "\(job.jobID)"])
        }
    }

    /// Counts a ledger failure; throws ``LedgerRefusedJob`` when the ledger refused this job's values, and
    /// ``WorkerFatalError`` when retrying cannot fix the fault for any job.
    @inline(never)
    private func ledgerFailed(_ error: LedgerError, job: ReceiptJob) throws {
        if error.code == .refused {
            // The database answered: it is reachable, only this job's values are refused.
            health.ledgerSucceeded()
            logger.error(
                "ledger: refused the job's values; the job is dead-lettered",
                metadata: [LogKeys.jobID: "\(job.jobID)", LogKeys.error: "\(error)"])
            throw LedgerRefusedJob(detail: error.message)
        }
        health.ledgerFailed()
        guard error.isRetryable else {
            throw WorkerFatalError("the ledger reported \(error.code.rawValue): \(error.message)")
        }
        health.ledgerRetried(code: error.code.rawValue)
        if health.shouldLogLedgerFailure() {
            logger.warning(
                "ledger: operation failed, the job waits and retries",
                metadata: [LogKeys.jobID: "\(job.jobID)", LogKeys.error: "\(error)"])
        }
    }
}

/// The ledger refused a job's values for good (``LedgerError/Code/refused``: a constraint, an encoding, a value out
/// of range): asking again would fail again and hold the job's lane for ever, so the job becomes a dead letter
/// (reason `ledger_refused`). The detail names the database's rule, never a value of the job.
public struct LedgerRefusedJob: Error, Sendable, CustomStringConvertible {
    public var detail: String

    public init(detail: String) { self.detail = detail }

    public var description: String { "ledger refused: \(detail)" }
}

/// One job's failed attempts at the ledger: whether it is counted among the jobs retrying, and among those overdue.
struct LedgerRetry {
    private var firstFailure: ContinuousClock.Instant?
    private var overdue = false

    /// Records a failed attempt; returns true when this attempt made the job overdue.
    mutating func failed(after bound: Duration, _ health: WorkerHealth) -> Bool {
        let now = ContinuousClock.now
        let first = firstFailure ?? now
        if firstFailure == nil {
            firstFailure = now
            health.ledgerRetryBegan()
        }
        guard !overdue, first.duration(to: now) >= bound else { return false }
        overdue = true
        health.ledgerRetryOverdue()
        return true
    }

    /// The job's ledger step ended (settled, refused, cancelled or fatal).
    func end(_ health: WorkerHealth) {
        guard firstFailure != nil else { return }
        health.ledgerRetryEnded(overdue: overdue)
    }
}

/// A fault the worker cannot work around (a ledger schema newer than this build, a corrupt row): the worker stops
/// taking jobs, reports not ready and exits non-zero, so its partitions move to a healthy worker.
public struct WorkerFatalError: Error, Sendable, CustomStringConvertible {
    public var description: String

    public init(_ description: String) { self.description = description }
}
