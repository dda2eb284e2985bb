/// How the App Store refunded or revoked a transaction: the transaction's `revocationType`,
/// `revocationPercentage` and `revocationReason` (App Store Server API 1.19 and Server Notifications 2.20 added the
/// first two). The date of the revocation is the transaction's `revoked_at`, not part of this value.
public struct Revocation: Sendable, Hashable {
    /// Apple's `revocationType`. A value Apple adds later is kept as Apple spelled it.
    public struct Kind: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public init(_ rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The whole purchase was refunded.
        public static let refundFull = Kind("REFUND_FULL")
        /// Part of the purchase was refunded (``Revocation/percentage``): for a subscription, the part of the period
        /// left; the transaction is revoked all the same.
        public static let refundProrated = Kind("REFUND_PRORATED")
        /// A family member's access through Family Sharing ended (the member left, the purchaser stopped sharing).
        public static let familyRevoke = Kind("FAMILY_REVOKE")
    }

    /// The largest `revocationPercentage`: 100 % in milliunits.
    public static let wholePercentage = 100_000

    public var type: Kind?
    /// `revocationPercentage`: the share refunded, in milliunits (25000 is 25 %). Only a value in
    /// `0...100000` is kept: anything else is not Apple's and is dropped, never stored.
    public var percentage: Int?
    /// `revocationReason`: 1 an issue with the app, 0 another reason (for a family member: left the family or the
    /// purchaser stopped sharing).
    public var reason: Int?

    public init(type: Kind? = nil, percentage: Int? = nil, reason: Int? = nil) {
        self.type = type
        self.percentage = percentage.flatMap { (0...Self.wholePercentage).contains($0) ? $0 : nil }
        self.reason = reason
    }

    /// Nothing known.
    public var isEmpty: Bool { type == nil && percentage == nil && reason == nil }

    /// The value, or nil when it says nothing.
    public var nonEmpty: Revocation? { isEmpty ? nil : self }
}

/// Apple's `inAppOwnershipType`: whether the transaction is the purchaser's or a family member's through Family
/// Sharing. Each family member gets transactions of their own (Apple, "Supporting Family Sharing in your app").
public struct OwnershipType: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// The purchaser's own transaction.
    public static let purchased = OwnershipType("PURCHASED")
    /// A family member's transaction, shared by the purchaser.
    public static let familyShared = OwnershipType("FAMILY_SHARED")
}
