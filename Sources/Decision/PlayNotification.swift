import Foundation

/// What a Google Play notification job establishes for the rules (docs/LEDGER.md, "Google Play notifications"): why
/// Google told us, and when the purchase was read again. A Real-time developer notification carries no state: the
/// worker reads the purchase from the Developer API, and that answer (the evidence's transactions) is the truth the
/// rules apply; the kind only says what else to record (a revocation, a voided order, a refund review).
public struct PlayNotification: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// The purchase's state as read is applied (renewed, recovered, restarted, purchased, in grace, on hold,
        /// paused, cancelled, expired, deferred, price changes, a pending purchase cancelled, a reconciler's re-read,
        /// and a type Google adds later): new orders are claimed for the owner, dates recorded (later only).
        case restates
        /// `SUBSCRIPTION_REVOKED`: access ends now, every claim of the token is revoked.
        case revoked
        /// `SUBSCRIPTION_ITEMS_CHANGED` (upgrade, downgrade): as ``restates``, and the replaced token's access ends.
        case itemsChanged = "items_changed"
        /// `voidedPurchaseNotification`: the voided order's claim is revoked.
        case voided
        /// `pendingRefundReviewNotification`: the review is recorded for the answer to Google; the purchase restated.
        case refundReview = "refund_review"
        /// `testNotification`: nothing to read or write; the verdict is recorded.
        case test
    }

    public var kind: Kind
    /// Google's name of the type (`SUBSCRIPTION_RENEWED`, `ONE_TIME_PRODUCT_CANCELED`, `voidedPurchaseNotification`,
    /// a later type's name), for logs; nil for a reconciler's plain re-read.
    public var googleType: String?
    /// The token the notification is about (nil for a test notification).
    public var purchaseToken: String?
    /// The notification's `eventTimeMillis`, when it has one.
    public var eventTime: Date?
    /// When the worker read the purchase from Google. Every job about a token re-reads it, so the read's time orders
    /// what is applied: a read older than one already applied to the token is answered from the ledger.
    public var readAt: Date?
    /// Auto-renew as the notification's type states it (`SUBSCRIPTION_CANCELED`: off; `SUBSCRIPTION_RESTARTED`: on).
    public var autoRenew: Bool?
    /// The order a voided purchase notification names.
    public var voidedOrderID: String?
    /// A pending refund review to record.
    public var refundReview: PlayRefundReview?

    public init(
        kind: Kind, googleType: String? = nil, purchaseToken: String? = nil, eventTime: Date? = nil,
        readAt: Date? = nil, autoRenew: Bool? = nil, voidedOrderID: String? = nil,
        refundReview: PlayRefundReview? = nil
    ) {
        self.kind = kind
        self.googleType = googleType
        self.purchaseToken = purchaseToken
        self.eventTime = eventTime
        self.readAt = readAt
        self.autoRenew = autoRenew
        self.voidedOrderID = voidedOrderID
        self.refundReview = refundReview
    }
}

/// A Google Play purchase a verification job found pending (awaiting payment): who sent it, so that the notification
/// of its completion grants it to that account (table `play_pending_purchases`).
public struct PendingPlayPurchase: Sendable, Hashable {
    public var purchaseToken: String
    public var accountID: String
    public var jobID: String
    public var packageName: String
    public var productID: String
    public var recordedAt: Date

    public init(
        purchaseToken: String, accountID: String, jobID: String, packageName: String, productID: String,
        recordedAt: Date
    ) {
        self.purchaseToken = purchaseToken
        self.accountID = accountID
        self.jobID = jobID
        self.packageName = packageName
        self.productID = productID
        self.recordedAt = recordedAt
    }
}

/// A chargeback review Google asks the developer's opinion on (`pendingRefundReviewNotification`), to be answered
/// once with `orders.reviewrefund` before its deadline (table `play_refund_reviews`).
public struct PlayRefundReview: Sendable, Hashable {
    /// Google's token of the review: the answer names it; one row per review.
    public var pendingRefundToken: String
    public var purchaseToken: String
    public var orderID: String
    public var packageName: String
    /// The notification's event time.
    public var eventAt: Date
    /// `eventAt` + 24 h: Google's limit for the answer.
    public var deadline: Date
    /// The notification job that recorded it.
    public var jobID: String

    public init(
        pendingRefundToken: String, purchaseToken: String, orderID: String, packageName: String, eventAt: Date,
        deadline: Date? = nil, jobID: String
    ) {
        self.pendingRefundToken = pendingRefundToken
        self.purchaseToken = purchaseToken
        self.orderID = orderID
        self.packageName = packageName
        self.eventAt = eventAt
        self.deadline = deadline ?? eventAt.addingTimeInterval(Self.answerWindow)
        self.jobID = jobID
    }

    /// Google's window for the answer to a review: 24 hours from the notification's event.
    public static let answerWindow: TimeInterval = 24 * 3600
}
