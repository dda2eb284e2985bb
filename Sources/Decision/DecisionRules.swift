import Foundation
import Messages

/// Everything one decision reads. Values only: the rules do no I/O.
public struct DecisionInput: Sendable, Hashable {
    public var job: ReceiptJob
    public var evidence: PurchaseEvidence
    public var snapshot: LedgerSnapshot
    public var policy: DecisionPolicy
    /// The job record's timestamp, when known: a verdict that is not recorded (a job id reused with another
    /// content) takes it as its `decided_at`, so a redelivery repeats that verdict exactly.
    public var recordedAt: Date?

    public init(
        job: ReceiptJob, evidence: PurchaseEvidence, snapshot: LedgerSnapshot, policy: DecisionPolicy,
        recordedAt: Date? = nil
    ) {
        self.job = job
        self.evidence = evidence
        self.snapshot = snapshot
        self.policy = policy
        self.recordedAt = recordedAt
    }
}

/// What the rules concluded.
public enum DecisionResult: Sendable, Hashable {
    /// A verdict, with the ledger writes it needs.
    case decided(LedgerDecision)
    /// The evidence is not authenticated and the ledger alone cannot decide: ask Apple, then decide again.
    case needsApple
}

/// The decision rules of the ledger, in one pure function (see docs/LEDGER.md for the rule table).
///
/// The rules decide from a snapshot. Applying the writes may find the ledger changed meanwhile
/// (``ApplyResult/raceLost``); the caller then reads a fresh snapshot and calls the rules again with the same
/// evidence, which is what ``LedgerSettlement`` does.
public enum DecisionRules {
    /// Decides a job. Returns ``DecisionResult/needsApple`` only when the evidence is not authenticated and Apple
    /// has not been found unavailable; with Apple's answer or a verified signature it always decides.
    public static func decide(_ input: DecisionInput) -> DecisionResult {
        if let prior = input.snapshot.priorVerdict {
            // A redelivery: the first verdict, unchanged (same verdict_id, same decided_at).
            if prior.isVerdict(of: input.job) { return .decided(LedgerDecision(verdict: prior, isRecorded: true)) }
            // The job id was recorded for another content (proof, account or expectation): this job gets its own
            // verdict id and a rejection of its own, never the recorded verdict (a consumer de-duplicating on
            // `verdict_id` would drop one of the two), and nothing is written: the id's record stays the first job's.
            return .decided(LedgerDecision(verdict: jobIDReused(input), isRecorded: true))
        }
        var evaluation = Evaluation(input: input)
        if let decision = evaluation.run() { return .decided(decision) }
        if input.evidence.appleUnavailable {
            let store = input.evidence.store
            return .decided(
                LedgerDecision(verdict: evaluation.verdict(.unverifiable, store.unavailableReason, by: store.decidedBy))
            )
        }
        if input.evidence.source == .apple {
            // Apple answered without authenticating or rejecting: treat as Apple's rejection, never loop.
            let store = input.evidence.store
            return .decided(
                LedgerDecision(verdict: evaluation.verdict(.rejected, store.rejectedReason, by: store.decidedBy)))
        }
        return .needsApple
    }

    /// The check the pipeline runs before calling Apple: a verdict when the local evidence and the ledger suffice
    /// (a redelivery, a local rejection, a verified signature, a transaction already owned by this or another
    /// account), `nil` when Apple must be asked.
    public static func decideFromLedger(
        job: ReceiptJob, localEvidence: PurchaseEvidence, snapshot: LedgerSnapshot, policy: DecisionPolicy
    ) -> LedgerDecision? {
        var evidence = localEvidence
        evidence.appleUnavailable = false
        switch decide(DecisionInput(job: job, evidence: evidence, snapshot: snapshot, policy: policy)) {
        case .decided(let decision): return decision
        case .needsApple: return nil
        }
    }
}

extension DecisionRules {
    /// The verdict of a job whose id the ledger recorded for another content: `rejected` / `job_id_reused`.
    static func jobIDReused(_ input: DecisionInput) -> Verdict {
        let decidedAt = input.recordedAt ?? input.job.submittedAt ?? input.policy.now
        return Verdict(
            job: input.job, outcome: .rejected, reason: .jobIDReused, decidedBy: .ledger,
            decidedAt: Date(timeIntervalSince1970: (decidedAt.timeIntervalSince1970 * 1000).rounded(.down) / 1000))
    }
}

extension PurchaseEvidence {
    /// The stage the evidence comes from, as a verdict names it (the store's answer by the store's name).
    public var decidedBy: Verdict.DecidedBy {
        switch source {
        case .prefilter: .prefilter
        case .signature: .signature
        case .apple: store.decidedBy
        }
    }
}

extension Store {
    /// A verdict decided on this store's answer.
    var decidedBy: Verdict.DecidedBy {
        switch self {
        case .appStore: .apple
        case .googlePlay: .googlePlay
        }
    }

    /// The reason of a job this store could not be asked about before its deadline.
    var unavailableReason: Verdict.Reason {
        switch self {
        case .appStore: .appleUnavailable
        case .googlePlay: .googlePlayUnavailable
        }
    }

    /// The reason of a request this store refused.
    public var rejectedReason: Verdict.Reason {
        switch self {
        case .appStore: .appleRejected
        case .googlePlay: .googlePlayRejected
        }
    }
}

/// How one transaction (or one subscription) stands for this job; the verdict takes the best standing.
private enum Standing: Int, Comparable {
    case expired, revoked, replayed, alreadyOwned, granted

    static func < (lhs: Standing, rhs: Standing) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// One run of the rules. A struct with mutating steps rather than one long function; still no I/O.
private struct Evaluation {
    let job: ReceiptJob
    let evidence: PurchaseEvidence
    let snapshot: LedgerSnapshot
    let policy: DecisionPolicy
    let now: Date
    let authentic: Bool
    var transactions: [PurchaseTransaction] = []
    var writes: [LedgerWrite] = []
    var standings: [Standing] = []
    /// Set when a step can only be decided with authenticated evidence.
    var needsAuthentication = false
    /// The account the verdict is for (the owner, for notifications).
    var verdictAccount: String
    /// The verdict's id (derived once: it hashes the whole proof).
    let verdictID: String
    /// Whether the ledger alone produced the standing (`decided_by: ledger`).
    var decidedByLedger = true
    /// A `REFUND_REVERSED` cleared the transaction's revocation: the snapshot's `revokedAt` no longer holds.
    var reinstated = false

    init(input: DecisionInput) {
        job = input.job
        evidence = input.evidence
        snapshot = input.snapshot
        policy = input.policy
        // The instant exactly as the verdict's JSON will carry it, so the verdict published now and the one read
        // back from the ledger on a redelivery are equal.
        let truncated = Date(
            timeIntervalSince1970: (input.policy.now.timeIntervalSince1970 * 1000).rounded(.down) / 1000)
        now = RFC3339.parse(RFC3339.format(truncated)) ?? truncated
        authentic = input.evidence.authenticity == .authentic
        verdictAccount = input.job.accountID
        verdictID = Verdict.verdictID(for: input.job)
    }

    mutating func run() -> LedgerDecision? {
        let by = evidence.decidedBy
        if evidence.rejection == .purchasePending {
            // Not paid yet: nothing to claim, and nothing final to say about the purchase. Who sent it is
            // remembered: the notification of its completion grants it to that account.
            var decision = LedgerDecision(verdict: verdict(.unverifiable, .purchasePending, by: by))
            if evidence.playNotification == nil, case .googlePlay(let purchase) = job.proof {
                decision.writes = [
                    .recordPendingPurchase(
                        PendingPlayPurchase(
                            purchaseToken: purchase.purchaseToken, accountID: job.accountID, jobID: job.jobID,
                            packageName: purchase.packageName, productID: purchase.productID, recordedAt: now))
                ]
            }
            return decision
        }
        if let reason = evidence.rejection { return reject(reason, by: by) }
        if evidence.authenticity == .notAuthenticated { return reject(.notAuthenticated, by: by) }
        if let actual = evidence.bundleID {
            if let expected = job.bundleID, expected != actual { return reject(.wrongBundle, by: by) }
            if let catalog = policy.catalog, !catalog.listsApp(actual, in: evidence.store) {
                return reject(.wrongBundle, by: by)
            }
        }
        if let environment = evidence.environment, environment != .production, !policy.allowSandbox {
            return reject(.environmentNotAllowed, by: by)
        }
        if let notification = evidence.notification, let expected = policy.appAppleID,
            (evidence.environment ?? .production) == .production, notification.appAppleID != expected
        {
            // Apple names the app in every production notification: another id (or none) is not this app's.
            return reject(.wrongApp, by: by)
        }
        transactions = Self.merged(evidence.transactions)
        if let catalog = policy.catalog {
            let known = transactions.filter { catalog.listsProduct($0.productID, in: evidence.store) }
            if !transactions.isEmpty && known.isEmpty { return reject(.unknownProduct, by: by) }
            transactions = known
        }
        if let notification = evidence.playNotification { return decidePlayNotification(notification) }
        if transactions.isEmpty {
            if authentic, evidence.notification != nil { return recordTransactionless() }
            return authentic ? reject(.noTransaction, by: by) : decidePurchaseTokenFromLedger()
        }
        // The product rule comes before every ownership rule: a proof without the product the job expects is never
        // `already_granted` for it. Read locally but not yet authenticated, a receipt may lack only what Apple adds
        // to its answer: a subscription's later transactions (renewals, upgrades in `latest_receipt_info`). For any
        // other product (or one the catalog does not sell) Apple answers with the receipt's own purchases, so the
        // proof already shows the answer.
        if let expected = job.expectedProductID ?? job.proof.googlePlayProductID,
            !transactions.contains(where: { $0.productID == expected })
        {
            if authentic { return reject(.productMismatch, by: by) }
            if let catalog = policy.catalog, catalog.productType(of: expected, in: evidence.store) != .autoRenewable {
                return reject(.productMismatch, by: by)
            }
            return nil
        }
        if let notification = evidence.notification {
            return decideNotification(notification)
        }
        if let reversed = reversalCorrection() {
            // The reconciler found a refund Apple reversed whose REFUND_REVERSED never arrived: decided as that
            // notification is, for the subscription's owner.
            transactions = [reversed]
            return decideNotification(SubscriptionNotification(kind: .refundReversed))
        }
        // A purchase the app tagged for another account is not this job's. Only on authenticated
        // evidence: a forged local token decides nothing, Apple's answer does.
        // A family member's transaction is not bound by it: the member did not buy it, and a token it carries was set
        // by the purchaser's app for the purchaser's account.
        if authentic, transactions.contains(where: { $0.appAccountToken != nil }) {
            let expected = job.appAccountToken?.lowercased() ?? AppAccountToken.derived(fromAccountID: job.accountID)
            transactions.removeAll { $0.appAccountToken != nil && $0.appAccountToken != expected && !$0.isFamilyShared }
            if transactions.isEmpty { return reject(.accountTokenMismatch, by: by) }
        }

        var subscriptions: [String: [PurchaseTransaction]] = [:]
        var subscriptionOrder: [String] = []
        for transaction in transactions {
            if productType(of: transaction) == .autoRenewable {
                let key = transaction.subscriptionKey
                if subscriptions[key] == nil { subscriptionOrder.append(key) }
                subscriptions[key, default: []].append(transaction)
            } else {
                evaluateSingle(transaction)
            }
        }
        for key in subscriptionOrder {
            evaluateSubscription(key: key, transactions: subscriptions[key] ?? [])
        }
        if needsAuthentication { return nil }
        return conclude()
    }

    /// The transaction a reconciler's reversal correction (``Messages/CorrectionJob``) restores: Apple, asked now,
    /// states it without a revocation, the ledger holds its claim revoked, and the job is for the owner. Nil
    /// otherwise, and the job is decided as any purchase: a transaction's state alone never reinstates a claim.
    func reversalCorrection() -> PurchaseTransaction? {
        guard authentic, evidence.source == .apple, evidence.store == .appStore,
            CorrectionJob.isReversal(jobID: job.jobID), case .transactionID(let id) = job.proof,
            let transaction = transactions.first(where: { $0.transactionID == id }), transaction.revokedAt == nil,
            let claim = snapshot.claim(id), claim.revokedAt != nil
        else { return nil }
        var claims = snapshot.claims(ofSubscription: transaction.subscriptionKey)
        if !claims.contains(where: { $0.transactionID == id }) { claims.append(claim) }
        return Self.owner(of: claims) == job.accountID ? transaction : nil
    }

    // MARK: Single purchases (consumable, non-consumable, non-renewing)

    mutating func evaluateSingle(_ transaction: PurchaseTransaction) {
        if let claim = snapshot.claim(transaction.transactionID) {
            if claim.accountID != job.accountID {
                // Not this account's; a refund Apple reports is still recorded for the owner's entitlement.
                if authentic, let revokedAt = transaction.revokedAt, claim.revokedAt == nil {
                    writes.append(
                        .revoke(
                            transactionID: claim.transactionID, revokedAt: revokedAt,
                            revocation: transaction.revocation))
                }
                standings.append(.replayed)
            } else if claim.revokedAt != nil {
                standings.append(.revoked)
            } else if authentic, let revokedAt = transaction.revokedAt {
                writes.append(
                    .revoke(
                        transactionID: claim.transactionID, revokedAt: revokedAt, revocation: transaction.revocation))
                standings.append(.revoked)
                decidedByLedger = false
            } else if !claim.isActive(at: now) {
                standings.append(.expired)
            } else {
                standings.append(.alreadyOwned)
            }
            return
        }
        guard authentic else {
            needsAuthentication = true
            return
        }
        decidedByLedger = false
        if transaction.revokedAt != nil {
            standings.append(.revoked)
            return
        }
        let claim = makeClaim(transaction, account: job.accountID)
        writes.append(.claim(claim))
        standings.append(claim.isActive(at: now) ? .granted : .expired)
    }

    // MARK: Auto-renewable subscriptions, one original transaction at a time

    mutating func evaluateSubscription(key: String, transactions group: [PurchaseTransaction]) {
        var ledgerClaims = subscriptionClaims(key, familyShared: group.contains(where: \.isFamilyShared))
        for transaction in group {
            if let claim = snapshot.claim(transaction.transactionID),
                !ledgerClaims.contains(where: { $0.transactionID == claim.transactionID })
            {
                ledgerClaims.append(claim)
            }
        }
        let owner = Self.owner(of: ledgerClaims)
        let ledgerActive = TransactionClaim.subscriptionIsActive(ledgerClaims, at: now)
        let unclaimed = group.filter { snapshot.claim($0.transactionID) == nil }

        // An upgrade, a downgrade or a resubscription (Google Play's `linkedPurchaseToken`) carries the replaced
        // subscription's entitlement to its owner only: for another account the new subscription is a replay.
        if owner == nil, authentic, let linkedOwner = linkedOwner(of: group), linkedOwner != job.accountID {
            standings.append(.replayed)
            return
        }

        if let owner, owner != job.accountID {
            if ledgerActive {
                // Another account holds a current period: a replay, whatever the evidence says.
                standings.append(.replayed)
                return
            }
            // Seed 001's "double account": the owner's entitlement is over; a current period that Apple
            // confirms, on a transaction the owner never had, moves the subscription to this account.
            guard evidence.source == .apple, authentic else {
                needsAuthentication = true
                return
            }
            let activeNew = unclaimed.filter { $0.revokedAt == nil && isActive($0) }
            guard !activeNew.isEmpty else {
                standings.append(.replayed)
                return
            }
            decidedByLedger = false
            writes.append(
                .moveSubscription(
                    originalTransactionID: key, from: owner, to: job.accountID,
                    transactionIDs: ledgerClaims.map(\.transactionID).sorted()))
            for transaction in unclaimed where transaction.revokedAt == nil {
                writes.append(.claim(makeClaim(transaction, account: job.accountID)))
            }
            standings.append(.granted)
            return
        }

        guard authentic else {
            // Own subscription: the ledger decides only while it knows a current period and nothing is new.
            if owner == job.accountID && ledgerActive && unclaimed.isEmpty {
                standings.append(.alreadyOwned)
            } else {
                needsAuthentication = true
            }
            return
        }
        // Unowned, or owned by this account: claim what is new, record what changed.
        var newlyActive = false
        for transaction in group {
            let claim = snapshot.claim(transaction.transactionID)
            let correction = TransactionCorrection(stated: transaction, claim: claim)
            if let claim {
                if let revokedAt = correction.revokedAt {
                    writes.append(
                        .revoke(
                            transactionID: claim.transactionID, revokedAt: revokedAt,
                            revocation: transaction.revocation))
                    decidedByLedger = false
                }
                if correction.laterExpiry != nil || correction.laterGracePeriodExpiry != nil {
                    writes.append(
                        .extendSubscription(
                            transactionID: claim.transactionID, expiresDate: correction.laterExpiry,
                            gracePeriodExpiresDate: correction.laterGracePeriodExpiry))
                }
            } else if correction.claimsTransaction {
                writes.append(.claim(makeClaim(transaction, account: job.accountID)))
                decidedByLedger = false
                if isActive(transaction) { newlyActive = true }
            }
        }
        // The subscription stands as its latest period does (Apple's status), not as the union of its periods.
        let latest = mergedView(group: group, claims: ledgerClaims).max { lhs, rhs in
            SubscriptionPeriod.order(purchased: lhs.purchase, ends: lhs.end, transactionID: lhs.id)
                < SubscriptionPeriod.order(purchased: rhs.purchase, ends: rhs.end, transactionID: rhs.id)
        }
        if latest?.isActive == true {
            standings.append(newlyActive ? .granted : .alreadyOwned)
        } else {
            decidedByLedger = false
            standings.append(latest?.revoked == true ? .revoked : .expired)
        }
    }

    /// The owner of the subscription `group` replaced (``PurchaseTransaction/linkedSubscriptionKey``), if the
    /// ledger knows it.
    func linkedOwner(of group: [PurchaseTransaction]) -> String? {
        for key in Set(group.compactMap(\.linkedSubscriptionKey)).sorted() {
            if let owner = Self.owner(of: snapshot.claims(ofSubscription: key)) { return owner }
        }
        return nil
    }

    // MARK: A Google Play purchase the ledger knows

    /// A Google Play purchase read locally names its token, not its order: the ledger decides a token whose claims
    /// still entitle (the owner's repeat: `already_granted`; another account's: `replayed`), as it decides an App
    /// Store subscription it knows, without asking Google. Anything else (a token the ledger does not know, or whose
    /// entitlement ended) needs Google's answer.
    mutating func decidePurchaseTokenFromLedger() -> LedgerDecision? {
        guard case .googlePlay(let purchase) = job.proof else { return nil }
        let claims = snapshot.claims(ofSubscription: purchase.purchaseToken)
        guard let owner = Self.owner(of: claims), TransactionClaim.subscriptionIsActive(claims, at: now),
            claims.contains(where: { $0.productID == purchase.productID })
        else { return nil }
        transactions = claims.sorted { $0.periodOrder < $1.periodOrder }.map { claim in
            PurchaseTransaction(
                transactionID: claim.transactionID, originalTransactionID: claim.originalTransactionID,
                productID: claim.productID, productType: claim.productType, purchaseDate: claim.purchaseDate,
                expiresDate: claim.expiresDate, revokedAt: claim.revokedAt,
                gracePeriodExpiresDate: claim.gracePeriodExpiresDate,
                orderID: claim.transactionID == purchase.purchaseToken
                    ? nil : claim.transactionID.split(separator: "#").first.map(String.init),
                purchaseToken: purchase.purchaseToken)
        }
        standings = [owner == job.accountID ? .alreadyOwned : .replayed]
        return conclude()
    }

    // MARK: Google Play notifications

    /// A Google Play notification job (docs/LEDGER.md, "Google Play notifications"): the purchase as Google answered
    /// it now is applied to the token's owner; the notification's kind adds a revocation, the end of a replaced
    /// subscription, a voided order or a refund review. The verdict is for the owner.
    mutating func decidePlayNotification(_ notification: PlayNotification) -> LedgerDecision? {
        guard authentic else { return nil }
        guard notification.kind != .test, let token = notification.purchaseToken, !transactions.isEmpty else {
            return recordTransactionless()
        }
        let claims = snapshot.claims(ofSubscription: token)
        var owner = Self.owner(of: claims)
        if owner == nil, let pending = snapshot.pendingPlayPurchase, pending.purchaseToken == token {
            // A pending purchase completed: it goes to the account that sent it, and to nobody else.
            owner = pending.accountID
        }
        if owner == nil, let linked = linkedOwner(of: transactions) {
            owner = linked
        }
        guard let owner else { return reject(.unclaimed, by: evidence.decidedBy) }
        verdictAccount = owner
        var endedReplacements: [String] = []
        if let readAt = notification.readAt, let newest = claims.compactMap(\.notificationSignedAt).max(),
            readAt < newest
        {
            // A read older than one already applied (a job decided after a newer one): the ledger's state answers.
            return concludeFromLedger(claims)
        }
        decidedByLedger = false
        // The replaced subscription of an upgrade or a downgrade ends when its replacement is applied.
        for key in Set(transactions.compactMap(\.linkedSubscriptionKey)).sorted() where key != token {
            let replaced = snapshot.claims(ofSubscription: key)
            if replaced.contains(where: { ($0.entitlementEnd ?? .distantFuture) > now && $0.revokedAt == nil }) {
                writes.append(.endSubscription(originalTransactionID: key, at: now))
                endedReplacements.append(key)
            }
        }
        var newlyActive = false
        for index in transactions.indices {
            var transaction = transactions[index]
            let existing = snapshot.claim(transaction.transactionID)
            if notification.kind == .revoked
                || notification.kind == .voided
                    && Self.names(order: notification.voidedOrderID, transaction.transactionID)
            {
                transaction.revokedAt = transaction.revokedAt ?? notification.eventTime ?? now
            }
            transactions[index] = transaction
            if let existing {
                if let revokedAt = transaction.revokedAt, existing.revokedAt == nil {
                    writes.append(.revoke(transactionID: existing.transactionID, revokedAt: revokedAt))
                }
                appendExtension(transaction, claim: existing)
            } else {
                // A new order (a renewal, a recovery, a restart, a completed pending purchase), or a revoked one the
                // ledger never saw, claimed revoked for the owner's history.
                writes.append(.claim(makeClaim(transaction, account: owner)))
                if isActive(transaction) { newlyActive = true }
            }
        }
        if notification.kind == .revoked {
            // Access ends now: every claim of the token, not only the period Google answered with.
            let revokedAt = transactions.compactMap(\.revokedAt).min() ?? now
            for claim in claims
            where claim.revokedAt == nil
                && !transactions.contains(where: { $0.transactionID == claim.transactionID })
            {
                writes.append(.revoke(transactionID: claim.transactionID, revokedAt: revokedAt))
            }
        }
        if notification.kind == .voided, let order = notification.voidedOrderID {
            // A voided order of an earlier period: its own claim only.
            for claim in claims
            where claim.revokedAt == nil && Self.names(order: order, claim.transactionID)
                && !transactions.contains(where: { $0.transactionID == claim.transactionID })
            {
                writes.append(.revoke(transactionID: claim.transactionID, revokedAt: notification.eventTime ?? now))
            }
        }
        if let review = notification.refundReview { writes.append(.recordRefundReview(review)) }
        writes.append(
            .recordNotification(
                originalTransactionID: token, signedAt: notification.readAt, autoRenew: notification.autoRenew))
        // The purchase stands as Google answers it now: its latest period as read, whatever the ledger held.
        let latest = transactions.max { lhs, rhs in
            SubscriptionPeriod.order(
                purchased: lhs.purchaseDate, ends: entitlementEnd(lhs), transactionID: lhs.transactionID)
                < SubscriptionPeriod.order(
                    purchased: rhs.purchaseDate, ends: entitlementEnd(rhs), transactionID: rhs.transactionID)
        }
        // The verdict also states the replaced subscription's latest period as ended, so that its consumers (the
        // entitlement projection) end it too.
        for key in endedReplacements {
            guard let claim = TransactionClaim.latest(of: snapshot.claims(ofSubscription: key)) else { continue }
            transactions.append(
                PurchaseTransaction(
                    transactionID: claim.transactionID, originalTransactionID: claim.originalTransactionID,
                    productID: claim.productID, productType: claim.productType, purchaseDate: claim.purchaseDate,
                    expiresDate: now, orderID: claim.transactionID == key ? nil : claim.transactionID,
                    purchaseToken: key))
        }
        if let latest, isActive(latest) {
            standings = [newlyActive ? .granted : .alreadyOwned]
        } else if latest?.revokedAt != nil {
            standings = [.revoked]
        } else {
            // Ended (expired, on hold, paused, a pending purchase cancelled): a period the ledger still holds as
            // current ends now, as Google says; the one write that moves a date earlier, never from a stale read.
            if TransactionClaim.subscriptionIsActive(claims, at: now) {
                writes.insert(.endSubscription(originalTransactionID: token, at: now), at: 0)
            }
            standings = [.expired]
        }
        return conclude()
    }

    /// Whether a claim's transaction id is Google's order `order` (alone, or with a line item's product after `#`).
    static func names(order: String?, _ transactionID: String) -> Bool {
        guard let order else { return false }
        return transactionID == order || transactionID.hasPrefix(order + "#")
    }

    // MARK: App Store Server Notifications V2

    mutating func decideNotification(_ notification: SubscriptionNotification) -> LedgerDecision? {
        guard authentic else { return nil }
        guard let transaction = transactions.last else { return reject(.noTransaction, by: .signature) }
        transactions = [transaction]
        let key = transaction.subscriptionKey
        let existing = snapshot.claim(transaction.transactionID)
        // A family member's transaction belongs to the member's claims, never to the purchaser's (and the reverse),
        // so a REVOKE ends that member's access only and the verdict is for that member.
        var ledgerClaims = subscriptionClaims(
            key, familyShared: existing?.isFamilyShared ?? transaction.isFamilyShared)
        if let existing, !ledgerClaims.contains(where: { $0.transactionID == existing.transactionID }) {
            ledgerClaims.append(existing)
        }
        guard let owner = Self.owner(of: ledgerClaims) else {
            return reject(.unclaimed, by: evidence.decidedBy)
        }
        verdictAccount = owner
        if let signed = notification.signedDate, let newest = ledgerClaims.compactMap(\.notificationSignedAt).max(),
            signed < newest
        {
            // Older than a notification already applied: Apple's retries and the reconciler deliver out of order.
            // The ledger's current state answers, so a late one never undoes a newer state. Only a transaction the
            // ledger has never seen is claimed, as Apple signed it (a renewal whose DID_RENEW came after the next
            // renewal's, seen in the chaos harness): a claim of its own takes nothing from the others.
            guard existing == nil else { return concludeFromLedger(ledgerClaims) }
            var claim = makeClaim(transaction, account: owner)
            if notification.kind == .refunded || notification.kind == .revoked {
                claim.revokedAt = transaction.revokedAt ?? now
                claim.revocation = transaction.revocation
            }
            return concludeFromLedger(ledgerClaims + [claim], writing: [.claim(claim)])
        }
        decidedByLedger = false
        switch notification.kind {
        case .renewed:
            if let existing {
                appendExtension(transaction, claim: existing)
                standings.append(isActive(transaction) || existing.isActive(at: now) ? .alreadyOwned : .expired)
            } else {
                writes.append(.claim(makeClaim(transaction, account: owner)))
                standings.append(isActive(transaction) ? .granted : .expired)
            }
        case .refunded, .revoked:
            // REVOKE names the one family member's transaction: only that claim is revoked, never its siblings.
            // A prorated refund (REFUND_PRORATED) revokes the transaction as a full one does: Apple refunds the part
            // of the period left and sets `revocationDate`, so access ends then (docs/LEDGER.md, "Revocations").
            let revokedAt = transaction.revokedAt ?? now
            if let existing {
                if existing.revokedAt == nil || existing.revocation == nil && transaction.revocation != nil {
                    writes.append(
                        .revoke(
                            transactionID: existing.transactionID, revokedAt: revokedAt,
                            revocation: transaction.revocation))
                }
            } else {
                var claim = makeClaim(transaction, account: owner)
                claim.revokedAt = revokedAt
                claim.revocation = transaction.revocation
                writes.append(.claim(claim))
            }
            transactions[0].revokedAt = revokedAt
            standings.append(.revoked)
        case .refundReversed:
            // Gives back what the refund took: the claim entitles again, with the dates Apple states now.
            transactions[0].revokedAt = nil
            transactions[0].revocation = nil
            reinstated = true
            if let existing {
                if existing.revokedAt != nil { writes.append(.reinstate(transactionID: existing.transactionID)) }
                appendExtension(transaction, claim: existing)
                var restored = existing
                restored.revokedAt = nil
                standings.append(isActive(transactions[0]) || restored.isActive(at: now) ? .alreadyOwned : .expired)
            } else {
                writes.append(.claim(makeClaim(transactions[0], account: owner)))
                standings.append(isActive(transactions[0]) ? .granted : .expired)
            }
        case .renewalFailed, .gracePeriodExpired, .expired, .extended, .renewalStatusChanged, .consumptionRequest,
            .refundDeclined, .other:
            if let existing {
                appendExtension(transaction, claim: existing)
            } else {
                writes.append(.claim(makeClaim(transaction, account: owner)))
            }
            let accessEnded = notification.kind == .gracePeriodExpired || notification.kind == .expired
            // Kinds that only re-state the entitlement keep what the ledger knows (a later renewal, for example).
            let restates = !accessEnded && notification.kind != .renewalFailed
            // A notification restating an earlier period of a subscription that has a later one: the subscription
            // stands as its latest period does, not as the earlier period's own dates.
            let superseded =
                restates
                && ledgerClaims.contains {
                    $0.transactionID != transaction.transactionID
                        && ($0.purchaseDate ?? .distantPast) > (transaction.purchaseDate ?? .distantPast)
                }
            let active =
                superseded
                ? TransactionClaim.subscriptionIsActive(ledgerClaims, at: now)
                : transaction.revokedAt == nil
                    && (isActive(transaction) && !accessEnded
                        || restates && TransactionClaim.subscriptionIsActive(ledgerClaims, at: now))
            standings.append(active ? .alreadyOwned : .expired)
        }
        if notification.signedDate != nil || notification.autoRenew != nil {
            let familyShared = existing?.isFamilyShared ?? transaction.isFamilyShared
            writes.append(
                .recordNotification(
                    originalTransactionID: key, signedAt: notification.signedDate, autoRenew: notification.autoRenew,
                    familyShared: familyShared))
        }
        return conclude()
    }

    /// The answer of a notification older than the newest applied: the subscription's state as the ledger holds it
    /// (with `writes`, the claim of a transaction it did not have).
    func concludeFromLedger(_ claims: [TransactionClaim], writing writes: [LedgerWrite] = []) -> LedgerDecision {
        let standing: Standing
        let latest = TransactionClaim.latest(of: claims)
        if latest?.isActive(at: now) == true {
            standing = .alreadyOwned
        } else {
            standing = latest?.revokedAt != nil ? .revoked : .expired
        }
        var evaluation = self
        if let claim = claims.first(where: { $0.transactionID == transactions[0].transactionID }) {
            // The transaction as the ledger holds it, not as the late notification described it.
            evaluation.transactions[0].expiresDate = claim.expiresDate
            evaluation.transactions[0].gracePeriodExpiresDate = claim.gracePeriodExpiresDate
            evaluation.transactions[0].revokedAt = claim.revokedAt
            evaluation.transactions[0].revocation = claim.revocation
        }
        evaluation.standings = [standing]
        evaluation.writes = writes
        evaluation.decidedByLedger = true
        return evaluation.conclude()
    }

    /// A notification that concerns no transaction (`TEST`, `RENEWAL_EXTENSION` / `SUMMARY`,
    /// `EXTERNAL_PURCHASE_TOKEN`, `RESCIND_CONSENT`): recorded with its verdict, the ledger's claims unchanged.
    func recordTransactionless() -> LedgerDecision {
        reject(.notificationRecorded, by: evidence.decidedBy)
    }

    mutating func appendExtension(_ transaction: PurchaseTransaction, claim: TransactionClaim) {
        let laterExpiry = Self.later(transaction.expiresDate, than: claim.expiresDate)
        let laterGrace = Self.later(transaction.gracePeriodExpiresDate, than: claim.gracePeriodExpiresDate)
        if laterExpiry != nil || laterGrace != nil {
            writes.append(
                .extendSubscription(
                    transactionID: claim.transactionID, expiresDate: laterExpiry, gracePeriodExpiresDate: laterGrace))
        }
    }

    // MARK: Verdicts

    func conclude() -> LedgerDecision {
        let best = standings.max() ?? .expired
        let source = evidence.decidedBy
        let verdict: Verdict
        switch best {
        case .granted: verdict = self.verdict(.granted, nil, by: source)
        case .alreadyOwned:
            verdict = self.verdict(.alreadyGranted, .alreadyOwned, by: decidedByLedger ? .ledger : source)
        case .replayed: verdict = self.verdict(.rejected, .replayed, by: .ledger)
        case .revoked: verdict = self.verdict(.rejected, .revoked, by: decidedByLedger ? .ledger : source)
        case .expired: verdict = self.verdict(.rejected, .expired, by: decidedByLedger ? .ledger : source)
        }
        return LedgerDecision(verdict: verdict, writes: writes)
    }

    func reject(_ reason: Verdict.Reason, by decidedBy: Verdict.DecidedBy) -> LedgerDecision {
        LedgerDecision(verdict: verdict(.rejected, reason, by: decidedBy))
    }

    func verdict(_ outcome: Verdict.Outcome, _ reason: Verdict.Reason?, by decidedBy: Verdict.DecidedBy) -> Verdict {
        Verdict(
            verdictID: verdictID, jobID: job.jobID, accountID: verdictAccount, outcome: outcome, reason: reason,
            decidedBy: decidedBy, store: job.proof.store,
            environment: evidence.environment?.rawValue, transactions: verdictTransactions(),
            appleStatus: evidence.appleStatus,
            decidedAt: now)
    }

    /// The verdict's transactions. The renewal info Apple gave (billing retry, grace period) is stated on each
    /// subscription's latest transaction, where Apple's status lives; not by a late notification answered from the
    /// ledger, whose renewal info is older than what the ledger holds.
    func verdictTransactions() -> [Verdict.Transaction] {
        let statesRenewal = !((evidence.notification != nil || evidence.playNotification != nil) && decidedByLedger)
        var latest: [String: PurchaseTransaction] = [:]
        for transaction in transactions where productType(of: transaction) == .autoRenewable {
            let key = transaction.subscriptionKey
            if let current = latest[key],
                (current.purchaseDate ?? .distantPast, current.transactionID)
                    > (transaction.purchaseDate ?? .distantPast, transaction.transactionID)
            {
                continue
            }
            latest[key] = transaction
        }
        return transactions.map { transaction in
            var item = verdictTransaction(transaction)
            if statesRenewal, transaction.hasRenewalInfo,
                latest[transaction.subscriptionKey]?.transactionID == transaction.transactionID
            {
                item.inBillingRetry = transaction.isInBillingRetry
                item.gracePeriodExpiresDate = transaction.gracePeriodExpiresDate
                item.paused = transaction.isPaused
            }
            return item
        }
    }

    func verdictTransaction(_ transaction: PurchaseTransaction) -> Verdict.Transaction {
        let claim = snapshot.claim(transaction.transactionID)
        // A Google Play notification applied on Google's answer states the purchase as Google does now: a period it
        // ended early (on hold, paused, replaced) is not current, whatever end the ledger held.
        let statedByGoogle = evidence.playNotification != nil && !decidedByLedger
        return Verdict.Transaction(
            transactionID: transaction.transactionID, originalTransactionID: transaction.originalTransactionID,
            productID: transaction.productID, purchaseDate: transaction.purchaseDate,
            expiresDate: statedByGoogle
                ? entitlementEnd(transaction) : Self.latest(entitlementEnd(transaction), claim?.entitlementEnd),
            revokedAt: transaction.revokedAt ?? (reinstated ? nil : claim?.revokedAt), quantity: transaction.quantity,
            orderID: transaction.orderID, purchaseToken: transaction.purchaseToken,
            revocation: reinstated ? nil : transaction.revocation ?? claim?.revocation,
            ownershipType: transaction.ownershipType ?? claim?.ownershipType)
    }

    // MARK: Helpers

    func productType(of transaction: PurchaseTransaction) -> ProductType {
        if let type = transaction.productType { return type }
        if let type = policy.catalog?.productType(of: transaction.productID, in: evidence.store) { return type }
        return transaction.expiresDate == nil ? .nonConsumable : .autoRenewable
    }

    /// The end of the access a transaction gives: its expiry, or the grace period's end while in grace.
    func entitlementEnd(_ transaction: PurchaseTransaction) -> Date? {
        switch productType(of: transaction) {
        case .consumable, .nonConsumable: return nil
        case .autoRenewable, .nonRenewing:
            return Self.latest(transaction.expiresDate, transaction.gracePeriodExpiresDate)
        }
    }

    func isActive(_ transaction: PurchaseTransaction) -> Bool {
        guard transaction.revokedAt == nil else { return false }
        guard let end = entitlementEnd(transaction) else { return true }
        return end > now
    }

    /// Each period of a subscription as the evidence and the ledger together show it.
    func mergedView(
        group: [PurchaseTransaction], claims: [TransactionClaim]
    ) -> [(id: String, purchase: Date?, end: Date?, revoked: Bool, isActive: Bool)] {
        var ids = Set<String>()
        var view: [(id: String, purchase: Date?, end: Date?, revoked: Bool, isActive: Bool)] = []
        for transaction in group {
            ids.insert(transaction.transactionID)
            let claim = snapshot.claim(transaction.transactionID)
            let end = Self.latest(entitlementEnd(transaction), claim?.entitlementEnd)
            let revoked = transaction.revokedAt != nil || claim?.revokedAt != nil
            view.append(
                (
                    transaction.transactionID, transaction.purchaseDate ?? claim?.purchaseDate, end, revoked,
                    !revoked && (end.map { $0 > now } ?? true)
                ))
        }
        for claim in claims where !ids.contains(claim.transactionID) {
            view.append(
                (
                    claim.transactionID, claim.purchaseDate, claim.entitlementEnd, claim.revokedAt != nil,
                    claim.isActive(at: now)
                ))
        }
        return view
    }

    func makeClaim(_ transaction: PurchaseTransaction, account: String) -> TransactionClaim {
        TransactionClaim(
            transactionID: transaction.transactionID, originalTransactionID: transaction.subscriptionKey,
            accountID: account, productID: transaction.productID, productType: productType(of: transaction),
            bundleID: evidence.bundleID, environment: evidence.environment?.rawValue,
            purchaseDate: transaction.purchaseDate, expiresDate: transaction.expiresDate,
            gracePeriodExpiresDate: transaction.gracePeriodExpiresDate, revokedAt: transaction.revokedAt,
            grantedJobID: job.jobID, verdictID: verdictID, createdAt: now, updatedAt: now,
            revocation: transaction.revokedAt == nil ? nil : transaction.revocation,
            ownershipType: transaction.ownershipType, storefront: transaction.storefront)
    }

    /// The claims of one subscription that a transaction is judged with: a family member's claims
    /// (`FAMILY_SHARED`) and the purchaser's are never one subscription, even under one original transaction id.
    /// Apple gives each member transactions of their own; this keeps a member's grant from reading as a replay of
    /// the purchaser's, and a member's revocation from touching the purchaser's access.
    func subscriptionClaims(_ key: String, familyShared: Bool) -> [TransactionClaim] {
        snapshot.claims(ofSubscription: key).filter { $0.isFamilyShared == familyShared }
    }

    /// The owner of a subscription: the account holding its claim with the latest entitlement.
    static func owner(of claims: [TransactionClaim]) -> String? {
        claims.max { lhs, rhs in
            (lhs.entitlementEnd ?? .distantFuture, lhs.transactionID) < (
                rhs.entitlementEnd ?? .distantFuture, rhs.transactionID
            )
        }?.accountID
    }

    static func latest(_ a: Date?, _ b: Date?) -> Date? {
        switch (a, b) {
        case (nil, nil): nil
        case (let x?, nil), (nil, let x?): x
        case (let x?, let y?): max(x, y)
        }
    }

    /// `candidate` when it is later than `stored` (or `stored` is unknown), else nil.
    static func later(_ candidate: Date?, than stored: Date?) -> Date? {
        TransactionCorrection.later(candidate, than: stored)
    }

    /// One entry per transaction id (a receipt lists renewals in both `in_app` and `latest_receipt_info`),
    /// keeping the most informative copy, in purchase order.
    static func merged(_ transactions: [PurchaseTransaction]) -> [PurchaseTransaction] {
        var byID: [String: PurchaseTransaction] = [:]
        var order: [String] = []
        for transaction in transactions {
            guard var existing = byID[transaction.transactionID] else {
                byID[transaction.transactionID] = transaction
                order.append(transaction.transactionID)
                continue
            }
            existing.expiresDate = latest(existing.expiresDate, transaction.expiresDate)
            existing.gracePeriodExpiresDate = latest(
                existing.gracePeriodExpiresDate, transaction.gracePeriodExpiresDate)
            existing.revokedAt = existing.revokedAt ?? transaction.revokedAt
            existing.revocation = existing.revocation ?? transaction.revocation
            existing.ownershipType = existing.ownershipType ?? transaction.ownershipType
            existing.storefront = existing.storefront ?? transaction.storefront
            existing.originalTransactionID = existing.originalTransactionID ?? transaction.originalTransactionID
            existing.productType = existing.productType ?? transaction.productType
            existing.purchaseDate = existing.purchaseDate ?? transaction.purchaseDate
            existing.isInBillingRetry = existing.isInBillingRetry || transaction.isInBillingRetry
            existing.hasRenewalInfo = existing.hasRenewalInfo || transaction.hasRenewalInfo
            existing.isPaused = existing.isPaused ?? transaction.isPaused
            byID[transaction.transactionID] = existing
        }
        return order.compactMap { byID[$0] }.sorted { lhs, rhs in
            switch (lhs.purchaseDate, rhs.purchaseDate) {
            case (let l?, let r?) where l != r: l < r
            case (nil, _?): false
            case (_?, nil): true
            default: lhs.transactionID < rhs.transactionID
            }
        }
    }
}
