import CodedErrors
import Decision
import Foundation
import GooglePlayClients
import Ledger
import Logging
import Messages
import Metrics
import Observability
import Synchronization

/// The Developer API calls that follow a Google Play grant, made for the purchase's own app (its package name picks
/// the service account). Each call retries through Google Play's call gate until `deadline`; every answer is a
/// ``GooglePlayOutcome``, and Google's answer to a repeat (already acknowledged, already consumed) is `answered`.
public protocol GooglePlayPurchaseCalls: Sendable {
    /// `purchases.subscriptions.acknowledge` when `subscription`, else `purchases.products.acknowledge`.
    func acknowledge(
        packageName: String, productID: String, token: String, subscription: Bool, deadline: ContinuousClock.Instant
    ) async -> GooglePlayOutcome<GooglePlayAccepted>

    /// `purchases.products.consume`: a consumable, which this acknowledges too.
    func consume(
        packageName: String, productID: String, token: String, deadline: ContinuousClock.Instant
    ) async -> GooglePlayOutcome<GooglePlayAccepted>

    /// `orders.reviewrefund`: the answer to a pending refund review of `orderID`.
    func reviewRefund(
        packageName: String, orderID: String, review: GooglePlayRefundReview, deadline: ContinuousClock.Instant
    ) async -> GooglePlayOutcome<GooglePlayAccepted>

    /// Whether Google already reads the purchase as acknowledged (or, `consumed`, consumed): true only on Google's
    /// word; false when it says otherwise or did not answer.
    func isDone(
        packageName: String, token: String, subscription: Bool, consumed: Bool, deadline: ContinuousClock.Instant
    ) async -> Bool
}

extension GooglePlayPurchaseCalls {
    /// A Developer API that cannot tell: every call is made.
    public func isDone(
        packageName: String, token: String, subscription: Bool, consumed: Bool, deadline: ContinuousClock.Instant
    ) async -> Bool { false }
}

/// One Google Play call that follows a verdict, as its follow-up record stores it, so that any worker can make the
/// call from the record alone. An acknowledge or consume: the key and `transaction_id` hold the purchase token,
/// `environment` the purchase's place in the Developer API, `{package name}/{products|subscriptions}/{product id}`
/// (neither a package name nor a product id has a `/`). A refund review's answer: the key holds the review's
/// `pendingRefundToken`, `transaction_id` the order id, `environment` `{package name}/orders/{product id}`.
public struct GooglePlayFollowUpTarget: Sendable, Hashable {
    /// What is done with the purchase.
    public enum Action: Sendable, Hashable {
        /// `purchases.products.acknowledge`: a non-consumable one-time product.
        case acknowledgeProduct
        /// `purchases.subscriptions.acknowledge`: a subscription (once per purchase token; renewals keep it).
        case acknowledgeSubscription
        /// `purchases.products.consume`: a consumable. Consuming acknowledges too (Play Billing's documentation:
        /// "Consumables are already implicitly acknowledged by calls to consumeAsync"; the Play simulator does the
        /// same), so a consumable gets this call alone.
        case consume
        /// `orders.reviewrefund`: the answer to a pending refund review of an order.
        case reviewRefund
    }

    public var packageName: String
    public var productID: String
    /// The record's key: the purchase token, or a refund review's `pendingRefundToken`.
    public var token: String
    public var action: Action
    /// The order a refund review is about (nil for the other calls).
    public var orderID: String?
    /// Whether the record was claimed before this claim: a call read back from the ledger always was (records are
    /// created claimed), by a holder that died, or that was put back after a failure, and may have reached Google
    /// before it could record the answer.
    public var claimedBefore = false
    /// When this worker's claim on the record ends (taken just before the claim was asked for): no call is made, and
    /// none is still retried, once it is near, since another worker's sweep may take the record then.
    public var claimEnds: ContinuousClock.Instant?
    /// How many times the call was put back before (the record's `attempts`; 0 for a call not yet made).
    public var attempts = 0

    public init(packageName: String, productID: String, token: String, action: Action, orderID: String? = nil) {
        self.packageName = packageName
        self.productID = productID
        self.token = token
        self.action = action
        self.orderID = orderID
    }

    /// The call for a granted purchase. The type comes from the catalog's `play_products`; a product it does not
    /// list (a catalog without `play_products` accepts any) is a subscription when the verdict carries a purchase
    /// token (Google's identity of a subscription), else acknowledged as a one-time product: acknowledging keeps a
    /// consumable from being refunded, where consuming a non-consumable would take it from its owner.
    init(purchase: GooglePlayPurchase, verdict: Verdict, catalog: Catalog) {
        let action: Action =
            switch catalog.playProducts[purchase.productID]?.type {
            case .consumable?: .consume
            case .autoRenewable?: .acknowledgeSubscription
            case .nonConsumable?, .nonRenewing?: .acknowledgeProduct
            case nil:
                verdict.transactions.contains { $0.purchaseToken != nil }
                    ? .acknowledgeSubscription : .acknowledgeProduct
            }
        self.init(
            packageName: purchase.packageName, productID: purchase.productID, token: purchase.purchaseToken,
            action: action)
    }

    /// Reads a record's call back; nil when it is not a Google Play call or its place cannot be read.
    public init?(call: FollowUpRecord.Call) {
        let place = (call.environment ?? "").split(separator: "/", omittingEmptySubsequences: false)
        // A review's product may be unknown (the ledger never saw the order); every other call names one.
        guard place.count == 3, !place[0].isEmpty, !place[2].isEmpty || call.kind == .playRefundReview,
            !call.key.isEmpty
        else { return nil }
        orderID = nil
        switch (call.kind, place[1]) {
        case (.playConsume, "products"): action = .consume
        case (.playAcknowledge, "products"): action = .acknowledgeProduct
        case (.playAcknowledge, "subscriptions"): action = .acknowledgeSubscription
        case (.playRefundReview, "orders"):
            guard !call.transactionID.isEmpty else { return nil }
            action = .reviewRefund
            orderID = call.transactionID
        default: return nil
        }
        packageName = String(place[0])
        productID = String(place[2])
        token = call.key
        claimedBefore = true
        attempts = call.attempts
    }

    /// The record's kind: one acknowledge or one consume per purchase token, one answer per refund review.
    public var kind: FollowUpRecord.Kind {
        switch action {
        case .consume: .playConsume
        case .acknowledgeProduct, .acknowledgeSubscription: .playAcknowledge
        case .reviewRefund: .playRefundReview
        }
    }

    /// The call as its record stores it.
    public var call: FollowUpRecord.Call {
        let collection =
            switch action {
            case .acknowledgeSubscription: "subscriptions"
            case .acknowledgeProduct, .consume: "products"
            case .reviewRefund: "orders"
            }
        return FollowUpRecord.Call(
            kind: kind, key: token, transactionID: orderID ?? token,
            environment: "\(packageName)/\(collection)/\(productID)")
    }

    /// The metric label of the call (`acknowledge`, `consume`, `review_refund`).
    var label: String {
        switch action {
        case .consume: "consume"
        case .acknowledgeProduct, .acknowledgeSubscription: "acknowledge"
        case .reviewRefund: "review_refund"
        }
    }
}

/// Settings of ``GooglePlayFollowUps``. Acknowledging has no off switch: Google refunds a purchase nobody
/// acknowledged within three days.
public struct GooglePlayFollowUpsConfiguration: Sendable {
    /// Which products are consumables and subscriptions (`play_products`), and their sample content.
    public var catalog: Catalog
    /// Who claims calls in the ledger (unique per worker process).
    public var holder: String
    /// Answer each pending refund review with `orders.reviewrefund` (`consumption_answers`, the switch that answers
    /// Apple's consumption requests).
    public var answersRefundReviews: Bool = false
    /// The refund policy whose rules answer refund reviews (`refund_policy_file`); nil: the policy without a file
    /// (``RefundPolicy/init(catalog:)``: the catalog's shorthand rules, then data only).
    public var refundPolicy: RefundPolicy?
    /// How long one call may keep retrying through the gate before it is put back for a later sweep.
    public var callDeadline: Duration = .seconds(60)
    /// How long a claim holds before another worker may take the call over (its holder crashed).
    public var claimLease: Duration = .seconds(300)
    /// When a call put back is due again (at least; later when Google's `Retry-After` says so).
    public var retryDelay: Duration = .seconds(60)
    /// How often the ledger is swept for calls that are due (and the oldest unacknowledged purchase measured).
    public var sweepInterval: Duration = .seconds(30)
    /// Calls made at once by this worker (the gate limits the rate; this bounds the tasks).
    public var maximumConcurrentCalls: Int = 16
    /// Calls queued in memory at most; beyond, a claimed call is left to the sweep.
    public var maximumQueued: Int = 100_000
    /// The first and the longest wait between two attempts at a claim the ledger could not record.
    public var claimRetryBackoff: ClosedRange<Duration> = .milliseconds(100) ... .seconds(5)
    /// The operator's consumption lookup (`consumption_lookup_url`), asked for a one-time product's units consumed
    /// when a refund review's answer is built; nil: not asked, the units unknown.
    public var consumptionLookup: ConsumptionLookup?
    /// Attempts at a review's answer whose consumption lookup failed before it is answered without the units: the
    /// App Store follow-ups' bound (``AppleFollowUpsConfiguration/maximumAttempts``), well within Google's 24 hours.
    public var maximumLookupAttempts: Int = 20
}

/// The Developer API calls that follow a durable Google Play grant, once its verdict's delivery report came back (so
/// its ledger write is committed too): acknowledge the purchase (a subscription once per purchase token), or consume
/// it when the catalog lists it as a consumable. Google refunds a purchase not acknowledged within three days.
///
/// - Once: each call is claimed in the ledger (``FollowUpRecordStore``, kinds `play_acknowledge` and
///   `play_consume`, keyed by the purchase token) before it is made; a redelivered job or another worker finds the
///   record and does nothing.
/// - In the background: ``verdictDelivered(_:job:)`` only claims and queues; ``run()`` makes the calls.
/// - Retried until Google accepts: a call still failing at its deadline, refused for this deployment's credentials
///   or failing for a cause that is not the purchase's stays `pending` and is taken by a later sweep of any worker,
///   with no attempt limit. Only Google's word about the purchase ends it as `failed`: 404 or 410 (no such purchase)
///   and 400 (refused: refunded, pending, of another product).
/// - Measured: ``refreshOldestUnacknowledged()`` (after each sweep) sets
///   `verify_google_play_oldest_unacknowledged_seconds` from the ledger, so every worker reports the cluster's figure.
public final class GooglePlayFollowUps: Sendable {
    private let calls: any GooglePlayPurchaseCalls
    private let store: any FollowUpRecordStore
    /// Where a refund review's answer reads the order's claim (nil: reviews are answered as for an order nobody was
    /// granted).
    private let ledger: (any Ledger)?
    private let configuration: GooglePlayFollowUpsConfiguration
    /// The configuration's refund policy, or the one without a file: built once, not per answer.
    private let refundPolicy: RefundPolicy
    private let logger: Logger
    private let now: @Sendable () -> Date
    private let queue: AsyncStream<GooglePlayFollowUpTarget>
    private let input: AsyncStream<GooglePlayFollowUpTarget>.Continuation
    private let queued = Atomic<Int>(0)

    public init(
        calls: any GooglePlayPurchaseCalls, store: any FollowUpRecordStore,
        configuration: GooglePlayFollowUpsConfiguration, logger: Logger,
        now: @escaping @Sendable () -> Date = Date.init, ledger: (any Ledger)? = nil
    ) {
        self.calls = calls
        self.store = store
        self.ledger = ledger ?? (store as? any Ledger)
        self.configuration = configuration
        self.refundPolicy = configuration.refundPolicy ?? RefundPolicy(catalog: configuration.catalog)
        self.logger = logger
        self.now = now
        (queue, input) = AsyncStream.makeStream(of: GooglePlayFollowUpTarget.self)
    }

    /// The follow-ups of a worker, on the follow-up settings it already has (`followup_claim_lease_s`,
    /// `followup_sweep_interval_s`). Run ``run()`` as a background service listed before the worker loop (stopped
    /// after its drain), and hand ``verdictDelivered(_:job:)`` to the loop (``VerdictFollowUps``).
    public static func make(
        ledger: any Ledger, catalog: Catalog, calls: any GooglePlayPurchaseCalls, holder: String,
        answersRefundReviews: Bool = false, refundPolicy: RefundPolicy? = nil, claimLease: Duration,
        sweepInterval: Duration, logger: Logger, consumptionLookup: ConsumptionLookup? = nil
    ) -> GooglePlayFollowUps {
        GooglePlayFollowUps(
            calls: calls, store: ledger,
            configuration: GooglePlayFollowUpsConfiguration(
                catalog: catalog, holder: holder, answersRefundReviews: answersRefundReviews,
                refundPolicy: refundPolicy, claimLease: claimLease, sweepInterval: sweepInterval,
                consumptionLookup: consumptionLookup),
            logger: logger, ledger: ledger)
    }

    /// A verdict's delivery report came back: claims the purchase's acknowledge or consume in the ledger and queues
    /// it. Only a Google Play job's verdict that grants (`granted`, or `already_granted`: the account holds the
    /// purchase, and a grant made before this call existed is acknowledged then) asks for a call. Never throws; waits
    /// only while the ledger cannot record the claim (retried until it answers).
    ///
    /// - Returns: whether the call is recorded, so that the job may complete. False only when the task was cancelled
    ///   (a revoke or a drain) before the claim was recorded: the job then stays uncommitted and its next owner
    ///   claims the call.
    public func verdictDelivered(_ verdict: Verdict, job: ReceiptJob) async -> Bool {
        if let review = Self.refundReview(of: verdict, job: job) {
            return await refundReviewRequested(
                packageName: review.packageName, productID: verdict.transactions.first?.productID ?? "",
                orderID: review.orderID, pendingRefundToken: review.pendingRefundToken)
        }
        guard let target = Self.target(of: verdict, job: job, catalog: configuration.catalog) else { return true }
        return await claimThenQueue(target)
    }

    /// The pending refund review a notification job's verdict carries, when the verdict shows the notification was
    /// read against the ledger, as an App Store consumption request must be to be answered
    /// (``AppleFollowUps/isApplied(_:)``: the same rule for both stores' refund questions).
    static func refundReview(
        of verdict: Verdict, job: ReceiptJob
    ) -> (packageName: String, orderID: String, pendingRefundToken: String)? {
        guard case .googlePlayNotification(let notification) = job.proof, AppleFollowUps.isApplied(verdict),
            let text = notification.notification,
            case .pendingRefundReview(let review)? = try? DeveloperNotification.parse(text).kind
        else { return nil }
        return (notification.packageName, review.orderID, review.pendingRefundToken)
    }

    /// Google asks for an answer to a pending refund review of `orderID` (its notification's verdict was delivered):
    /// claims the review's one answer in the ledger, keyed by `pendingRefundToken` so that Pub/Sub's redeliveries and
    /// other workers make no second, and queues it. Does nothing unless refund reviews are answered. Returns as
    /// ``verdictDelivered(_:job:)`` does.
    public func refundReviewRequested(
        packageName: String, productID: String, orderID: String, pendingRefundToken: String
    ) async -> Bool {
        guard configuration.answersRefundReviews, !pendingRefundToken.isEmpty, !orderID.isEmpty else { return true }
        return await claimThenQueue(
            GooglePlayFollowUpTarget(
                packageName: packageName, productID: productID, token: pendingRefundToken, action: .reviewRefund,
                orderID: orderID))
    }

    /// The call a delivered verdict asks for, if any.
    static func target(of verdict: Verdict, job: ReceiptJob, catalog: Catalog) -> GooglePlayFollowUpTarget? {
        guard verdict.store == .googlePlay, verdict.outcome == .granted || verdict.outcome == .alreadyGranted else {
            return nil
        }
        switch job.proof {
        case .googlePlay(let purchase):
            return GooglePlayFollowUpTarget(purchase: purchase, verdict: verdict, catalog: catalog)
        case .googlePlayNotification(let notification):
            // A notification's grant (a pending purchase completed, a new order, an upgrade's new token) is
            // acknowledged as the app's own would be: once per token, so a renewal's finds its record and calls none.
            guard verdict.outcome == .granted, let token = notification.purchaseToken,
                let product = verdict.transactions.first(where: { $0.purchaseToken == token })?.productID
            else { return nil }
            let purchase = GooglePlayPurchase(
                packageName: notification.packageName, productID: product, purchaseToken: token)
            return GooglePlayFollowUpTarget(purchase: purchase, verdict: verdict, catalog: catalog)
        default:
            return nil
        }
    }

    /// Makes the queued calls and sweeps the ledger for due ones, until cancelled or ``finish()``ed.
    public func run() async {
        await FollowUpSweep.run(
            queue, maximumConcurrent: configuration.maximumConcurrentCalls,
            sweepEvery: configuration.sweepInterval, sweep: { await self.sweep() },
            taken: { _ in queued.subtract(1, ordering: .relaxed) }, make: { await self.make($0) })
    }

    /// Whether pending refund reviews are answered (`consumption_answers`).
    public var answersRefundReviews: Bool { configuration.answersRefundReviews }

    /// The catalog whose products say which acknowledge a grant needs.
    var catalog: Catalog { configuration.catalog }

    /// Stops taking new calls (the queue ends; ``run()`` returns once the queued calls are made).
    public func finish() { input.finish() }

    // MARK: - Claims

    /// Claims the call on the job's own path (the job completes only after this, so a worker that dies before the
    /// call leaves a claimed record for the sweep, or a job delivered again), then queues it.
    func claimThenQueue(_ target: GooglePlayFollowUpTarget) async -> Bool {
        var backoff = configuration.claimRetryBackoff.lowerBound
        var loggedOutage = false
        while !Task.isCancelled {
            let claim: FollowUpClaim
            let claimEnds = ContinuousClock.now.advanced(by: configuration.claimLease)
            do {
                claim = try await store.claimFollowUp(
                    target.call, holder: configuration.holder, now: now(), lease: configuration.claimLease)
            } catch let error as LedgerError where error.isRetryable {
                count(target, "ledger_error")
                if !loggedOutage {
                    loggedOutage = true
                    logger.warning(
                        "google play: acknowledge not recorded yet (ledger); the job waits and retries",
                        metadata: metadata(target, [LogKeys.error: "\(error)"]))
                }
                do { try await Task.sleep(for: backoff) } catch { return false }
                backoff = min(backoff * 2, configuration.claimRetryBackoff.upperBound)
                continue
            } catch {
                if Task.isCancelled || error is CancellationError { return false }
                // A refusal retrying cannot fix (a schema error): the worker's own next ledger write stops it.
                count(target, "ledger_error")
                logger.error(
                    "google play: acknowledge not recorded (ledger)",
                    metadata: metadata(target, [LogKeys.error: "\(error)"]))
                return true
            }
            guard case .claimed = claim else {
                count(target, "already_recorded")
                return true
            }
            var target = target
            target.claimEnds = claimEnds
            guard queued.add(1, ordering: .relaxed).newValue <= configuration.maximumQueued else {
                // Recorded and claimed: the sweep makes it once the claim's lease has passed.
                queued.subtract(1, ordering: .relaxed)
                count(target, "deferred")
                logger.warning("google play: follow-up queue full, call left to the sweep", metadata: metadata(target))
                return true
            }
            input.yield(target)
            return true
        }
        return false
    }

    // MARK: - Calls

    /// Makes one claimed call and records how it ended.
    func make(_ target: GooglePlayFollowUpTarget) async {
        guard let deadline = callDeadline(for: target) else {
            // The claim is about to end: the call is left to the sweep that takes the record next, which asks
            // Google first whether it is still owed.
            count(target, "claim_expired")
            return
        }
        let outcome: GooglePlayOutcome<GooglePlayAccepted>
        // The refund policy's rule behind a review's answer, recorded with it.
        var rule: String?
        switch target.action {
        case .reviewRefund:
            guard let (answer, lookup) = await refundReviewAnswer(for: target) else {
                await putBack(target, detail: "ledger", after: nil)
                return
            }
            if case .failed(let reason)? = lookup, target.attempts + 1 < configuration.maximumLookupAttempts {
                // The backend may answer later: put back as for the ledger, within a bound of attempts. On the last
                // attempt the review is answered without the units (as without a lookup).
                await putBack(target, detail: "consumption lookup failed: \(reason)", after: nil)
                return
            }
            rule = answer.decision.rule
            guard answer.decision.answer != .noResponse else {
                // The policy's no_response: no call; Google's review lapses after its 24 hours.
                await settle(target, .notSent, detail: "no_response", rule: rule)
                return
            }
            let review = GooglePlayRefundReview(
                pendingRefundToken: target.token, sampleContentProvided: answer.sampleContentProvided,
                refundPreference: answer.googleRefundPreference,
                consumptionPercentageMilliunits: answer.consumptionPercentageMilliunits)
            outcome = await calls.reviewRefund(
                packageName: target.packageName, orderID: target.orderID ?? "", review: review, deadline: deadline)
        case .consume, .acknowledgeProduct, .acknowledgeSubscription:
            // A record claimed before may have reached Google from a holder that died (or lost the ledger) before it
            // recorded the answer: Google's own state decides whether the call is still owed, so a purchase is
            // acknowledged or consumed once as Google counts it, not once per holder.
            if target.claimedBefore,
                await calls.isDone(
                    packageName: target.packageName, token: target.token,
                    subscription: target.action == .acknowledgeSubscription, consumed: target.action == .consume,
                    deadline: deadline)
            {
                await Task { await self.settle(target, .sent, detail: "already done at Google") }.value
                return
            }
            outcome =
                switch target.action {
                case .consume:
                    await calls.consume(
                        packageName: target.packageName, productID: target.productID, token: target.token,
                        deadline: deadline)
                case .acknowledgeProduct, .acknowledgeSubscription, .reviewRefund:
                    await calls.acknowledge(
                        packageName: target.packageName, productID: target.productID, token: target.token,
                        subscription: target.action == .acknowledgeSubscription, deadline: deadline)
                }
        }
        if case .answered = outcome {
            // Google took the call: recorded even while the worker stops (in a task of its own, which the shutdown
            // does not cancel), or a sweep would make it a second time.
            await Task { [rule] in await self.settle(target, .sent, detail: nil, rule: rule) }.value
            return
        }
        // Cancelled (shutdown) before Google took it: the claim expires and a later sweep makes the call.
        guard !Task.isCancelled else { return }
        switch outcome {
        case .answered:
            break
        case .purchaseNotFound(let status):
            await settle(target, .failed, detail: "no such purchase (HTTP \(status))", rule: rule)
        case .rejected(let error):
            await settle(target, .failed, detail: Self.detail(of: error), rule: rule)
        case .configurationRefused(let error):
            // This deployment's service account, not the purchase: fixing the configuration lets it through.
            await putBack(target, detail: Self.detail(of: error), after: nil, rule: rule)
        case .retryable(let advice):
            await putBack(target, detail: advice.description, after: advice.retryAfter, rule: rule)
        case .failed(let error):
            // Not Google's word about the purchase (TLS, an unexpected answer): acknowledging stays owed.
            await putBack(target, detail: Self.detail(of: error), after: nil, rule: rule)
        }
    }

    /// The answer to a refund review, from the order's claim in the ledger (and its owner's earlier refunds), the
    /// catalog, the consumption lookup (a one-time product's units consumed) and the refund policy
    /// (``RefundAnswer``), with how the lookup answered (nil: not asked); nil when the ledger did not answer (the
    /// call is put back).
    func refundReviewAnswer(
        for target: GooglePlayFollowUpTarget
    ) async -> (answer: RefundAnswer, lookup: ConsumptionLookup.Outcome?)? {
        do {
            let built = try await Self.refundReviewAnswer(
                orderID: target.orderID ?? "", productID: target.productID, packageName: target.packageName,
                ledger: ledger, catalog: configuration.catalog, policy: refundPolicy, now: now(),
                lookup: configuration.consumptionLookup)
            return (built.answer, built.lookup)
        } catch {
            logger.warning(
                "google play: refund review answer not built (ledger)",
                metadata: metadata(target, [LogKeys.error: "\(error)"]))
            return nil
        }
    }

    /// The answer to a refund review of `orderID` read from `ledger` (nil: answered as for an order nobody was
    /// granted) and, for a one-time product, `lookup` (the order id is its transaction id), as the worker and
    /// `verify-worker refund-policy explain` build it.
    public static func refundReviewAnswer(
        orderID: String, productID: String, packageName: String, ledger: (any Ledger)?, catalog: Catalog,
        policy: RefundPolicy, now: Date, lookup: ConsumptionLookup? = nil
    ) async throws -> (facts: RefundFacts, answer: RefundAnswer, lookup: ConsumptionLookup.Outcome?) {
        var claim: TransactionClaim?
        var accountClaims: [TransactionClaim] = []
        if let ledger {
            let snapshot = try await ledger.snapshot(
                jobID: "", transactionIDs: [orderID, "\(orderID)#\(productID)"], originalTransactionIDs: [])
            claim = snapshot.claim(orderID) ?? snapshot.claim("\(orderID)#\(productID)")
            if let claim { accountClaims = try await ledger.claims(ownedBy: claim.accountID) }
        }
        var facts = RefundFacts(
            store: .googlePlay, claim: claim, productID: productID, app: packageName, environment: nil,
            accountClaims: accountClaims, catalog: catalog, now: now)
        let looked = await ConsumptionLookup.consult(
            lookup, facts: &facts, transactionID: orderID, accountID: claim?.accountID)
        return (facts, RefundAnswer(facts: facts, catalog: catalog, policy: policy), looked)
    }

    /// Records the call as `pending` again, due after the retry delay or Google's `Retry-After`, whichever is later.
    private func putBack(
        _ target: GooglePlayFollowUpTarget, detail: String, after retryAfter: Duration?, rule: String? = nil
    ) async {
        let delay = max(configuration.retryDelay, retryAfter ?? .zero).components
        let retryAt = now().addingTimeInterval(Double(delay.seconds) + Double(delay.attoseconds) / 1e18)
        await settle(target, .pending, detail: detail, retryAt: retryAt, rule: rule)
    }

    /// Records how a claimed call ended (counted and, unless accepted, logged).
    private func settle(
        _ target: GooglePlayFollowUpTarget, _ state: FollowUpRecord.State, detail: String?, retryAt: Date? = nil,
        rule: String? = nil
    ) async {
        count(target, state == .pending ? "retry_scheduled" : state.rawValue, rule: rule)
        // The refund policy's rule is recorded with the answer it made (`rule NAME`, then the detail).
        let detail = rule.map { rule in "rule \(rule)" + (detail.map { ": \($0)" } ?? "") } ?? detail
        if state != .sent {
            logger.notice(
                "google play: call not accepted",
                metadata: metadata(
                    target, [LogKeys.followUpState: "\(state.rawValue)", LogKeys.reason: "\(detail ?? "")"]))
        }
        // Retried while the ledger is out, for as long as the claim holds (after that another worker may take the
        // call over anyway): a record left claimed makes a second call.
        let clock = ContinuousClock()
        let giveUp = clock.now.advanced(by: configuration.claimLease)
        var backoff = configuration.claimRetryBackoff.lowerBound
        while true {
            do {
                try await store.settleFollowUp(
                    kind: target.kind, key: target.token, holder: configuration.holder, state: state, detail: detail,
                    retryAt: retryAt, now: now())
                return
            } catch let error as LedgerError where error.isRetryable && clock.now.advanced(by: backoff) < giveUp {
                try? await clock.sleep(for: backoff)
                backoff = min(backoff * 2, configuration.claimRetryBackoff.upperBound)
            } catch {
                // The claim expires and a sweep makes the call again: Google takes a repeat as accepted.
                logger.warning(
                    "google play: call made but its record not updated (ledger)",
                    metadata: metadata(target, [LogKeys.error: "\(error)"]))
                return
            }
        }
    }

    /// The deadline of a call on this worker's claim (``FollowUpClaimWindow``); nil when no time is left.
    func callDeadline(for target: GooglePlayFollowUpTarget) -> ContinuousClock.Instant? {
        FollowUpClaimWindow.deadline(
            callDeadline: configuration.callDeadline, claimLease: configuration.claimLease,
            claimEnds: target.claimEnds)
    }

    // MARK: - Sweeps

    /// Claims the due calls (put back, or left by a holder whose lease passed) and makes them one after another,
    /// then measures the oldest purchase still owed a call.
    public func sweep() async {
        var kinds: [FollowUpRecord.Kind] = [.playAcknowledge, .playConsume]
        if configuration.answersRefundReviews { kinds.append(.playRefundReview) }
        await FollowUpSweep.sweep(
            kinds, from: store, holder: configuration.holder, lease: configuration.claimLease, now: now,
            storeName: "google play", logger: logger
        ) { call, claimEnds in
            guard var target = GooglePlayFollowUpTarget(call: call) else {
                // Written by this code only; a row it cannot read is kept and shown, never called blindly.
                logger.error(
                    "google play: follow-up record unreadable, marked failed",
                    metadata: [LogKeys.followUpKind: "\(call.kind)"])
                try? await store.settleFollowUp(
                    kind: call.kind, key: call.key, holder: configuration.holder, state: .failed,
                    detail: "unreadable record", retryAt: nil, now: now())
                return
            }
            target.claimEnds = claimEnds
            await make(target)
        }
        guard !Task.isCancelled else { return }
        await refreshOldestUnacknowledged()
    }

    /// Sets `verify_google_play_oldest_unacknowledged_seconds`: the age of the oldest pending acknowledge or consume
    /// in the ledger (0 when none). Returns it, or nil when the ledger did not answer (the gauge keeps its value).
    @discardableResult
    public func refreshOldestUnacknowledged() async -> Double? {
        let oldest: Date?
        do {
            oldest = try await store.oldestPendingFollowUp(kinds: [.playAcknowledge, .playConsume])
        } catch {
            logger.debug("google play: oldest acknowledge not read (ledger)", metadata: [LogKeys.error: "\(error)"])
            return nil
        }
        let age = oldest.map { max(0, now().timeIntervalSince($0)) } ?? 0
        Gauge(label: MetricNames.googlePlayOldestUnacknowledged).record(age)
        // Its own gauge: a refund review waits 24 hours, an acknowledge three days.
        if configuration.answersRefundReviews {
            do {
                let review = try await store.oldestPendingFollowUp(kinds: [.playRefundReview])
                let reviewAge = review.map { max(0, now().timeIntervalSince($0)) } ?? 0
                Gauge(label: MetricNames.googlePlayOldestRefundReview).record(reviewAge)
            } catch {
                // The ledger did not answer: the gauge keeps its value, as the acknowledgements' does.
            }
        }
        return age
    }

    // MARK: - Reporting

    /// Counts a call's result; a refund review's with the policy's rule (empty before a rule decided it).
    private func count(_ target: GooglePlayFollowUpTarget, _ result: String, rule: String? = nil) {
        if target.action == .reviewRefund {
            Counter(
                label: MetricNames.googlePlayRefundReviews, dimensions: [("result", result), ("rule", rule ?? "")]
            )
            .increment()
            return
        }
        Counter(
            label: MetricNames.googlePlayAcknowledgements, dimensions: [("call", target.label), ("result", result)]
        )
        .increment()
    }

    /// The package and product: never the purchase token.
    private func metadata(_ target: GooglePlayFollowUpTarget, _ extra: Logger.Metadata = [:]) -> Logger.Metadata {
        var metadata: Logger.Metadata = [
            LogKeys.followUpKind: "\(target.kind)", LogKeys.playPackageName: "\(target.packageName)",
            LogKeys.playProductID: "\(target.productID)",
        ]
        metadata.merge(extra) { _, new in new }
        return metadata
    }

    /// A failure's code and status, safe to store and show (Google's error status, never a body or a token).
    static func detail(of error: GooglePlayAPIError) -> String {
        var text = error.code.rawValue
        if let status = error.httpStatus { text += " (HTTP \(status))" }
        if let status = error.googleStatus { text += " (\(status))" }
        return text
    }
}

/// The follow-ups of the worker's delivered verdicts, in one `afterDelivery` for the worker loop.
public enum VerdictFollowUps {
    /// One closure for the worker loop's `afterDelivery`: a Google Play job's verdict goes to `googlePlay`, any other
    /// to `appStore` (when switched on). The job may complete only when its part recorded its calls.
    public static func afterDelivery(
        appStore: AppleFollowUps?, googlePlay: GooglePlayFollowUps?
    ) -> (@Sendable (Verdict, ReceiptJob) async -> Bool)? {
        guard appStore != nil || googlePlay != nil else { return nil }
        return { verdict, job in
            // A Google Play notification's verdict is Google Play's too: never an App Store follow-up.
            if job.proof.store == .googlePlay {
                return await googlePlay?.verdictDelivered(verdict, job: job) ?? true
            }
            return await appStore?.verdictDelivered(verdict, job: job) ?? true
        }
    }

    /// Which verdicts the closure of ``afterDelivery(appStore:googlePlay:)`` needs to be told of: a Google Play job's
    /// grant (``GooglePlayFollowUps`` acts on no other verdict), and every App Store verdict while the App Store's
    /// follow-ups are on. The rest are delivered without a task waiting for the report.
    public static func followsUp(
        appStore: AppleFollowUps?, googlePlay: GooglePlayFollowUps?
    ) -> @Sendable (Verdict, ReceiptJob) -> Bool {
        let appStoreOn = appStore != nil
        let googlePlayOn = googlePlay != nil
        let reviewsOn = googlePlay?.answersRefundReviews ?? false
        let catalog = googlePlay?.catalog
        return { verdict, job in
            guard job.proof.store == .googlePlay else { return appStoreOn }
            if case .googlePlayNotification = job.proof {
                // A refund review to answer, or a grant to acknowledge (a pending purchase its notification completed).
                return reviewsOn && GooglePlayFollowUps.refundReview(of: verdict, job: job) != nil
                    || catalog.map { GooglePlayFollowUps.target(of: verdict, job: job, catalog: $0) != nil } ?? false
            }
            return googlePlayOn && (verdict.outcome == .granted || verdict.outcome == .alreadyGranted)
        }
    }
}
