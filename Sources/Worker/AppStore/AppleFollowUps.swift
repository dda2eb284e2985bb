import AppleClients
import CodedErrors
import Decision
import Foundation
import Ledger
import Logging
import Messages
import Metrics
import Observability
import RateLimiter
import Synchronization

/// Settings of ``AppleFollowUps``.
public struct AppleFollowUpsConfiguration: Sendable {
    /// Call Finish Transaction for each granted transaction (`finish_transactions`).
    public var finishTransactions: Bool
    /// Answer each CONSUMPTION_REQUEST (`consumption_answers`).
    public var consumptionAnswers: Bool
    /// The operator's policy on consent (`consumption_customer_consented`): without it no answer is sent. The refund
    /// policy file may set it per app (``RefundPolicy/consented(app:setting:)``).
    public var customerConsented: Bool
    /// Tag granted purchases that carry no `appAccountToken` with the owner's derived token (Set App Account Token,
    /// `set_app_account_tokens`).
    public var setAppAccountTokens: Bool
    /// The catalog a consumption answer is decided with (``RefundAnswer``: each product's
    /// `sample_content_provided`, and its `refund_preference` when no policy is given).
    public var catalog: Catalog
    /// The refund policy whose rules answer (`refund_policy_file`); nil: the policy without a file
    /// (``RefundPolicy/init(catalog:)``: the catalog's shorthand rules, then data only).
    public var refundPolicy: RefundPolicy?
    /// Who claims calls in the ledger (unique per worker process).
    public var holder: String
    /// How long one call may keep retrying through the gate before it is put back for a later sweep.
    public var callDeadline: Duration
    /// How long a claim holds before another worker may take the call over (its holder crashed).
    public var claimLease: Duration
    /// When a call put back is due again.
    public var retryDelay: Duration
    /// Attempts (each a call through the gate until `callDeadline`) before the record is marked `failed`.
    public var maximumAttempts: Int
    /// How often the ledger is swept for calls that are due.
    public var sweepInterval: Duration
    /// Calls made at once by this worker (the gate limits the rate; this bounds the tasks).
    public var maximumConcurrentCalls: Int
    /// Calls queued in memory at most; beyond, new ones are dropped (counted) and never recorded.
    public var maximumQueued: Int
    /// The first and the longest wait between two attempts at a claim the ledger could not record (it is retried
    /// until the ledger answers, with the job in hand).
    public var claimRetryBackoff: ClosedRange<Duration>
    /// The operator's consumption lookup (`consumption_lookup_url`), asked for a one-time product's units consumed
    /// when a consumption answer is built; nil: not asked, the units unknown.
    public var consumptionLookup: ConsumptionLookup?

    public init(
        finishTransactions: Bool, consumptionAnswers: Bool = false, customerConsented: Bool = false,
        setAppAccountTokens: Bool = false, catalog: Catalog = .any, refundPolicy: RefundPolicy? = nil, holder: String,
        callDeadline: Duration = .seconds(60),
        claimLease: Duration = .seconds(300), retryDelay: Duration = .seconds(60), maximumAttempts: Int = 20,
        sweepInterval: Duration = .seconds(30), maximumConcurrentCalls: Int = 16, maximumQueued: Int = 100_000,
        claimRetryBackoff: ClosedRange<Duration> = .milliseconds(100) ... .seconds(5),
        consumptionLookup: ConsumptionLookup? = nil
    ) {
        self.finishTransactions = finishTransactions
        self.consumptionAnswers = consumptionAnswers
        self.customerConsented = customerConsented
        self.setAppAccountTokens = setAppAccountTokens
        self.catalog = catalog
        self.refundPolicy = refundPolicy
        self.holder = holder
        self.callDeadline = callDeadline
        self.claimLease = claimLease
        self.retryDelay = retryDelay
        self.maximumAttempts = maximumAttempts
        self.sweepInterval = sweepInterval
        self.maximumConcurrentCalls = maximumConcurrentCalls
        self.maximumQueued = maximumQueued
        self.claimRetryBackoff = claimRetryBackoff
        self.consumptionLookup = consumptionLookup
    }
}

/// The calls to Apple that follow a durable verdict, once its delivery report came back (so its ledger write is
/// committed too): Finish Transaction for each transaction of a `granted` verdict, and one Send
/// Consumption Information per CONSUMPTION_REQUEST notification, built from the ledger and the catalog.
///
/// - Once: each call is claimed in the ledger (``FollowUpRecordStore``) before it is made; a redelivered job or
///   another worker finds the record and does nothing.
/// - In the background: ``verdictDelivered(_:job:)`` only claims (one ledger write, before the job completes) and
///   queues; ``run()`` makes the calls, through the call gate (per-endpoint rate limit, Retry-After, retries). The
///   partition never waits for Apple here.
/// - Never lost: a call whose holder crashed, or that Apple kept refusing until `callDeadline`, stays `pending` in
///   the ledger and is taken by the next sweep of any worker, up to `maximumAttempts`.
/// - A failure never changes a verdict: the verdict was delivered before the call was queued.
public final class AppleFollowUps: Sendable {
    /// The apps' Server API clients in catalog order (one for a single app). A call record names no app, so a call
    /// goes to each in turn until one is not answered 404 (Apple's answer for another app's transaction).
    private let clients: [AppStoreServerAPIClient]
    private let caller: AppleCaller
    private let store: any FollowUpRecordStore
    private let ledger: any Ledger
    private let configuration: AppleFollowUpsConfiguration
    /// The configuration's refund policy, or the one without a file: built once, not per answer.
    private let refundPolicy: RefundPolicy
    private let logger: Logger
    private let now: @Sendable () -> Date
    /// Claimed calls, each with the end of its claim (``FollowUpClaimWindow``).
    private let queue: AsyncStream<(call: FollowUpRecord.Call, claimEnds: ContinuousClock.Instant)>
    private let input: AsyncStream<(call: FollowUpRecord.Call, claimEnds: ContinuousClock.Instant)>.Continuation
    private let queued = Atomic<Int>(0)

    public init(
        client: AppStoreServerAPIClient, caller: AppleCaller, store: any FollowUpRecordStore, ledger: any Ledger,
        configuration: AppleFollowUpsConfiguration, logger: Logger, now: @escaping @Sendable () -> Date = Date.init,
        otherApps: [AppStoreServerAPIClient] = []
    ) {
        self.clients = [client] + otherApps
        self.caller = caller
        self.store = store
        self.ledger = ledger
        self.configuration = configuration
        self.refundPolicy = configuration.refundPolicy ?? RefundPolicy(catalog: configuration.catalog)
        self.logger = logger
        self.now = now
        (queue, input) = AsyncStream.makeStream(
            of: (call: FollowUpRecord.Call, claimEnds: ContinuousClock.Instant).self)
    }

    /// Whether any follow-up is switched on (the worker then hands this object its delivered verdicts).
    public var isEnabled: Bool {
        configuration.finishTransactions || configuration.consumptionAnswers || configuration.setAppAccountTokens
    }

    /// A verdict's delivery report came back: claims its follow-up calls in the ledger and queues them. Never throws;
    /// waits only while the ledger cannot record a claim (retried until it answers).
    ///
    /// - Returns: whether every call is recorded, so that the job may complete. False only when the task was cancelled
    ///   (a revoke or a drain) before a claim was recorded: the job must then stay uncommitted, so that its next
    ///   owner reads it again and claims the call.
    public func verdictDelivered(_ verdict: Verdict, job: ReceiptJob) async -> Bool {
        var recorded = true
        for call in followUpCalls(of: verdict, job: job) {
            recorded = await claimThenQueue(call) && recorded
        }
        return recorded
    }

    /// The calls a delivered verdict asks for, under the switched-on follow-ups.
    private func followUpCalls(of verdict: Verdict, job: ReceiptJob) -> [FollowUpRecord.Call] {
        var calls: [FollowUpRecord.Call] = []
        if configuration.finishTransactions, verdict.outcome == .granted {
            for transaction in verdict.transactions where transaction.revokedAt == nil {
                calls.append(
                    FollowUpRecord.Call(
                        kind: .finishTransaction, key: transaction.transactionID,
                        transactionID: transaction.transactionID, environment: verdict.environment))
            }
        }
        // A job without a token whose grant is new: the purchase carried no token or the owner's derived one (any
        // other is `account_token_mismatch`), so tagging it with the derived token changes nothing else. Keyed by the
        // original transaction id: one call per subscription or purchase.
        if configuration.setAppAccountTokens, verdict.outcome == .granted, job.appAccountToken == nil {
            for transaction in verdict.transactions where transaction.revokedAt == nil {
                let original = transaction.originalTransactionID ?? transaction.transactionID
                calls.append(
                    FollowUpRecord.Call(
                        kind: .appAccountToken, key: original, transactionID: original,
                        environment: verdict.environment))
            }
        }
        if configuration.consumptionAnswers, case .notification(let jws) = job.proof, Self.isApplied(verdict),
            let request = ConsumptionRequestPeek(signedPayload: jws)
        {
            // Keyed by the job id, which the gateway derives from the notificationUUID: Apple's retries of one
            // request are one answer, a new request about the same transaction is another.
            calls.append(
                FollowUpRecord.Call(
                    kind: .consumptionInformation, key: job.jobID, transactionID: request.transactionID,
                    environment: request.environment))
        }
        return calls
    }

    /// Whether a notification's verdict shows it was verified and read against the ledger: granted or already
    /// granted, or rejected for a state of the purchase (no owner, revoked, expired). Other rejections (a forged or
    /// malformed notification, another app's, an unknown product) and `unverifiable` are never answered.
    static func isApplied(_ verdict: Verdict) -> Bool {
        switch verdict.outcome {
        case .granted, .alreadyGranted: true
        case .rejected: [Verdict.Reason.unclaimed, .revoked, .expired].contains { $0 == verdict.reason }
        case .unverifiable: false
        }
    }

    /// Makes the queued calls and sweeps the ledger for due ones, until cancelled.
    public func run() async {
        await FollowUpSweep.run(
            queue, maximumConcurrent: configuration.maximumConcurrentCalls,
            sweepEvery: configuration.sweepInterval, sweep: { await self.sweep() },
            taken: { _ in
                Gauge(label: MetricNames.followUpsQueued).record(queued.subtract(1, ordering: .relaxed).newValue)
            },
            make: { await self.make($0.call, claimEnds: $0.claimEnds) })
    }

    /// Stops taking new calls (the queue ends; ``run()`` returns once the calls under way end).
    public func finish() { input.finish() }

    // MARK: - Calls

    /// Claims `call` in the ledger, on the job's own path: the job completes (and its offset may be committed) only
    /// after this, so a worker that dies between the grant and the call leaves a claimed record that the next sweep
    /// takes over once its lease has passed, or, if it died before the claim, a job that is delivered again and
    /// claims it then (a Finish Transaction lost to a SIGKILL, found by the chaos harness's notification family).
    /// The call itself is made in the background (``run()``).
    ///
    /// A claim the ledger cannot record (an outage) is tried again, with backoff, until it is recorded: a job that
    /// completed without it would lose the call for good (found by `verify-worker chaos`: seven Finish Transactions
    /// lost to a PostgreSQL outage right after their grants). Returns false, the call not recorded, only when the task
    /// is cancelled first; and true, after counting and logging, for a ledger error retrying cannot fix (the worker's
    /// own next ledger write stops it).
    func claimThenQueue(_ call: FollowUpRecord.Call) async -> Bool {
        let claim: FollowUpClaim
        let claimEnds: ContinuousClock.Instant
        switch await claimRetryingOutages(call) {
        case .answered(let answer, let ends): (claim, claimEnds) = (answer, ends)
        case .refused: return true
        case .cancelled: return false
        }
        guard case .claimed = claim else {
            count(call.kind, "already_recorded")
            return true
        }
        guard queued.add(1, ordering: .relaxed).newValue <= configuration.maximumQueued else {
            // Recorded and claimed: the sweep makes it once the claim's lease has passed.
            queued.subtract(1, ordering: .relaxed)
            count(call.kind, "deferred")
            logger.warning(
                "apple: follow-up queue full, call left to the sweep",
                metadata: [LogKeys.followUpKind: "\(call.kind)", LogKeys.transactionID: "\(call.transactionID)"])
            return true
        }
        input.yield((call, claimEnds))
        return true
    }

    /// How a claim ended (``claimRetryingOutages(_:)``).
    private enum ClaimAttempts {
        /// The ledger answered.
        case answered(FollowUpClaim, claimEnds: ContinuousClock.Instant)
        /// The ledger failed in a way retrying cannot fix (counted and logged; the call is not made).
        case refused
        /// The task was cancelled before the ledger answered.
        case cancelled
    }

    /// The ledger's answer to the claim of `call`, asked again while the ledger fails in a way that passes.
    private func claimRetryingOutages(_ call: FollowUpRecord.Call) async -> ClaimAttempts {
        var backoff = configuration.claimRetryBackoff.lowerBound
        var loggedOutage = false
        while !Task.isCancelled {
            let claimEnds = ContinuousClock.now.advanced(by: configuration.claimLease)
            do {
                return .answered(
                    try await store.claimFollowUp(
                        call, holder: configuration.holder, now: now(), lease: configuration.claimLease),
                    claimEnds: claimEnds)
            } catch let error as LedgerError where error.isRetryable {
                count(call.kind, "ledger_error")
                if !loggedOutage {
                    loggedOutage = true
                    logger.warning(
                        "apple: follow-up call not recorded yet (ledger); the job waits and retries",
                        metadata: [
                            LogKeys.followUpKind: "\(call.kind)", LogKeys.transactionID: "\(call.transactionID)",
                            LogKeys.error: "\(error)",
                        ])
                }
                do { try await Task.sleep(for: backoff) } catch { return .cancelled }
                backoff = min(backoff * 2, configuration.claimRetryBackoff.upperBound)
            } catch {
                // A claim cut short by the task's own cancellation is not the ledger's refusal.
                if Task.isCancelled || error is CancellationError { return .cancelled }
                count(call.kind, "ledger_error")
                logger.error(
                    "apple: follow-up call not recorded (ledger)",
                    metadata: [
                        LogKeys.followUpKind: "\(call.kind)", LogKeys.transactionID: "\(call.transactionID)",
                        LogKeys.error: "\(error)",
                    ])
                return .refused
            }
        }
        return .cancelled
    }

    /// Makes a claimed call through the gate and records how it ended; claimed until `claimEnds` (nil: the call's
    /// own deadline), it is not made, nor retried, once the claim is about to end (``FollowUpClaimWindow``).
    func make(_ call: FollowUpRecord.Call, claimEnds: ContinuousClock.Instant? = nil) async {
        guard
            let deadline = FollowUpClaimWindow.deadline(
                callDeadline: configuration.callDeadline, claimLease: configuration.claimLease, claimEnds: claimEnds)
        else {
            // Left to the sweep that takes the record next.
            count(call.kind, "claim_expired")
            return
        }
        let environment = call.environment.flatMap(AppleEnvironment.init(appleName:))
        let clients = self.clients
        let failure = Mutex<AppleClientError?>(nil)
        let endpoint: StoreEndpoint
        let send: @Sendable () async throws -> AppleOutcome<ServerAPIAcknowledgement>
        // The refund policy's rule behind a consumption answer, recorded with it.
        var rule: String?
        switch call.kind {
        case .consumptionInformation:
            let answer: ConsumptionAnswerPlan
            do {
                answer = try await consumptionAnswer(for: call.transactionID, environment: call.environment)
            } catch {
                // The ledger did not answer: the claim expires and a sweep tries again.
                logger.warning(
                    "apple: consumption answer not built (ledger)",
                    metadata: [LogKeys.transactionID: "\(call.transactionID)", LogKeys.error: "\(error)"])
                return
            }
            if case .failed(let reason)? = answer.lookup, answer.consented,
                call.attempts + 1 < configuration.maximumAttempts
            {
                // The backend may answer later: put back like a call Apple could not take, within the same bound of
                // attempts. On the last attempt the answer is sent without the units (as without a lookup). Without
                // consent nothing is sent whatever the units, so nothing waits for them.
                await settle(
                    call, .pending, detail: "consumption lookup failed: \(reason)", retryAt: retryAt())
                return
            }
            rule = answer.rule
            guard let information = answer.information else {
                // The policy's no_response: Apple gets nothing, and decides the refund without the facts.
                await settle(call, .notSent, detail: "no_response", rule: rule)
                return
            }
            guard answer.consented else {
                // Apple refuses an answer without consent (InvalidCustomerConsentError): recorded, never sent.
                await settle(
                    call, .notSent, detail: "no customer consent (consumption_customer_consented)", rule: rule)
                return
            }
            endpoint = .consumptionInformation
            send = {
                try await Self.eachApp(clients) {
                    try await $0.sendConsumptionInformation(
                        transactionID: call.transactionID, information, environment: environment)
                }
            }
        case .appAccountToken:
            // The owner now, from the ledger: the token is derived from the account that holds the purchase.
            let owner: String?
            do {
                owner = try await ledger.snapshot(
                    jobID: "", transactionIDs: [call.transactionID], originalTransactionIDs: [call.transactionID]
                ).claims.first?.accountID
            } catch {
                logger.warning(
                    "apple: app account token not set (ledger)",
                    metadata: [LogKeys.transactionID: "\(call.transactionID)", LogKeys.error: "\(error)"])
                return
            }
            guard let owner, let token = UUID(uuidString: AppAccountToken.derived(fromAccountID: owner)) else {
                await settle(call, .notSent, detail: "no owner in the ledger")
                return
            }
            endpoint = .appAccountToken
            send = {
                try await Self.eachApp(clients) {
                    try await $0.setAppAccountToken(
                        originalTransactionID: call.transactionID, token: token, environment: environment)
                }
            }
        default:
            endpoint = .finishTransaction
            send = {
                try await Self.eachApp(clients) {
                    try await $0.finishTransaction(transactionID: call.transactionID, environment: environment)
                }
            }
        }
        let result: AppleCaller.Result<ServerAPIAcknowledgement>
        do {
            result = try await caller.call(
                endpoint, deadline: deadline
            ) {
                let outcome = try await send()
                if case .failed(let error) = outcome { failure.withLock { $0 = error } }
                return outcome
            }
        } catch {
            // Cancelled (shutdown): the claim expires and a later sweep makes the call.
            return
        }
        switch result {
        case .answered:
            await settle(call, .sent, detail: nil, rule: rule)
        case .unavailable(let reason):
            if let error = failure.withLock({ $0 }) {
                await settle(call, .failed, detail: Self.detail(of: error), rule: rule)
            } else if call.attempts + 1 >= configuration.maximumAttempts {
                await settle(
                    call, .failed, detail: "gave up after \(call.attempts + 1) attempts: \(reason)", rule: rule)
            } else {
                await settle(call, .pending, detail: reason, retryAt: retryAt(), rule: rule)
            }
        }
    }

    /// When a call put back now is due again (after `retryDelay`).
    private func retryAt() -> Date {
        let delay = configuration.retryDelay.components
        return now().addingTimeInterval(Double(delay.seconds) + Double(delay.attoseconds) / 1e18)
    }

    /// Makes a call with each app's client in turn, the next one only after a 404 (not this app's transaction).
    static func eachApp(
        _ clients: [AppStoreServerAPIClient],
        _ call: @Sendable (AppStoreServerAPIClient) async throws -> AppleOutcome<ServerAPIAcknowledgement>
    ) async throws -> AppleOutcome<ServerAPIAcknowledgement> {
        var outcome = try await call(clients[0])
        for client in clients.dropFirst() {
            guard case .failed(let error) = outcome, error.httpStatus == 404 else { break }
            outcome = try await call(client)
        }
        return outcome
    }

    /// The consumption answer for a transaction, from the ledger (delivered: granted and not revoked; the owner's
    /// earlier refunds), the catalog (the product's sample content), the consumption lookup (a one-time product's
    /// units consumed) and the refund policy, as Decision reads them (``RefundAnswer``).
    func consumptionAnswer(for transactionID: String, environment: String?) async throws -> ConsumptionAnswerPlan {
        try await Self.consumptionAnswer(
            for: transactionID, environment: environment, ledger: ledger, catalog: configuration.catalog,
            policy: refundPolicy, customerConsented: configuration.customerConsented, now: now(),
            lookup: configuration.consumptionLookup)
    }

    /// The consumption answer for a transaction read from `ledger` (and, for a one-time product, `lookup`), as the
    /// worker and `verify-worker refund-policy explain` build it.
    public static func consumptionAnswer(
        for transactionID: String, environment: String?, ledger: any Ledger, catalog: Catalog, policy: RefundPolicy,
        customerConsented: Bool, now: Date, lookup: ConsumptionLookup? = nil
    ) async throws -> ConsumptionAnswerPlan {
        let snapshot = try await ledger.snapshot(jobID: "", transactionIDs: [transactionID], originalTransactionIDs: [])
        let claim = snapshot.claim(transactionID)
        var accountClaims: [TransactionClaim] = []
        if let claim { accountClaims = try await ledger.claims(ownedBy: claim.accountID) }
        var facts = RefundFacts(
            store: .appStore, claim: claim, productID: claim?.productID ?? "", app: nil, environment: environment,
            accountClaims: accountClaims, catalog: catalog, now: now)
        let looked = await ConsumptionLookup.consult(
            lookup, facts: &facts, transactionID: transactionID, accountID: claim?.accountID)
        return ConsumptionAnswerPlan(
            facts: facts, answer: RefundAnswer(facts: facts, catalog: catalog, policy: policy),
            consented: policy.consented(app: claim?.bundleID, setting: customerConsented), lookup: looked)
    }

    /// Records how a claimed call ended (counted and, unless sent, logged).
    private func settle(
        _ call: FollowUpRecord.Call, _ state: FollowUpRecord.State, detail: String?, retryAt: Date? = nil,
        rule: String? = nil
    ) async {
        count(call.kind, state == .pending ? "retry_scheduled" : state.rawValue, rule: rule)
        // The refund policy's rule is recorded with the answer it made (`rule NAME`, then the detail).
        let detail = rule.map { rule in "rule \(rule)" + (detail.map { ": \($0)" } ?? "") } ?? detail
        if state != .sent {
            logger.notice(
                "apple: follow-up call not accepted",
                metadata: [
                    LogKeys.followUpKind: "\(call.kind)", LogKeys.transactionID: "\(call.transactionID)",
                    LogKeys.followUpState: "\(state.rawValue)", LogKeys.reason: "\(detail ?? "")",
                ])
        }
        do {
            try await store.settleFollowUp(
                kind: call.kind, key: call.key, holder: configuration.holder, state: state, detail: detail,
                retryAt: retryAt, now: now())
        } catch {
            // The claim expires and a sweep makes the call again: at worst a second call for this one.
            logger.warning(
                "apple: follow-up call made but its record not updated (ledger)",
                metadata: [
                    LogKeys.followUpKind: "\(call.kind)", LogKeys.transactionID: "\(call.transactionID)",
                    LogKeys.error: "\(error)",
                ])
        }
    }

    /// Claims the due calls (of every kind switched on) and makes them one after another.
    func sweep() async {
        var kinds: [FollowUpRecord.Kind] = []
        if configuration.finishTransactions { kinds.append(.finishTransaction) }
        if configuration.consumptionAnswers { kinds.append(.consumptionInformation) }
        if configuration.setAppAccountTokens { kinds.append(.appAccountToken) }
        await FollowUpSweep.sweep(
            kinds, from: store, holder: configuration.holder, lease: configuration.claimLease, now: now,
            storeName: "apple", logger: logger
        ) { call, claimEnds in
            await make(call, claimEnds: claimEnds)
        }
    }

    /// Counts a call's result; a consumption answer's with the policy's rule (empty before a rule decided it).
    private func count(_ kind: FollowUpRecord.Kind, _ result: String, rule: String? = nil) {
        guard kind == .consumptionInformation else {
            Counter(label: MetricNames.finishTransactions, dimensions: [("result", result)]).increment()
            return
        }
        Counter(label: MetricNames.consumptionAnswers, dimensions: [("result", result), ("rule", rule ?? "")])
            .increment()
    }

    /// A failure's code, safe to store and show (never a body).
    static func detail(of error: AppleClientError) -> String {
        var text = error.code.description
        if let status = error.httpStatus { text += " (HTTP \(status))" }
        if let code = error.appleErrorCode { text += " (Apple error \(code))" }
        return text
    }
}

/// A consumption answer as the worker sends it: Decision's answer, Apple's body (nil for the policy's `no_response`)
/// and whether the app's customers consented.
public struct ConsumptionAnswerPlan: Sendable {
    /// What the policy was asked about.
    public var facts: RefundFacts
    public var answer: RefundAnswer
    public var consented: Bool
    /// How the consumption lookup answered; nil when it was not asked.
    public var lookup: ConsumptionLookup.Outcome?

    /// The policy's rule that made the answer.
    public var rule: String { answer.decision.rule }

    /// The body of Send Consumption Information; nil when the policy answers `no_response`.
    ///
    /// Apple's rules on the share (`consumptionPercentage`, the same milliunits as Google's) hold for every body:
    /// - none for an auto-renewable subscription: Apple reckons its share from the time elapsed, and refuses one;
    /// - a prorated refund of any other purchase needs a share above 0 and below 100 %: without one (the units
    ///   are not known, or nothing or everything was used) the facts are sent without a preference, as data only.
    public var information: ConsumptionInformation? {
        guard answer.decision.answer != .noResponse else { return nil }
        let share = facts.productType == .autoRenewable ? nil : answer.consumptionPercentageMilliunits
        var preference = answer.appleRefundPreference.flatMap(ConsumptionInformation.RefundPreference.init(rawValue:))
        if preference == .grantProrated, facts.productType != .autoRenewable,
            !(1..<100_000).contains(share ?? 0)
        {
            preference = nil
        }
        return ConsumptionInformation(
            customerConsented: true,
            // Not granted, or taken back: the customer does not have it. The ledger cannot tell a quality issue or
            // a wrong item from other causes, so UNDELIVERED_OTHER.
            deliveryStatus: answer.delivered ? .delivered : .undeliveredOther,
            sampleContentProvided: answer.sampleContentProvided, refundPreference: preference,
            consumptionPercentage: share)
    }
}

/// What a CONSUMPTION_REQUEST notification names, read from its payload. Only called for a notification whose verdict
/// shows it was verified (the signature and the signed transaction inside it), so nothing here is trusted blindly.
struct ConsumptionRequestPeek {
    var transactionID: String
    var environment: String?

    init?(signedPayload jws: String) {
        guard let payload = Self.payload(of: jws), payload["notificationType"] as? String == "CONSUMPTION_REQUEST",
            let data = payload["data"] as? [String: Any], let signed = data["signedTransactionInfo"] as? String,
            let transaction = Self.payload(of: signed), let id = transaction["transactionId"] as? String,
            !id.isEmpty
        else { return nil }
        transactionID = id
        environment = data["environment"] as? String ?? transaction["environment"] as? String
    }

    /// The JSON object in a JWS's payload part.
    static func payload(of jws: String) -> [String: Any]? {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        var text = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        text += String(repeating: "=", count: (4 - text.count % 4) % 4)
        guard let data = Data(base64Encoded: text) else { return nil }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
    }
}
