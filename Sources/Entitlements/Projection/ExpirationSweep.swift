import Foundation
import Messages

/// Expirations that no verdict reports: a subscription whose period simply ends produces no verdict, so the clock
/// has to notice. One pure function over an account's transactions; the event has the same id as the one a verdict
/// saying the same expiry would make (``LifecycleEvent`` names an expiration by its expiry), so whoever notices first
/// publishes it and the other finds it stored.
public enum ExpirationSweep {
    /// The expirations of `transactions` (one account's) whose expiry falls in `window`: entitlements active just
    /// before the expiry of the transaction that spoke for them, and inactive at `window.upperBound`.
    public static func events(
        account: String, transactions: [ProjectedTransaction], catalog: Catalog,
        window: ClosedRange<Date>
    ) -> [LifecycleEvent] {
        let now = EntitlementSummary.summarize(transactions, catalog: catalog, at: window.upperBound)
        var events: [LifecycleEvent] = []
        for summary in now where !summary.active {
            let last = summary.representative
            guard last.revokedAt == nil, let expiry = last.expiresDate, expiry > window.lowerBound,
                expiry <= window.upperBound
            else { continue }
            let before = EntitlementSummary.summarize(
                transactions, catalog: catalog, at: expiry.addingTimeInterval(-0.001)
            ).first { $0.entitlementID == summary.entitlementID }
            guard before?.active == true else { continue }
            events.append(
                LifecycleEvent(
                    kind: .expiration, accountID: account, entitlementID: summary.entitlementID, active: false,
                    transaction: last, occurredAt: expiry, verdictID: nil))
        }
        return events
    }
}
