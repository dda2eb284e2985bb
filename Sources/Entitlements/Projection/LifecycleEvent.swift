import Foundation
import Messages

/// One change of an account's entitlement, published once to `entitlement-events` (key = account id) and to the
/// webhooks. Its id is deterministic: the same verdict projected again yields the same events with the same ids.
public struct LifecycleEvent: Sendable, Hashable, Codable {
    /// The schema tag of this version of the message.
    public static let schema = "entitlement-event/v1"

    /// What changed.
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
        case initialPurchase = "initial_purchase"
        case renewal
        case expiration
        case billingIssue = "billing_issue"
        case gracePeriodEntered = "grace_period_entered"
        case refund
        case refundReversed = "refund_reversed"
        /// A subscription moved between accounts; published to both (``fromAccountID``, ``toAccountID``).
        case transfer
        case productChange = "product_change"
        /// Apple extended the renewal date (RENEWAL_EXTENDED): the same transaction lasts longer, no billing trouble.
        case renewalExtended = "renewal_extended"
    }

    public var eventID: String
    public var kind: Kind
    public var accountID: String
    public var entitlementID: String
    /// Whether the entitlement is active right after the change.
    public var active: Bool
    public var productID: String
    public var transactionID: String
    public var originalTransactionID: String
    /// The store of ``transactionID`` (`store`); read as `app_store` from events stored before the field.
    public var store: Store
    public var expiresAt: Date?
    /// When the change happened: the `decided_at` of the verdict that made it (or the expiry, for an expiration
    /// seen by the clock).
    public var occurredAt: Date
    /// The verdict that made it; nil for an expiration seen by the clock.
    public var verdictID: String?
    public var fromAccountID: String?
    public var toAccountID: String?
    /// A refund's detail as Apple gave it (`revocation_type`, `revocation_percentage`, `revocation_reason`): a full
    /// or prorated refund, or a family member's access revoked; nil for other events and when Apple did not say.
    public var revocation: Revocation?

    public init(
        kind: Kind, accountID: String, entitlementID: String, active: Bool, transaction: ProjectedTransaction,
        occurredAt: Date, verdictID: String?, fromAccountID: String? = nil, toAccountID: String? = nil,
        revocation: Revocation? = nil
    ) {
        self.revocation = revocation?.nonEmpty
        self.kind = kind
        self.accountID = accountID
        self.entitlementID = entitlementID
        self.active = active
        self.productID = transaction.productID
        self.transactionID = transaction.transactionID
        self.originalTransactionID = transaction.originalTransactionID
        self.store = transaction.store
        self.expiresAt = transaction.expiresDate
        self.occurredAt = occurredAt
        self.verdictID = verdictID
        self.fromAccountID = fromAccountID
        self.toAccountID = toAccountID
        // An expiration is one per period whoever notices it (a verdict or the clock): named by the expiry, not by
        // the verdict. Every other change is named by the verdict that made it.
        let cause =
            kind == .expiration
            ? "expires:" + (transaction.expiresDate.map { String(Int64($0.timeIntervalSince1970 * 1000)) } ?? "none")
            : "verdict:" + (verdictID ?? "none")
        self.eventID = Self.eventID(
            [accountID, entitlementID, kind.rawValue, transaction.transactionID, cause].joined(separator: "\n"))
    }

    enum CodingKeys: String, CodingKey {
        case schema
        case eventID = "event_id"
        case kind = "type"
        case accountID = "account_id"
        case entitlementID = "entitlement_id"
        case active
        case productID = "product_id"
        case transactionID = "transaction_id"
        case originalTransactionID = "original_transaction_id"
        case store
        case expiresAt = "expires_at"
        case occurredAt = "occurred_at"
        case verdictID = "verdict_id"
        case fromAccountID = "from_account_id"
        case toAccountID = "to_account_id"
        case revocationType = "revocation_type"
        case revocationPercentage = "revocation_percentage"
        case revocationReason = "revocation_reason"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        eventID = try c.decode(String.self, forKey: .eventID)
        kind = try c.decode(Kind.self, forKey: .kind)
        accountID = try c.decode(String.self, forKey: .accountID)
        entitlementID = try c.decode(String.self, forKey: .entitlementID)
        active = try c.decode(Bool.self, forKey: .active)
        productID = try c.decode(String.self, forKey: .productID)
        transactionID = try c.decode(String.self, forKey: .transactionID)
        originalTransactionID = try c.decode(String.self, forKey: .originalTransactionID)
        store = try c.decodeIfPresent(Store.self, forKey: .store) ?? .appStore
        expiresAt = try c.decodeIfPresent(Date.self, forKey: .expiresAt)
        occurredAt = try c.decode(Date.self, forKey: .occurredAt)
        verdictID = try c.decodeIfPresent(String.self, forKey: .verdictID)
        fromAccountID = try c.decodeIfPresent(String.self, forKey: .fromAccountID)
        toAccountID = try c.decodeIfPresent(String.self, forKey: .toAccountID)
        revocation =
            Revocation(
                type: try c.decodeIfPresent(String.self, forKey: .revocationType).map { Revocation.Kind($0) },
                percentage: try c.decodeIfPresent(Int.self, forKey: .revocationPercentage),
                reason: try c.decodeIfPresent(Int.self, forKey: .revocationReason)
            ).nonEmpty
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(Self.schema, forKey: .schema)
        try c.encode(eventID, forKey: .eventID)
        try c.encode(kind, forKey: .kind)
        try c.encode(accountID, forKey: .accountID)
        try c.encode(entitlementID, forKey: .entitlementID)
        try c.encode(active, forKey: .active)
        try c.encode(productID, forKey: .productID)
        try c.encode(transactionID, forKey: .transactionID)
        try c.encode(originalTransactionID, forKey: .originalTransactionID)
        try c.encode(store, forKey: .store)
        try c.encode(expiresAt, forKey: .expiresAt)
        try c.encode(occurredAt, forKey: .occurredAt)
        try c.encode(verdictID, forKey: .verdictID)
        try c.encodeIfPresent(fromAccountID, forKey: .fromAccountID)
        try c.encodeIfPresent(toAccountID, forKey: .toAccountID)
        try c.encodeIfPresent(revocation?.type?.rawValue, forKey: .revocationType)
        try c.encodeIfPresent(revocation?.percentage, forKey: .revocationPercentage)
        try c.encodeIfPresent(revocation?.reason, forKey: .revocationReason)
    }

    /// The namespace of event ids: the version 5 UUID of "entitlement-event" in RFC 9562's URL namespace.
    static let namespace = NameBasedUUID.bytes(namespace: NameBasedUUID.urlNamespace, name: "entitlement-event")

    static func eventID(_ name: String) -> String { NameBasedUUID.v5(namespace: namespace, name: name) }
}
