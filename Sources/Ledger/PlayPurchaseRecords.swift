import Decision
import Foundation

/// What the ledger remembers of Google Play purchases beside their claims (schema version 7; docs/LEDGER.md, "Google
/// Play notifications"): who sent a purchase that was pending, and the refund reviews Google asks an answer to. Both
/// are written by decisions (``LedgerWrite/recordPendingPurchase(_:)``, ``LedgerWrite/recordRefundReview(_:)``) with
/// the job's verdict; read here. Every ``Ledger`` has it.
public protocol PlayPurchaseRecordStore: Sendable {
    /// The pending purchase recorded for `purchaseToken`, if a verification job found it pending.
    func pendingPlayPurchase(purchaseToken: String) async throws -> PendingPlayPurchase?

    /// The refund review `pendingRefundToken` names, if recorded.
    func playRefundReview(pendingRefundToken: String) async throws -> PlayRefundReview?

    /// Up to `limit` refund reviews whose deadline is after `deadlineAfter`, the soonest deadline first.
    func playRefundReviews(deadlineAfter: Date, limit: Int) async throws -> [PlayRefundReview]
}
