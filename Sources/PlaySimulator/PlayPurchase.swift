import Foundation
import Messages

/// One purchase the simulator minted: Google's database row for a purchase token. The states Google reports are
/// derived from it and the clock (``PlayPurchaseState``), so a purchase left unacknowledged is refunded when three
/// days have passed on the simulator's clock, without a timer.
public struct PlayPurchase: Sendable {
    public var purchaseToken: String
    public var packageName: String
    public var productId: String
    /// Consumable, non-consumable or auto-renewable (Google Play has no non-renewing type).
    public var type: ProductType
    /// The order id of the first order (`GPA.1234-5678-9012-34567`); nil while the purchase is pending, since Google
    /// creates the order when the payment completes.
    public var orderId: String?
    /// How many times the subscription renewed: renewal n (from 0) has the order id `<orderId>..n`.
    public var renewals: Int = 0
    /// When the user bought (or started the pending purchase).
    public var purchaseTime: Date
    /// When the payment completed: the purchase time, or when a pending purchase completed; nil while pending.
    public var completedAt: Date?
    /// When a pending purchase was cancelled (the payment never came).
    public var pendingCancelledAt: Date?
    public var quantity: Int = 1
    /// A license tester's purchase (Google's test instrument).
    public var isTest: Bool = false
    public var obfuscatedAccountId: String?
    public var obfuscatedProfileId: String?
    public var regionCode: String = "US"
    public var acknowledgedAt: Date?
    public var consumedAt: Date?
    public var developerPayload: String?
    // Subscriptions.
    public var basePlanId: String?
    /// The length of one period.
    public var periodSeconds: TimeInterval = 30 * 86_400
    /// The end of the current period.
    public var expiryTime: Date?
    public var autoRenewEnabled: Bool = true
    /// When the user turned auto-renew off.
    public var userCanceledAt: Date?
    /// The subscription this one replaced (upgrade, downgrade, resubscription).
    public var linkedPurchaseToken: String?
    /// The subscription that replaced this one, and when.
    public var replacedByToken: String?
    public var replacedAt: Date?
    // What happened after the purchase (docs/PLAY-SIMULATOR.md, "The life of a purchase").
    /// A subscription whose renewal payment failed: access continues until this date (Google's grace period), then
    /// the subscription reads as on hold from it.
    public var gracePeriodEnd: Date?
    /// A subscription on account hold since this date: no access until it recovers.
    public var onHoldSince: Date?
    /// A paused subscription: paused since `pausedAt`, resuming by itself at `autoResumeTime`.
    public var pausedAt: Date?
    public var autoResumeTime: Date?
    /// When access was taken away at once (revoke, or a refund or chargeback of a subscription).
    public var revokedAt: Date?
    /// Revoked by the developer (`developerInitiatedCancellation`) rather than by Google (a refund, a chargeback).
    public var revokedByDeveloper = false
    /// When the whole purchase was voided (refund, revoke with refund, chargeback); nil if it was not.
    public var voidedAt: Date?
    /// Units of a one-time purchase refunded by quantity-based partial refunds (a full refund voids all).
    public var refundedQuantity = 0
    // Calls, for the truth.
    public var reads = 0
    public var acknowledgeCalls = 0
    public var consumeCalls = 0

    /// A subscription (Google's auto-renewing plan).
    public var isSubscription: Bool { type == .autoRenewable }

    /// The order id of the latest successful order: the first order, or the latest renewal's (`..n`).
    public var latestOrderId: String? {
        guard let orderId else { return nil }
        return renewals == 0 ? orderId : "\(orderId)..\(renewals - 1)"
    }

    /// Google refunds and revokes a completed purchase nobody acknowledged within three days of its completion.
    public static let acknowledgementWindow: TimeInterval = 3 * 86_400

    /// When Google refunded it for want of an acknowledgement, as of `now`; nil if it has not (yet).
    public func refundedAt(now: Date) -> Date? {
        guard let completedAt, acknowledgedAt == nil else { return nil }
        let deadline = completedAt.addingTimeInterval(Self.acknowledgementWindow)
        return now >= deadline ? deadline : nil
    }

    /// Google's state of this purchase as of `now`.
    public func state(now: Date) -> PlayPurchaseState {
        if pendingCancelledAt != nil { return .pendingCanceled }
        if completedAt == nil { return .pending }
        if voidedAt != nil, !isSubscription { return .refunded }
        if refundedAt(now: now) != nil { return .refunded }
        guard isSubscription else { return .purchased }
        if replacedByToken != nil { return .replaced }
        if revokedAt != nil { return .revoked }
        if pausedAt != nil { return .paused }
        if onHoldSince != nil { return .onHold }
        if let gracePeriodEnd { return now < gracePeriodEnd ? .inGracePeriod : .onHold }
        if let expiryTime, now >= expiryTime { return .expired }
        return userCanceledAt != nil ? .canceled : .active
    }

    /// Whether the buyer has what they paid for as of `now` (Google grants access in the grace period, not on hold
    /// or paused).
    public func isEntitled(now: Date) -> Bool {
        switch state(now: now) {
        case .purchased, .active, .canceled, .inGracePeriod: return true
        default: return false
        }
    }
}

/// The simulator's summary of a purchase's state; the API answers spell it in Google's words.
public enum PlayPurchaseState: String, Sendable {
    /// Waiting for payment.
    case pending
    /// A pending purchase whose payment never came.
    case pendingCanceled = "pending_canceled"
    /// A one-time product that was paid for (and not refunded).
    case purchased
    /// Refunded and revoked by Google: nobody acknowledged it within three days.
    case refunded
    /// A subscription within its period, renewing.
    case active
    /// A subscription within its period whose user turned auto-renew off.
    case canceled
    /// A subscription past its period.
    case expired
    /// A subscription replaced by another (upgrade, downgrade).
    case replaced
    /// A subscription whose renewal payment failed, still giving access (`SUBSCRIPTION_STATE_IN_GRACE_PERIOD`).
    case inGracePeriod = "in_grace_period"
    /// A subscription on account hold: the payment still failed after the grace period; no access.
    case onHold = "on_hold"
    /// A subscription the user paused; no access until it resumes.
    case paused
    /// A subscription whose access was taken away at once (revoked, refunded, charged back).
    case revoked
}
