import AppleClients
import Decision
import Foundation
import Ledger
import Logging
import Messages
import Metrics
import Observability
import RateLimiter
import Receipts

/// Decides one job: local analysis, the ledger, Apple only when neither suffices, then the ledger again to record
/// the verdict and the claims atomically. The same job decided again (a redelivery) gets the recorded verdict.
///
/// ```
/// proof ──▶ ReceiptAnalyzer ──▶ evidence ──▶ LedgerSettlement ──▶ verdict
///                                                 │ needs Apple
///                                                 ▼
///                          AppleCaller (gate, retries) ──▶ evidence ──▶ LedgerSettlement ──▶ verdict
/// ```
public struct JobProcessor: Sendable {
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
        /// How long a job may wait for Apple before it ends `unverifiable` / `apple_unavailable`.
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
        /// Whether Apple's answer decided this job: its own call, or one it shared with jobs of the same proof
        /// (``AppleCallCoalescer``). The rest were decided locally.
        public var askedApple: Bool
    }

    public let analyzer: ReceiptAnalyzer
    public let ledger: any Ledger
    public let configuration: Configuration
    let apple: AppleCaller
    /// Each app's verifyReceipt and Server API clients (one app unless the catalog lists several).
    let apps: AppleAppClients
    let health: WorkerHealth
    /// Holds back jobs while Apple refuses this worker's own configuration (21004, Server API 401).
    public let configurationWatch: AppleConfigurationWatch
    let logger: Logger
    let now: @Sendable () -> Date
    /// Proofs the bytes alone rejected lately: most junk is resent as is.
    let rejectedProofs = ProofRejectionCache()
    /// Jobs with the same proof share one Apple answer, within the worker and across the cluster.
    let coalescer: AppleCallCoalescer
    /// Apple calls avoided, by the stage that decided.
    let callsAvoided = MetricCache<String, Counter> {
        Counter(label: MetricNames.appleCallsAvoided, dimensions: [("decided_by", $0)])
    }

    public init(
        analyzer: ReceiptAnalyzer, ledger: any Ledger, apple: AppleCaller, verifyReceipt: VerifyReceiptClient,
        serverAPI: AppStoreServerAPIClient?, configuration: Configuration, health: WorkerHealth, logger: Logger,
        configurationWatch: AppleConfigurationWatch? = nil, now: @escaping @Sendable () -> Date = Date.init,
        coalescing: AppleCoalescingConfiguration = .init(), apps: AppleAppClients? = nil
    ) {
        self.configurationWatch = configurationWatch ?? AppleConfigurationWatch(health: health, logger: logger)
        self.analyzer = analyzer
        self.ledger = ledger
        self.apple = apple
        // Without `apps`: one app, the given clients, for every bundle id (a single-app configuration).
        self.apps =
            apps
            ?? AppleAppClients(
                apps: [
                    .init(
                        bundleID: "", appAppleID: configuration.appAppleID, verifyReceipt: verifyReceipt,
                        serverAPI: serverAPI)
                ], servesEveryBundleID: true)
        self.configuration = configuration
        self.health = health
        self.logger = logger
        self.now = now
        coalescer = AppleCallCoalescer(
            configuration: coalescing, leases: ledger as? any VerificationLeaseStore, logger: logger)
    }

    /// Decides `job`. Ledger failures are retried until the ledger answers (the job stays in flight, so its offset
    /// is not committed); throws `CancellationError` when the task is cancelled, and ``PipelineFatalError`` when the
    /// ledger reports a fault that retrying cannot fix.
    ///
    /// - Parameter recordedAt: the job record's Kafka timestamp; rejections decided from the proof alone take it as
    ///   their `decided_at`, so a redelivery repeats the verdict exactly without the ledger.
    public func process(_ job: ReceiptJob, recordedAt: Date? = nil) async throws -> Decided {
        // The worker's steps, one after the other (a worker parks a job between them: ``PipelineWorker``).
        var step = proofStep(job, recordedAt: recordedAt)
        if case .needsLedger(let pending) = step { step = try await decideWithLedger(pending) }
        switch step {
        case .decided(let decided): return decided
        case .needsApple(let pending): return try await decideWithApple(pending)
        case .needsLedger: throw PipelineFatalError("the ledger step asked for the ledger again")
        }
    }

    /// Decides `job` from its proof alone when the proof decides (junk: most traffic); otherwise the job comes back
    /// as data that needs the ledger (``decideWithLedger(_:)``), so that a worker can park it instead of keeping a
    /// suspended task per waiting job. Synchronous: nothing here waits. Never nil (optional for ``JobDeciding``,
    /// whose deciders may decide everything in ``process(_:recordedAt:)``'s way).
    public func decideFromProof(_ job: ReceiptJob, recordedAt: Date?) -> JobStep? {
        proofStep(job, recordedAt: recordedAt)
    }

    @inline(never)
    private func proofStep(_ job: ReceiptJob, recordedAt: Date?) -> JobStep {
        switch readProof(job, decidedAt: recordedAt ?? job.submittedAt ?? now()) {
        case .rejected(let verdict): return .decided(decidedLocally(verdict))
        case .evidence(let local): return .needsLedger(LedgerBoundJob(job: job, local: local, recordedAt: recordedAt))
        }
    }

    /// Goes on with a job ``decideFromProof(_:recordedAt:)`` found needs the ledger: decided, or it needs Apple (as
    /// data, for ``decideWithApple(_:)``). Throws as ``process(_:recordedAt:)`` does.
    public func decideWithLedger(_ pending: LedgerBoundJob) async throws -> JobStep {
        if let verdict = try await settledVerdict(pending.job, pending.local.evidence, recordedAt: pending.recordedAt) {
            return .decided(decidedLocally(verdict))
        }
        // The deadline counts from here, as it does when the job goes on to Apple at once (``process``).
        return .needsApple(
            AppleBoundJob(
                job: pending.job, local: pending.local, recordedAt: pending.recordedAt,
                deadline: ContinuousClock.now.advanced(by: configuration.jobDeadline)))
    }

    /// Finishes a job ``decideWithLedger(_:)`` found needs Apple: asks Apple (or shares another job's answer) and
    /// settles. Throws as ``process(_:recordedAt:)`` does.
    public func decideWithApple(_ pending: AppleBoundJob) async throws -> Decided {
        let evidence = try await askAppleWithValidConfiguration(
            pending.job, local: pending.local, firstDeadline: pending.deadline)
        return try await settleWithApple(pending.job, evidence, local: pending.local, recordedAt: pending.recordedAt)
    }

    /// How many parked jobs at a time a worker's Apple stage runs: twice the gate's concurrency ceiling (the calls
    /// Apple may take at once, and as many jobs again waiting for a permit, in the ledger or in Kafka around their
    /// calls, so the gate never lacks a caller), at least 256. Not fewer: a job whose deadline passed while it was
    /// parked still takes a runner for its ledger write and its verdict's delivery, and with a low ceiling (4 in
    /// `bench pipeline` part e) a few runners would end thousands of such jobs a few at a time; 256 waiting runners
    /// cost about 3 MB.
    public var appleStageLimit: Int { max(256, 2 * apple.gate.configuration.concurrency.ceiling) }

    /// Asks Apple; while Apple refuses the worker's own configuration, waits (undecided) and asks again. The job's
    /// deadline for Apple counts from each attempt (the first one's was set when the job left the ledger step): a
    /// wait for an operator is not Apple being unavailable.
    @inline(never)
    private func askAppleWithValidConfiguration(
        _ job: ReceiptJob, local: LocalEvidence, firstDeadline: ContinuousClock.Instant
    ) async throws
        -> PurchaseEvidence
    {
        var deadline = firstDeadline
        while true {
            switch try await askApple(job, local: local, deadline: deadline) {
            case .evidence(let evidence): return evidence
            case .refused(let fault):
                try await waitForTurn(fault)
                deadline = ContinuousClock.now.advanced(by: configuration.jobDeadline)
            }
        }
    }

    // MARK: Waiting jobs
    //
    // Thousands of jobs may wait for Apple at once. In a worker they wait parked as data (``JobStep``'s
    // ``LedgerBoundJob`` and ``AppleBoundJob`` in the worker's stages), not as suspended tasks: a task's async frames
    // live in its own allocator, whose slabs are kept until the task ends (about 13 KB per waiting job, 243-317 MB at
    // 10,000 in flight: docs/BENCHMARKS.md, "Memory per waiting job"). Only a stage's runners (256 or more) wait
    // here as tasks, in the chain `decideWithApple` → `askApple` → `askVerifyReceipt` → `AppleCaller.call` → the
    // gate. Each step is still a function of its own, never inlined, and the synchronous work around each await
    // (reading the proof, mapping answers, metrics, logs) is in `@inline(never)` functions, whose locals live on the
    // thread's stack for the moment they run: the followers of a single flight and the jobs held by a configuration
    // fault are tasks, and may be thousands in a replay storm.

    /// The verdict the ledger gives `evidence` (nil: the rules need Apple).
    @inline(never)
    private func settledVerdict(
        _ job: ReceiptJob, _ evidence: PurchaseEvidence, recordedAt: Date?
    ) async throws -> Verdict? {
        guard case .verdict(let verdict) = try await settle(job, evidence, recordedAt: recordedAt) else { return nil }
        return verdict
    }

    /// Apple's evidence for the job, or the local evidence marked unavailable. Jobs asking about the same proof at
    /// once share one call (``AppleCallCoalescer``).
    ///
    /// Apple's refusal of this worker's own configuration is not evidence: it is never shared with other jobs nor
    /// left in the lease (``AppleConfigurationRefusal``), and the job then waits for the setting.
    @inline(never)
    func askApple(
        _ job: ReceiptJob, local: LocalEvidence, deadline: ContinuousClock.Instant
    ) async throws -> AppleStep {
        let request = appleRequest(job, local: local)
        do {
            return .evidence(
                try await coalescer.evidence(
                    key: coalescingKey(request), deadline: deadline, unavailable: local.unavailable
                ) {
                    try await callApple(job, request, local: local, deadline: deadline)
                })
        } catch let refusal as AppleConfigurationRefusal {
            return .refused(refusal.fault)
        }
    }

    /// What asking Apple gave: evidence, or a refusal of the worker's own configuration.
    enum AppleStep {
        case evidence(PurchaseEvidence)
        case refused(AppleConfigurationFault)
    }

    /// Thrown out of a coalesced call when Apple refused the worker's configuration: the single flight then hands the
    /// lead to a waiting job (which waits for the setting in turn), and the lease is released, never answered.
    struct AppleConfigurationRefusal: Error {
        var fault: AppleConfigurationFault
    }

    /// Calls Apple for this job (no other job of the cluster is asking about its proof).
    @inline(never)
    private func callApple(
        _ job: ReceiptJob, _ request: AppleRequest, local: LocalEvidence, deadline: ContinuousClock.Instant
    ) async throws -> PurchaseEvidence {
        switch request {
        case .none:
            return local.unavailable
        case .verifyReceipt(let text, let environment):
            // With the shared secret of the app the receipt names (``appleRequest`` checked there is one).
            guard let client = apps.app(for: local.evidence.bundleID)?.verifyReceipt else { return local.unavailable }
            try await waitForTurn(.sharedSecret)
            return try await askVerifyReceipt(job, text, environment, client, local: local, deadline: deadline)
        case .transactionInfo(let serverAPIs, let transactionID):
            try await waitForTurn(.serverAPIKey)
            return try await askTransactionInfo(job, serverAPIs, transactionID, local: local, deadline: deadline)
        }
    }

    /// Waits while Apple refuses the setting `fault` names (``AppleConfigurationWatch/waitForTurn(_:)``); a held job
    /// steps aside from the worker's Apple stage meanwhile, so it keeps no other job from Apple.
    @inline(never)
    private func waitForTurn(_ fault: AppleConfigurationFault) async throws {
        guard configurationWatch.isStanding(fault) else { return }
        try await JobStageSlot.whileWaitingElsewhere { try await configurationWatch.waitForTurn(fault) }
    }

    /// Settles with Apple's evidence.
    @inline(never)
    private func settleWithApple(
        _ job: ReceiptJob, _ evidence: PurchaseEvidence, local: LocalEvidence, recordedAt: Date?
    ) async throws -> Decided {
        if let verdict = try await settledVerdict(job, evidence, recordedAt: recordedAt) {
            return Decided(verdict: verdict, askedApple: true)
        }
        // The rules decide whenever Apple answered or was unavailable; this is a safety net, never a loop.
        guard let verdict = try await settledVerdict(job, local.unavailable, recordedAt: recordedAt) else {
            throw PipelineFatalError("the decision rules asked for Apple after Apple was asked")
        }
        return Decided(verdict: verdict, askedApple: true)
    }

    /// A verdict reached without calling Apple, counted as an Apple call avoided.
    @inline(never)
    private func decidedLocally(_ verdict: Verdict) -> Decided {
        callsAvoided[verdict.decidedBy.rawValue].increment()
        return Decided(verdict: verdict, askedApple: false)
    }

    // MARK: Local evidence

    /// What a job's proof says, without the proof: a job that waits for the ledger or Apple (thousands may) keeps
    /// its job and this, not a copy of the proof's bytes nor the whole analysis (only the environment it names,
    /// which picks verifyReceipt's first endpoint).
    struct LocalEvidence: Sendable {
        /// Its `bundleID` picks the app whose credentials Apple is asked with.
        var evidence: PurchaseEvidence
        var environment: AppleEnvironment?

        /// The local evidence marked as Apple unavailable: what the rules decide on when Apple cannot answer.
        var unavailable: PurchaseEvidence {
            var unavailable = evidence
            unavailable.appleUnavailable = true
            return unavailable
        }
    }

    enum ProofReading {
        /// The bytes alone reject the job.
        case rejected(Verdict)
        case evidence(LocalEvidence)
    }

    /// Reads the proof (or finds it among recently rejected ones). Synchronous, so the proof's bytes made here do not
    /// outlive it across the ledger and Apple waits that follow; never inlined, so its locals are not part of the
    /// async frame of `process`.
    @inline(never)
    func readProof(_ job: ReceiptJob, decidedAt: Date) -> ProofReading {
        let text = job.proof.text
        // The key reads the proof's bytes in the decoded text; they are copied for the analyzer only on a miss.
        let key = text.flatMap { rejectedProofs.key(for: $0) }
        if let key, let cached = rejectedProofs.evidence(for: key),
            let verdict = statelessRejection(job, cached, decidedAt: decidedAt)
        {
            return .rejected(verdict)
        }
        let local = localEvidence(for: job, bytes: text.map { Array($0.utf8) })
        if let verdict = statelessRejection(job, local.evidence, decidedAt: decidedAt) {
            if let key { rejectedProofs.insert(local.evidence, for: key) }
            return .rejected(verdict)
        }
        return .evidence(local)
    }

    func localEvidence(for job: ReceiptJob, bytes: [UInt8]?) -> LocalEvidence {
        guard let bytes else {
            // A bare transaction id: nothing to read locally. The ledger may know the job; otherwise the Server API
            // is asked.
            return LocalEvidence(evidence: PurchaseEvidence(source: .prefilter, authenticity: .unknown))
        }
        let analysis = analyzer.analyze(bytes)
        return LocalEvidence(
            evidence: EvidenceMapping.evidence(from: analysis.facts, policy: configuration.proofPolicy),
            environment: analysis.environment)
    }

    /// The proof normalized for verifyReceipt. Computed only for the jobs that go to Apple: normalizing scans and
    /// decodes the whole proof, most jobs are decided without Apple, and the analyzer has already normalized once
    /// (done twice for every job, it was about a sixth of a locally decided job's CPU in `bench pipeline`).
    func normalized(_ text: String) -> [UInt8]? {
        try? ReceiptInput.normalize(Array(text.utf8), maximumDecodedSize: analyzer.policy.maximumDecodedSize)
    }

    /// verifyReceipt's `receipt-data`: the normalized proof in base64.
    func receiptData(_ text: String) -> String? {
        normalized(text).map { Data($0).base64EncodedString() }
    }

    /// A rejection the proof's bytes alone decide (not a receipt, another app, an unknown product, a bad
    /// signature, an environment not allowed): no claim is involved, so the ledger is neither read nor written.
    /// Most traffic is such junk (seed 000); recording it would make the ledger the bottleneck for nothing.
    /// A redelivery gets the same verdict again, `decided_at` included: it is the job record's timestamp (or the
    /// job's `submitted_at`), not the time of this delivery.
    func statelessRejection(_ job: ReceiptJob, _ evidence: PurchaseEvidence, decidedAt: Date) -> Verdict? {
        guard evidence.rejection != nil || evidence.authenticity == .notAuthenticated else { return nil }
        let policy = LedgerSettlement.policy(
            catalog: configuration.catalog, allowSandbox: configuration.allowSandbox, now: decidedAt,
            appAppleID: apps.appAppleID(for: evidence.bundleID))
        guard case .decided(let decision) = LedgerSettlement.decide(job: job, evidence: evidence, policy: policy),
            decision.writes.isEmpty,
            decision.verdict.outcome == .rejected
        else { return nil }
        return decision.verdict
    }

    // MARK: Apple

    /// What to ask Apple for a job.
    enum AppleRequest {
        /// Nothing: Apple cannot help (the evidence is the local one, marked unavailable).
        case none
        /// Asked with the shared secret of the receipt's app.
        case verifyReceipt(String, startingAt: AppleEnvironment)
        /// Asked of each client in turn until one app knows the transaction.
        case transactionInfo([AppStoreServerAPIClient], transactionID: String)
    }

    @inline(never)
    func appleRequest(_ job: ReceiptJob, local: LocalEvidence) -> AppleRequest {
        switch job.proof {
        case .receipt(let text):
            guard normalized(text) != nil, apps.app(for: local.evidence.bundleID) != nil else { return .none }
            return .verifyReceipt(text, startingAt: local.environment == .sandbox ? .sandbox : .production)
        case .transactionID(let transactionID):
            let serverAPIs = apps.serverAPIs(for: job.bundleID)
            guard !serverAPIs.isEmpty else {
                logger.notice(
                    "apple: a transaction id job needs the App Store Server API, which is not configured",
                    metadata: [LogKeys.jobID: "\(job.jobID)"])
                return .none
            }
            return .transactionInfo(serverAPIs, transactionID: transactionID)
        case .signedTransaction, .notification:
            // A JWS is verified locally or not at all: Apple cannot vouch for a chain that does not verify.
            return .none
        }
    }

    @inline(never)
    private func askVerifyReceipt(
        _ job: ReceiptJob, _ text: String, _ environment: AppleEnvironment, _ verifyReceipt: VerifyReceiptClient,
        local: LocalEvidence, deadline: ContinuousClock.Instant
    ) async throws -> PurchaseEvidence {
        let result = try await apple.call(
            .verifyReceipt, deadline: deadline,
            status: { (answer: AppleAnswerBox<VerifyReceiptResponse>) in
                AppleCaller.verifyReceiptStatusLabel(answer.value.status.code)
            }
        ) {
            // Made once a permit is held, not before: thousands of jobs may wait for a permit, and each would
            // hold its receipt decoded and re-encoded. Deterministic, so it succeeds here as it did above.
            try await verifyReceipt.verify(receiptData: receiptData(text) ?? "", startingAt: environment).boxed()
        }
        if case .answered(let answer) = result {
            guard answer.value.status != .sharedSecretMismatch else { throw refused(.sharedSecret, job: job) }
            configurationWatch.accepted(.sharedSecret)
        }
        return appleEvidence(result, job: job, local: local, call: "verifyReceipt") {
            EvidenceMapping.evidence(from: $0.storeAnswer, local: local.evidence)
        }
    }

    /// A call Apple refused because of this worker's configuration: counted, and the job waits undecided.
    @inline(never)
    private func refused(_ fault: AppleConfigurationFault, job: ReceiptJob) -> AppleConfigurationRefusal {
        configurationWatch.refused(fault)
        logger.debug(
            "apple: refused the worker's configuration, the job waits undecided",
            metadata: [LogKeys.jobID: "\(job.jobID)", LogKeys.setting: "\(fault.rawValue)"])
        return AppleConfigurationRefusal(fault: fault)
    }

    @inline(never)
    private func askTransactionInfo(
        _ job: ReceiptJob, _ serverAPIs: [AppStoreServerAPIClient], _ transactionID: String, local: LocalEvidence,
        deadline: ContinuousClock.Instant
    ) async throws -> PurchaseEvidence {
        let result = try await apple.call(
            .transactionInfo, deadline: deadline,
            status: { (reply: AppleAnswerBox<ServerAPIReply>) in
                guard case .info = reply.value else { return AppleCaller.keyRefusedLabel }
                return "ok"
            }
        ) {
            // Never empty (``appleRequest`` asks nothing then).
            var outcome = try await serverAPIs[0].transactionInfo(transactionID: transactionID)
            for serverAPI in serverAPIs.dropFirst() {
                // Another app's transaction is not found with this app's key: the next app is asked. One permit
                // covers these lookups; a job that names its app (`bundle_id`) costs one.
                guard case .failed(let error) = outcome, error.httpStatus == 404 else { break }
                outcome = try await serverAPI.transactionInfo(transactionID: transactionID)
            }
            switch outcome {
            case .failed(let error) where error.httpStatus == 401:
                // 401 in both environments (the client asks sandbox after a production 401): the key is refused.
                // An answer, not a failure: it says nothing about Apple's health, so the gate must not back off.
                return .answered(AppleAnswerBox(ServerAPIReply.keyRefused))
            case .answered(let answer): return .answered(AppleAnswerBox(ServerAPIReply.info(answer)))
            case .retryable(let advice): return .retryable(advice)
            case .failed(let error): return .failed(error)
            }
        }
        if case .answered(let answer) = result {
            guard case .info = answer.value else { throw refused(.serverAPIKey, job: job) }
            configurationWatch.accepted(.serverAPIKey)
        }
        return appleEvidence(result, job: job, local: local, call: "transaction info") { reply in
            guard case .info(let info) = reply else { return local.unavailable }
            return EvidenceMapping.evidence(from: info.storeAnswer)
        }
    }

    /// The Server API's answer to a transaction lookup, or its refusal of the worker's key.
    enum ServerAPIReply: Sendable {
        case info(TransactionInfoAnswer)
        case keyRefused
    }

    /// The evidence of Apple's answer to one call (`call` names it in the log when Apple stayed unavailable).
    @inline(never)
    func appleEvidence<Answer>(
        _ result: AppleCaller.Result<AppleAnswerBox<Answer>>, job: ReceiptJob, local: LocalEvidence, call: String,
        from map: (Answer) -> PurchaseEvidence
    ) -> PurchaseEvidence {
        switch result {
        case .answered(let answer):
            return map(answer.value)
        case .unavailable(let reason):
            logger.notice(
                "apple: \(call) unavailable for the job",
                metadata: [LogKeys.jobID: "\(job.jobID)", LogKeys.error: "\(reason)"])
            return local.unavailable
        }
    }

    // MARK: Ledger

    /// Settles `job` in the ledger, retrying what may succeed later until it does. Throws ``LedgerRefusedJob`` when
    /// the ledger refuses the job's values for good (the job becomes a dead letter), ``PipelineFatalError`` for a
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
                    job: job, evidence: evidence, policy: currentPolicy(for: evidence), recordedAt: recordedAt)
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

    @inline(never)
    private func currentPolicy(for evidence: PurchaseEvidence) -> DecisionPolicy {
        LedgerSettlement.policy(
            catalog: configuration.catalog, allowSandbox: configuration.allowSandbox, now: now(),
            appAppleID: apps.appAppleID(for: evidence.bundleID))
    }

    /// Counts a ledger failure; throws ``LedgerRefusedJob`` when the ledger refused this job's values, and
    /// ``PipelineFatalError`` when retrying cannot fix the fault for any job.
    @inline(never)
    private func ledgerFailed(_ error: LedgerError, job: ReceiptJob) throws {
        if error.code == .refused {
            // The database answered: it is reachable, only this job's values are refused.
            health.ledgerSucceeded()
            logger.error(
                "ledger: refused the job's values; the job is dead-lettered",
                metadata: [LogKeys.jobID: "\(job.jobID)", LogKeys.error: "\(error)"])
            throw LedgerRefusedJob(detail: error.detail)
        }
        health.ledgerFailed()
        guard error.isRetryable else {
            throw PipelineFatalError("the ledger reported \(error.code.rawValue): \(error.detail)")
        }
        health.ledgerRetried(code: error.code.rawValue)
        if health.shouldLogLedgerFailure() {
            logger.warning(
                "ledger: operation failed, the job waits and retries",
                metadata: [LogKeys.jobID: "\(job.jobID)", LogKeys.error: "\(error)"])
        }
    }
}

/// How far a job got (``JobProcessor/decideFromProof(_:recordedAt:)``, ``JobProcessor/decideWithLedger(_:)``).
public enum JobStep: Sendable {
    case decided(JobProcessor.Decided)
    /// The proof does not decide; the ledger must be asked (``JobProcessor/decideWithLedger(_:)``).
    case needsLedger(LedgerBoundJob)
    /// The proof and the ledger do not decide; Apple must be asked (``JobProcessor/decideWithApple(_:)``).
    case needsApple(AppleBoundJob)
}

/// A job that needs the ledger, as data: the job and what its proof says, not the proof's bytes twice.
public struct LedgerBoundJob: Sendable {
    public internal(set) var job: ReceiptJob
    let local: JobProcessor.LocalEvidence
    let recordedAt: Date?
}

/// A job that needs Apple, as data: what deciding it needs after the wait for Apple, and no more (not the proof's
/// bytes twice, nor the analysis).
public struct AppleBoundJob: Sendable {
    public internal(set) var job: ReceiptJob
    let local: JobProcessor.LocalEvidence
    let recordedAt: Date?
    /// The deadline of its first attempt at Apple.
    let deadline: ContinuousClock.Instant
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
public struct PipelineFatalError: Error, Sendable, CustomStringConvertible {
    public var description: String

    public init(_ description: String) { self.description = description }
}

extension ReceiptJob.Proof {
    /// The text the analyzer reads (nil for a bare transaction id).
    var text: String? {
        switch self {
        case .receipt(let text), .signedTransaction(let text), .notification(let text): text
        case .transactionID: nil
        }
    }
}
