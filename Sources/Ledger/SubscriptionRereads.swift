import Decision
import Foundation

/// An App Store subscription whose state the ledger is unsure of (docs/LEDGER.md, "Subscription re-reads"): its
/// latest period ended, it is not revoked, and auto-renew was not turned off, so Apple may be retrying the renewal
/// (billing retry, perhaps with a grace period) or may have renewed it in a notification that never arrived. Or its
/// latest period was refunded recently, and Apple may reverse the refund in a notification that never arrives. Or a
/// notification (a refund, say) named one of its transactions before the ledger had any claim on it, and the claim
/// made since is not revoked: Apple's refund may be lost on it.
public struct UnsureSubscription: Sendable, Hashable {
    public var originalTransactionID: String
    /// As the claims record it (`Production`, `Sandbox`); nil when unknown.
    public var environment: String?
    /// When the reconciler last read its history; nil before the first time.
    public var rereadAt: Date?
    /// Apple's `revision` after the last page read: the next re-read asks only for what came after. Nil for a
    /// refunded subscription: the whole history is read, as a reversal changes a transaction read before.
    public var revision: String?
    /// The app whose subscription it is: its claims' `bundle_id` (nil when they name none). Its history is read with
    /// that app's Server API key.
    public var bundleID: String?
}

extension UnsureSubscription {
    /// Those a notification named first (a lost refund matters more than a lapsed period), each subscription once.
    static func merged(_ named: [Self], _ lapsed: [Self], limit: Int) -> [Self] {
        var seen = Set<String>()
        return Array((named + lapsed).filter { seen.insert($0.originalTransactionID).inserted }.prefix(max(limit, 0)))
    }
}

/// What the reconciler's history re-read needs from the ledger (table `subscription_rereads`, migration 6); every
/// ``Ledger`` has it.
public protocol SubscriptionRereadStore: Sendable {
    /// Up to `limit` unsure App Store subscriptions of the app `bundleID` (nil: of every app), never a Google Play
    /// one (a claim the granting verdict says is `google_play`): first those a notification named while unclaimed
    /// (verdict `unclaimed` decided after `lapsedSince`), not re-read since that notification, with a nil `revision`
    /// (the whole history is read again: the refunded transaction may be an old one); then, not re-read after
    /// `rereadBefore`, never re-read first, then the longest ago: those whose latest period ended in
    /// `(lapsedSince, now]`, and those whose latest claim was revoked in `(lapsedSince, now]` and whose period ends
    /// within the same span either side of `now` (a refund Apple may reverse; a nil `revision`).
    func unsureSubscriptions(
        bundleID: String?, now: Date, lapsedSince: Date, rereadBefore: Date, limit: Int
    ) async throws -> [UnsureSubscription]

    /// Records a re-read at `at`; a nil `revision` keeps the one stored.
    func recordSubscriptionReread(originalTransactionID: String, revision: String?, at: Date) async throws

    /// Every claim of one subscription.
    func subscriptionClaims(originalTransactionID: String) async throws -> [TransactionClaim]
}

/// A Google Play subscription whose state may change soon (docs/LEDGER.md, "Subscription re-reads"): its latest
/// claim is not revoked, auto-renew was not turned off, and its expiry or its grace period's end falls in the window
/// the reconciler asked about. Google tells of a renewal, a grace period, an account hold or a pause by a real-time
/// notification; one that never arrives leaves the ledger holding an expiry Google has moved, so the reconciler
/// publishes a re-read of the token shortly before the ledger's state would change.
public struct UnsurePlaySubscription: Sendable, Hashable {
    public var purchaseToken: String
    /// The claim's `bundle_id`: the app's package name.
    public var packageName: String
    public var expiresDate: Date?
    public var gracePeriodExpiresDate: Date?
    /// When the reconciler last published a re-read of it; nil before the first time.
    public var rereadAt: Date?
}

extension SubscriptionRereadStore {
    /// The unsure subscriptions of every App Store app (one app in the catalog).
    public func unsureSubscriptions(
        now: Date, lapsedSince: Date, rereadBefore: Date, limit: Int
    ) async throws -> [UnsureSubscription] {
        try await unsureSubscriptions(
            bundleID: nil, now: now, lapsedSince: lapsedSince, rereadBefore: rereadBefore, limit: limit)
    }
}

/// What the reconciler's Play re-reads need from the ledger: the claims' Play subscriptions (a claim whose
/// `original_transaction_id` is a purchase token, whose `bundle_id` is one of the catalog's Play packages and whose
/// granting verdict is Google Play's, so an App Store app of the same name is not read from Google), and the
/// record of re-reads, table `subscription_rereads` keyed by the token. Every ``Ledger`` has it.
public protocol PlaySubscriptionRereadStore: Sendable {
    /// Up to `limit` Play subscriptions of `packages` whose latest claim is an `auto_renewable` one, not revoked,
    /// auto-renew not off, with its expiry or grace end in `(from, to]`, not re-read after `rereadBefore`; never
    /// re-read first, then the soonest to change.
    func unsurePlaySubscriptions(
        packages: [String], from: Date, to: Date, rereadBefore: Date, limit: Int
    ) async throws -> [UnsurePlaySubscription]
}

extension LedgerSchema {
    /// The condition, in both backends' SQL, that claim `c` is its subscription's latest: no sibling purchased later,
    /// or as late and ending later. That claim's dates and state are the subscription's, so both re-read lists judge
    /// it alone.
    static let isLatestClaim = """
        NOT EXISTS (
            SELECT 1 FROM transaction_claims n
            WHERE n.original_transaction_id = c.original_transaction_id
                AND (n.purchase_date > c.purchase_date
                    OR n.purchase_date = c.purchase_date AND n.expires_date > c.expires_date))
        """
}
