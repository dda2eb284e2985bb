import Foundation
import Messages

/// One entitlement of an account at an instant, derived from the account's transactions (never stored, so it can
/// never disagree with them): active while some transaction granting it is granted, not revoked and not expired.
public struct EntitlementSummary: Sendable, Hashable {
    public var entitlementID: String
    public var active: Bool
    /// The transaction that speaks for the entitlement: the active one lasting longest, else the newest.
    public var representative: ProjectedTransaction
    /// The newest write among the transactions granting it.
    public var updatedAt: Date

    /// Every entitlement the transactions grant or granted, in id order.
    public static func summarize(
        _ transactions: some Sequence<ProjectedTransaction>, catalog: Catalog, at instant: Date
    ) -> [EntitlementSummary] {
        var grouped: [String: [ProjectedTransaction]] = [:]
        for transaction in transactions where transaction.productType != .consumable {
            for entitlement in catalog.entitlements(of: transaction.productID, type: transaction.productType) {
                grouped[entitlement, default: []].append(transaction)
            }
        }
        return grouped.keys.sorted().map { id in
            summary(of: id, from: grouped[id]!, at: instant)
        }
    }

    static func summary(of id: String, from candidates: [ProjectedTransaction], at instant: Date) -> EntitlementSummary
    {
        let granting = candidates.filter { $0.grants(at: instant) }
        let representative: ProjectedTransaction
        if !granting.isEmpty {
            representative = granting.max { a, b in
                (a.expiresDate ?? .distantFuture, a.purchaseDate ?? .distantPast, a.transactionID)
                    < (b.expiresDate ?? .distantFuture, b.purchaseDate ?? .distantPast, b.transactionID)
            }!
        } else {
            representative = candidates.max { a, b in
                (a.expiresDate ?? a.purchaseDate ?? .distantPast, a.transactionID)
                    < (b.expiresDate ?? b.purchaseDate ?? .distantPast, b.transactionID)
            }!
        }
        return EntitlementSummary(
            entitlementID: id, active: !granting.isEmpty, representative: representative,
            updatedAt: candidates.map(\.updatedAt).max()!)
    }

    /// Whether the entitlement is in its grace period at `instant` (billing retry with time left).
    public func inGracePeriod(at instant: Date) -> Bool {
        active && representative.inGracePeriod && (representative.expiresDate.map { $0 > instant } ?? false)
    }
}
