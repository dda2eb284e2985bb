import Foundation
import Messages

/// One transaction as the projection keeps it: who owns it now, and its state as of the newest verdict applied.
///
/// There is one row per transaction id, like the worker's ledger: a subscription moved to another account changes
/// its rows' ``accountID``; the old owner keeps the move in its history. An account holds transactions of both stores;
/// each keeps its ``store``, whose catalog list names its product.
public struct ProjectedTransaction: Sendable, Hashable, Codable {
    public var transactionID: String
    /// The subscription it belongs to; its own id when the verdict gave none.
    public var originalTransactionID: String
    /// The owner now.
    public var accountID: String
    public var productID: String
    public var productType: ProductType
    public var environment: String?
    public var purchaseDate: Date?
    /// The end of the entitlement this transaction gives (the grace period included, as the contract says).
    public var expiresDate: Date?
    public var revokedAt: Date?
    /// Units bought (a consumable's quantity; 1 when the verdict gave none).
    public var quantity: Int = 1
    /// Inferred: the expiry of this very transaction moved later, which only a billing retry with a grace period
    /// does (a renewal is a new transaction). Cleared when the subscription renews.
    public var inBillingRetry: Bool = false
    public var inGracePeriod: Bool = false
    /// A Google Play subscription Google states paused (the verdict's `paused`): no access until it resumes.
    /// Cleared when the subscription renews or a verdict states it not paused.
    public var paused: Bool = false
    /// `decided_at` of the verdict that gave it to ``accountID``: a move older than this does not take it back.
    public var ownerSince: Date
    /// `decided_at` of the newest verdict applied to it: an older verdict does not overwrite its state.
    public var decidedAt: Date
    /// The newest verdict applied to it.
    public var verdictID: String
    /// When the projection last wrote it.
    public var updatedAt: Date
    /// The store it was bought in: the `store` of the verdict that first named it.
    public var store: Store = .appStore
    /// Google Play's order id (`order_id`), when the verdict gave one.
    public var orderID: String?
    /// Google Play's purchase token of a subscription (`purchase_token`), when the verdict gave one.
    public var purchaseToken: String?

    /// The entitlements it grants, as its own store's catalog list names its product.
    public func entitlements(in catalog: Catalog) -> [String] {
        catalog.entitlements(of: productID, type: productType, in: store)
    }

    /// Whether it grants its entitlements at `instant`: not revoked, and a subscription not past its expiry (grace
    /// included). Non-consumables never expire; a consumable grants nothing.
    public func grants(at instant: Date) -> Bool {
        guard revokedAt == nil else { return false }
        switch productType {
        case .consumable: return false
        case .nonConsumable: return true
        case .autoRenewable, .nonRenewing:
            // A subscription the verdict gave no expiry for was granted by the worker without one: it stands.
            guard let expiresDate else { return true }
            return expiresDate > instant
        }
    }

    /// Its state in words for the API and the console: `active`, `expired`, `revoked`, `consumed` (consumables), and
    /// for a Google Play subscription whose period ended, as Google defines them (no access, not revoked):
    /// `on_hold` while Google retries the payment (account hold; its grace period before that is `active`), `paused`
    /// while the customer has paused it.
    public func state(at instant: Date) -> String {
        if revokedAt != nil { return "revoked" }
        if productType == .consumable { return "consumed" }
        if grants(at: instant) { return "active" }
        guard store == .googlePlay, productType == .autoRenewable else { return "expired" }
        if paused { return "paused" }
        return inBillingRetry ? "on_hold" : "expired"
    }
}
