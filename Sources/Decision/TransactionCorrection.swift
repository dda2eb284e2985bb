import Foundation

/// What a store's authenticated statement of one transaction changes in the ledger's claim on it, under the rules:
/// a claim on a transaction the ledger lacks (unless the store revoked it), a revocation the ledger lacks, a later
/// expiry or grace period. Never an earlier date. A refund reversed (the claim revoked, the store states no
/// revocation) is written only for the reconciler's reversal correction (``Messages/CorrectionJob``), as a
/// `REFUND_REVERSED` would write it, never from a transaction's state alone in any other job. ``DecisionRules`` writes
/// this for a subscription's own account; the reconciler publishes a correction job exactly when it is not empty.
public struct TransactionCorrection: Sendable, Hashable {
    /// The transaction is unclaimed and not revoked: claim it.
    public var claimsTransaction: Bool
    /// The store revoked the transaction and the claim is not revoked.
    public var revokedAt: Date?
    /// The store states a later expiry than the claim's.
    public var laterExpiry: Date?
    /// The store states a later end of the grace period than the claim's.
    public var laterGracePeriodExpiry: Date?
    /// The claim is revoked and the store states no revocation: the refund was reversed. The claim's `revokedAt`.
    public var reversedRevocation: Date?

    /// The correction `transaction` (as the store states it) makes to `claim` (nil when the ledger has none).
    public init(stated transaction: PurchaseTransaction, claim: TransactionClaim?) {
        guard let claim else {
            claimsTransaction = transaction.revokedAt == nil
            return
        }
        claimsTransaction = false
        revokedAt = claim.revokedAt == nil ? transaction.revokedAt : nil
        laterExpiry = Self.later(transaction.expiresDate, than: claim.expiresDate)
        laterGracePeriodExpiry = Self.later(transaction.gracePeriodExpiresDate, than: claim.gracePeriodExpiresDate)
        reversedRevocation = transaction.revokedAt == nil ? claim.revokedAt : nil
    }

    /// True when the statement changes nothing the ledger holds.
    public var isEmpty: Bool {
        !claimsTransaction && revokedAt == nil && laterExpiry == nil && laterGracePeriodExpiry == nil
            && reversedRevocation == nil
    }

    /// `candidate` when it is later than `stored` (or `stored` is unknown), else nil.
    static func later(_ candidate: Date?, than stored: Date?) -> Date? {
        guard let candidate else { return nil }
        guard let stored else { return candidate }
        return candidate > stored ? candidate : nil
    }
}
