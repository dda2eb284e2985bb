import Foundation

/// Which period of an auto-renewable subscription is its latest: the one whose state is the subscription's, as
/// Apple's status of a subscription is its latest transaction's (Get All Subscription Statuses), never the union of
/// its periods. The ledger's rules, `ledger show` and the entitlement service all order periods by this one rule.
public enum SubscriptionPeriod {
    /// The order of a period: purchased later is later; ties go to the later end (none: it never ends), then to the
    /// larger transaction id. Compare two keys with `<`.
    public static func order(purchased: Date?, ends: Date?, transactionID: String) -> (Date, Date, String) {
        (purchased ?? .distantPast, ends ?? .distantFuture, transactionID)
    }
}
