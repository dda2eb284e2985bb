import Foundation
import Messages

/// One change to the ledger that a decision asks for. Applied all together with the job's verdict, or not at all.
public enum LedgerWrite: Sendable, Hashable {
    /// Insert the claim if the transaction is unclaimed. Finding it claimed means the decision lost a race.
    case claim(TransactionClaim)
    /// Record a refund or revocation (keeps the first `revokedAt` if one is already stored), with how Apple revoked
    /// it when it said (recorded with the first `revokedAt`; added to a revoked claim that has none).
    case revoke(transactionID: String, revokedAt: Date, revocation: Revocation? = nil)
    /// Move every claim of an expired subscription from one account to another. Expects exactly
    /// `transactionIDs` to be owned by `from`; anything else means the decision lost a race.
    case moveSubscription(originalTransactionID: String, from: String, to: String, transactionIDs: [String])
    /// Record a later expiry or a grace period (never moves a date backwards).
    case extendSubscription(transactionID: String, expiresDate: Date?, gracePeriodExpiresDate: Date?)
    /// Undo a refund (`REFUND_REVERSED`): clear `revokedAt`.
    case reinstate(transactionID: String)
    /// Record a notification applied to a subscription: its `signedDate` on every claim of the subscription (never
    /// backwards), and auto-renew when it states it. Finding a newer `signedDate` already stored means the decision
    /// lost a race (a newer notification was applied meanwhile).
    /// `familyShared`: the notification is about a family member's claims, recorded on those alone (the purchaser's
    /// claims, even under one original transaction id, are another subscription).
    case recordNotification(
        originalTransactionID: String, signedAt: Date?, autoRenew: Bool?, familyShared: Bool = false)
    /// End a replaced subscription's access at `at` (Google Play's upgrade or downgrade, `linkedPurchaseToken`): every
    /// claim of it whose expiry or grace period ends later is cut to `at`. The one write that moves a date earlier.
    case endSubscription(originalTransactionID: String, at: Date)
    /// Remember who sent a Google Play purchase that is pending (the first sender stays).
    case recordPendingPurchase(PendingPlayPurchase)
    /// Record a Google Play refund review for its answer (a review recorded before stays as it was).
    case recordRefundReview(PlayRefundReview)
}

/// The result of the decision rules for one job: the verdict, and what to write for it.
public struct LedgerDecision: Sendable, Hashable {
    public var verdict: Verdict
    public var writes: [LedgerWrite]
    /// True when the verdict is the one recorded for this job before (a redelivery): nothing to write or record.
    public var isRecorded: Bool

    public init(verdict: Verdict, writes: [LedgerWrite] = [], isRecorded: Bool = false) {
        self.verdict = verdict
        self.writes = writes
        self.isRecorded = isRecorded
    }
}

/// What applying a decision did.
public enum ApplyResult: Sendable, Hashable {
    /// The writes and the verdict were committed together.
    case applied(Verdict)
    /// Another delivery of the same job recorded its verdict first: publish that one (nothing was written).
    case alreadyDecided(Verdict)
    /// A claim or a move found the ledger changed since the snapshot: nothing was written; read the ledger
    /// again and decide again.
    case raceLost
}
