import AppleClients
import Crypto
import Decision
import Foundation
import Ledger
import Logging
import Messages
import Observability
import RateLimiter
import Receipts

/// The App Store behind the job flow's store boundary (``PurchaseStore``): reads receipts, signed transactions and
/// notifications locally (``ReceiptAnalyzer``), and asks Apple (verifyReceipt, or the Server API for a bare
/// transaction id) through the call gate (``AppleCaller``), one call per proof across the cluster
/// (``AppleCallCoalescer``), holding jobs back while Apple refuses this worker's own configuration
/// (``StoreConfigurationWatch``).
///
/// Thousands of jobs may wait for Apple at once. In a worker they wait parked as data, and only the store stage's
/// runners wait here as tasks, in the chain ``verify(_:local:deadline:)`` → ``ask(_:local:deadline:)`` → a call
/// → ``AppleCaller/call(_:deadline:status:_:)`` → the gate. The synchronous work around each await is kept out of
/// those async frames (``AsyncFrames``): the followers of a single flight and the jobs held by a configuration fault are
/// tasks, and may be thousands in a replay storm.
public struct AppStore: PurchaseStore {
    public let analyzer: ReceiptAnalyzer
    let apple: AppleCaller
    /// Each app's verifyReceipt and Server API clients (one app unless the catalog lists several).
    let apps: AppleAppClients
    /// Holds back jobs while Apple refuses this worker's own configuration (21004, Server API 401).
    public let configurationWatch: StoreConfigurationWatch
    /// Jobs with the same proof share one Apple answer, within the worker and across the cluster.
    let coalescer: AppleCallCoalescer
    /// How long a job may wait for Apple, counted again from each attempt after a configuration fault was fixed.
    let jobDeadline: Duration
    let logger: Logger

    /// The store stage's runners for Apple's gate (``AppleCallGate/storeStageLimit``).
    public var stageLimit: Int { apple.gate.storeStageLimit }

    public func appIdentifier(for bundleID: String?) -> Int64? { apps.appAppleID(for: bundleID) }

    // MARK: Reading the proof

    public func readProof(_ job: ReceiptJob) -> ProofReading {
        // Another store's proof is none the App Store can read: rejected from the proof alone, never sent to Apple.
        if job.proof.store != .appStore { return ProofReading(facts: Self.anotherStoresProof) }
        // A bare transaction id: nothing to read locally (the Server API is asked unless the ledger knows the job).
        guard let text = job.proof.text else { return ProofReading(facts: nil) }
        let analysis = analyzer.analyze(Array(text.utf8))
        return ProofReading(facts: analysis.facts, environment: analysis.environment)
    }

    /// The facts of a proof of another store (a Google Play purchase): unreadable as an App Store proof.
    static let anotherStoresProof = ProofFacts(
        kind: .unreadable(reason: "a Google Play purchase is not an App Store proof"),
        signature: .notChecked(reason: "another store's proof"))

    /// The receipt as verifyReceipt takes it, normalized once for everything Apple-bound (the request's check, the
    /// coalescing key and the `receipt-data`). Made only for the jobs that go to Apple: normalizing scans and decodes
    /// the whole proof, most jobs are decided without Apple, and the analyzer has already normalized once (done twice
    /// for every job, it was about a sixth of a locally decided job's CPU in `bench pipeline`). Nil for a text that
    /// is not a receipt.
    func appleBound(_ text: String) -> AppleBoundReceipt? {
        guard
            let bytes = try? ReceiptInput.normalize(
                Array(text.utf8), maximumDecodedSize: analyzer.policy.maximumDecodedSize)
        else { return nil }
        let encoded = Data(bytes).base64EncodedString()
        return AppleBoundReceipt(
            // The job's own text when it already is the canonical base64 (as a parked job's is): one copy held
            // while the job waits for a permit, not two.
            receiptData: encoded == text ? text : encoded,
            coalescingKey: "receipt:" + SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined())
    }

    // MARK: Asking Apple

    /// Asks Apple; while Apple refuses the worker's own configuration, waits (undecided) and asks again. The job's
    /// deadline for Apple counts from each attempt (the first one's was set when the job left the ledger step): a
    /// wait for an operator is not Apple being unavailable.
    public func verify(
        _ job: ReceiptJob, local: LocalEvidence, deadline firstDeadline: ContinuousClock.Instant
    ) async throws -> PurchaseEvidence {
        var deadline = firstDeadline
        while true {
            switch try await ask(job, local: local, deadline: deadline) {
            case .evidence(let evidence): return evidence
            case .refused(let fault):
                try await waitForTurn(fault)
                deadline = ContinuousClock.now.advanced(by: jobDeadline)
            }
        }
    }

    /// What to ask Apple for a job.
    enum AppleRequest {
        /// Nothing: Apple cannot help (the evidence is the local one, marked unavailable).
        case none
        /// Asked with the shared secret of the receipt's app.
        case verifyReceipt(AppleBoundReceipt, startingAt: AppleEnvironment)
        /// Asked of each client in turn until one app knows the transaction.
        case transactionInfo([AppStoreServerAPIClient], transactionID: String)
    }

    @inline(never)
    func appleRequest(_ job: ReceiptJob, local: LocalEvidence) -> AppleRequest {
        switch job.proof {
        case .receipt(let text):
            guard apps.app(for: local.evidence.bundleID) != nil, let receipt = appleBound(text) else { return .none }
            return .verifyReceipt(receipt, startingAt: local.environment == .sandbox ? .sandbox : .production)
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
        case .googlePlay, .googlePlayNotification:
            // Another store's purchase: Apple knows nothing of it.
            return .none
        }
    }

    /// Apple's evidence for the job, or the local evidence marked unavailable. Jobs asking about the same proof at
    /// once share one call (``AppleCallCoalescer``).
    ///
    /// Apple's refusal of this worker's own configuration is not evidence: it is never shared with other jobs nor
    /// left in the lease (``AppleConfigurationRefusal``), and the job then waits for the setting.
    @inline(never)
    func ask(_ job: ReceiptJob, local: LocalEvidence, deadline: ContinuousClock.Instant) async throws -> AppleStep {
        let request = appleRequest(job, local: local)
        // A reconciler's correction is decided once, under a job id naming the state its re-read found: an answer
        // another job left seconds before (the lease keeps one) may predate that state (a refund since reversed), and
        // would decide the correction on it for good. It asks Apple itself.
        let key = CorrectionJob.transactionID(ofJobID: job.jobID) == nil ? coalescingKey(request) : nil
        do {
            return .evidence(
                try await coalescer.evidence(key: key, deadline: deadline, unavailable: local.unavailable) {
                    try await callApple(job, request, local: local, deadline: deadline)
                })
        } catch let refusal as AppleConfigurationRefusal {
            return .refused(refusal.fault)
        }
    }

    /// What asking Apple gave: evidence, or a refusal of the worker's own configuration.
    enum AppleStep {
        case evidence(PurchaseEvidence)
        case refused(StoreConfigurationFault)
    }

    /// Thrown out of a coalesced call when Apple refused the worker's configuration: the single flight then hands the
    /// lead to a waiting job (which waits for the setting in turn), and the lease is released, never answered.
    struct AppleConfigurationRefusal: Error {
        var fault: StoreConfigurationFault
    }

    /// Calls Apple for this job (no other job of the cluster is asking about its proof).
    @inline(never)
    private func callApple(
        _ job: ReceiptJob, _ request: AppleRequest, local: LocalEvidence, deadline: ContinuousClock.Instant
    ) async throws -> PurchaseEvidence {
        switch request {
        case .none:
            return local.unavailable
        case .verifyReceipt(let receipt, let environment):
            // With the shared secret of the app the receipt names (``appleRequest`` checked there is one).
            guard let client = apps.app(for: local.evidence.bundleID)?.verifyReceipt else { return local.unavailable }
            try await waitForTurn(.sharedSecret)
            return try await askVerifyReceipt(job, receipt, environment, client, local: local, deadline: deadline)
        case .transactionInfo(let serverAPIs, let transactionID):
            try await waitForTurn(.serverAPIKey)
            return try await askTransactionInfo(job, serverAPIs, transactionID, local: local, deadline: deadline)
        }
    }

    /// Waits while Apple refuses the setting `fault` names (``StoreConfigurationWatch/waitForTurn(_:)``); a held job
    /// steps aside from the worker's store stage meanwhile, so it keeps no other job from Apple.
    @inline(never)
    private func waitForTurn(_ fault: StoreConfigurationFault) async throws {
        guard configurationWatch.isStanding(fault) else { return }
        try await JobStageSlot.whileWaitingElsewhere { try await configurationWatch.waitForTurn(fault) }
    }

    @inline(never)
    private func askVerifyReceipt(
        _ job: ReceiptJob, _ receipt: AppleBoundReceipt, _ environment: AppleEnvironment,
        _ verifyReceipt: VerifyReceiptClient,
        local: LocalEvidence, deadline: ContinuousClock.Instant
    ) async throws -> PurchaseEvidence {
        let result = try await apple.call(
            .verifyReceipt, deadline: deadline,
            status: { (answer: AppleAnswerBox<VerifyReceiptResponse>) in
                AppleCaller.verifyReceiptStatusLabel(answer.value.status.code)
            }
        ) {
            try await verifyReceipt.verify(receiptData: receipt.receiptData, startingAt: environment).boxed()
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
    private func refused(_ fault: StoreConfigurationFault, job: ReceiptJob) -> AppleConfigurationRefusal {
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
}

/// A receipt on its way to verifyReceipt, normalized once (``AppStore/appleBound(_:)``).
struct AppleBoundReceipt: Sendable {
    /// verifyReceipt's `receipt-data`: the normalized receipt in canonical base64.
    let receiptData: String
    /// The key jobs share an Apple answer under: the SHA-256 of the normalized receipt (two encodings of one receipt
    /// are one key; the digest, not the receipt, goes to the ledger).
    let coalescingKey: String
}

extension ReceiptJob.Proof {
    /// The text a store reads (nil for a bare transaction id).
    var text: String? {
        switch self {
        case .receipt(let text), .signedTransaction(let text), .notification(let text): text
        case .transactionID, .googlePlay, .googlePlayNotification: nil
        }
    }
}

extension JobProcessor {
    /// A processor whose stores are the App Store: `apps` (or, without it, one app with the given clients for every
    /// bundle id), Apple called through `apple`, jobs of one proof sharing one call (`coalescing`, its leases in
    /// `ledger`); and Google Play (`googlePlay`; by default one that knows no Play app).
    public init(
        analyzer: ReceiptAnalyzer, ledger: any Ledger, apple: AppleCaller, verifyReceipt: VerifyReceiptClient,
        serverAPI: AppStoreServerAPIClient?, configuration: Configuration, health: WorkerHealth, logger: Logger,
        configurationWatch: StoreConfigurationWatch? = nil, now: @escaping @Sendable () -> Date = Date.init,
        coalescing: AppleCoalescingConfiguration = .init(), apps: AppleAppClients? = nil,
        googlePlay: GooglePlayStore = GooglePlayStore()
    ) {
        let apps =
            apps
            ?? AppleAppClients(
                apps: [
                    .init(
                        bundleID: "", appAppleID: configuration.appAppleID, verifyReceipt: verifyReceipt,
                        serverAPI: serverAPI)
                ], servesEveryBundleID: true)
        let store = AppStore(
            analyzer: analyzer, apple: apple, apps: apps,
            configurationWatch: configurationWatch ?? StoreConfigurationWatch(health: health, logger: logger),
            coalescer: AppleCallCoalescer(
                configuration: coalescing, leases: ledger, logger: logger),
            jobDeadline: configuration.jobDeadline, logger: logger)
        self.init(
            store: PurchaseStores(appStore: store, googlePlay: googlePlay), ledger: ledger,
            configuration: configuration, health: health, logger: logger, now: now)
    }
}
