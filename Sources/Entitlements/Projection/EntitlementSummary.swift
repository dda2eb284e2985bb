import Foundation
import Messages

/// One entitlement of an account at an instant, derived from the account's transactions (never stored, so it can
/// never disagree with them): active while some purchase granting it grants. A purchase is a non-consumable or
/// non-renewing transaction, or an auto-renewable subscription (one original transaction id), which stands as its
/// latest transaction does (Apple's status of the subscription), never as the union of its periods: an earlier
/// period with a later expiry does not outlive a latest period that expired or was refunded.
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
            for entitlement in transaction.entitlements(in: catalog) {
                grouped[entitlement, default: []].append(transaction)
            }
        }
        return grouped.keys.sorted().map { id in
            summary(of: id, from: grouped[id]!, at: instant)
        }
    }

    static func summary(of id: String, from candidates: [ProjectedTransaction], at instant: Date) -> EntitlementSummary
    {
        let heads = purchases(candidates)
        let granting = heads.filter { $0.grants(at: instant) }
        let representative: ProjectedTransaction
        if !granting.isEmpty {
            representative = granting.max { a, b in
                (a.expiresDate ?? .distantFuture, a.purchaseDate ?? .distantPast, a.transactionID)
                    < (b.expiresDate ?? .distantFuture, b.purchaseDate ?? .distantPast, b.transactionID)
            }!
        } else {
            representative = heads.max { a, b in
                (a.expiresDate ?? a.purchaseDate ?? .distantPast, a.transactionID)
                    < (b.expiresDate ?? b.purchaseDate ?? .distantPast, b.transactionID)
            }!
        }
        return EntitlementSummary(
            entitlementID: id, active: !granting.isEmpty, representative: representative,
            updatedAt: candidates.map(\.updatedAt).max()!)
    }

    /// What speaks for each purchase: every transaction that is not an auto-renewable subscription, and the latest
    /// transaction of each subscription (``SubscriptionPeriod``).
    static func purchases(_ transactions: [ProjectedTransaction]) -> [ProjectedTransaction] {
        var latest: [String: ProjectedTransaction] = [:]
        var others: [ProjectedTransaction] = []
        for transaction in transactions {
            guard transaction.productType == .autoRenewable else {
                others.append(transaction)
                continue
            }
            let key = transaction.originalTransactionID
            if let current = latest[key], Self.order(current) > Self.order(transaction) { continue }
            latest[key] = transaction
        }
        return others + latest.values
    }

    private static func order(_ transaction: ProjectedTransaction) -> (Date, Date, String) {
        SubscriptionPeriod.order(
            purchased: transaction.purchaseDate, ends: transaction.expiresDate, transactionID: transaction.transactionID
        )
    }

    /// Whether the entitlement is in its grace period at `instant` (billing retry with time left).
    public func inGracePeriod(at instant: Date) -> Bool {
        active && representative.inGracePeriod && (representative.expiresDate.map { $0 > instant } ?? false)
    }
}
