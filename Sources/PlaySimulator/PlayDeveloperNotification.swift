import Foundation
import Messages

/// `subscriptionNotification.notificationType`, Google's numbers (the gaps are numbers Google retired or never used).
public enum PlaySubscriptionNotificationType: Int, Sendable, CaseIterable {
    case recovered = 1
    case renewed = 2
    case canceled = 3
    case purchased = 4
    case onHold = 5
    case inGracePeriod = 6
    case restarted = 7
    case priceChangeConfirmed = 8
    case deferred = 9
    case paused = 10
    case pauseScheduleChanged = 11
    case revoked = 12
    case expired = 13
    case itemsChanged = 17
    case cancellationScheduled = 18
    case priceChangeUpdated = 19
    case pendingPurchaseCanceled = 20
    case priceStepUpConsentUpdated = 22

    /// Google's name, `SUBSCRIPTION_…`.
    public var name: String {
        switch self {
        case .recovered: "SUBSCRIPTION_RECOVERED"
        case .renewed: "SUBSCRIPTION_RENEWED"
        case .canceled: "SUBSCRIPTION_CANCELED"
        case .purchased: "SUBSCRIPTION_PURCHASED"
        case .onHold: "SUBSCRIPTION_ON_HOLD"
        case .inGracePeriod: "SUBSCRIPTION_IN_GRACE_PERIOD"
        case .restarted: "SUBSCRIPTION_RESTARTED"
        case .priceChangeConfirmed: "SUBSCRIPTION_PRICE_CHANGE_CONFIRMED"
        case .deferred: "SUBSCRIPTION_DEFERRED"
        case .paused: "SUBSCRIPTION_PAUSED"
        case .pauseScheduleChanged: "SUBSCRIPTION_PAUSE_SCHEDULE_CHANGED"
        case .revoked: "SUBSCRIPTION_REVOKED"
        case .expired: "SUBSCRIPTION_EXPIRED"
        case .itemsChanged: "SUBSCRIPTION_ITEMS_CHANGED"
        case .cancellationScheduled: "SUBSCRIPTION_CANCELLATION_SCHEDULED"
        case .priceChangeUpdated: "SUBSCRIPTION_PRICE_CHANGE_UPDATED"
        case .pendingPurchaseCanceled: "SUBSCRIPTION_PENDING_PURCHASE_CANCELED"
        case .priceStepUpConsentUpdated: "SUBSCRIPTION_PRICE_STEP_UP_CONSENT_UPDATED"
        }
    }
}

/// `oneTimeProductNotification.notificationType`.
public enum PlayOneTimeNotificationType: Int, Sendable, CaseIterable {
    case purchased = 1
    case canceled = 2

    public var name: String { self == .purchased ? "ONE_TIME_PRODUCT_PURCHASED" : "ONE_TIME_PRODUCT_CANCELED" }
}

/// A Real-time developer notification: the DeveloperNotification Google publishes to the app's Pub/Sub topic. It
/// carries no state (the backend reads the purchase again), only what happened and to which token.
public struct PlayDeveloperNotification: Sendable {
    public enum Content: Sendable {
        case subscription(PlaySubscriptionNotificationType, purchaseToken: String)
        case oneTimeProduct(PlayOneTimeNotificationType, purchaseToken: String, sku: String)
        /// `productType` 1 subscription, 2 one-time; `refundType` 1 full, 2 quantity-based partial.
        case voidedPurchase(purchaseToken: String, orderId: String, productType: Int, refundType: Int)
        /// A chargeback Google asks the developer's opinion on, answered with `orders.reviewrefund`.
        case pendingRefundReview(
            purchaseToken: String, orderId: String, pendingRefundToken: String, productType: Int, deadline: Date)
        case test
    }

    public var packageName: String
    public var eventTime: Date
    public var content: Content

    /// The notification's kind as `/sim/pushes` names it: Google's type name, or the object's name.
    public var kind: String {
        switch content {
        case .subscription(let type, _): type.name
        case .oneTimeProduct(let type, _, _): type.name
        case .voidedPurchase: "VOIDED_PURCHASE"
        case .pendingRefundReview: "PENDING_REFUND_REVIEW"
        case .test: "TEST_NOTIFICATION"
        }
    }

    public var purchaseToken: String? {
        switch content {
        case .subscription(_, let token), .oneTimeProduct(_, let token, _): token
        case .voidedPurchase(let token, _, _, _), .pendingRefundReview(let token, _, _, _, _): token
        case .test: nil
        }
    }

    /// The JSON Google base64-encodes into the Pub/Sub message's `data`.
    func json() -> [String: Any] {
        var object: [String: Any] = [
            "version": "1.0", "packageName": packageName, "eventTimeMillis": String(eventTime.epochMilliseconds),
        ]
        switch content {
        case .subscription(let type, let token):
            object["subscriptionNotification"] = [
                "version": "1.0", "notificationType": type.rawValue, "purchaseToken": token,
            ]
        case .oneTimeProduct(let type, let token, let sku):
            object["oneTimeProductNotification"] = [
                "version": "1.0", "notificationType": type.rawValue, "purchaseToken": token, "sku": sku,
            ]
        case .voidedPurchase(let token, let orderId, let productType, let refundType):
            object["voidedPurchaseNotification"] = [
                "purchaseToken": token, "orderId": orderId, "productType": productType, "refundType": refundType,
            ]
        case .pendingRefundReview(let token, let orderId, let refundToken, let productType, let deadline):
            object["pendingRefundReviewNotification"] = [
                "purchaseToken": token, "orderId": orderId, "pendingRefundToken": refundToken,
                "productType": productType, "reviewDeadlineTimeMillis": String(deadline.epochMilliseconds),
            ]
        case .test:
            object["testNotification"] = ["version": "1.0"]
        }
        return object
    }
}
