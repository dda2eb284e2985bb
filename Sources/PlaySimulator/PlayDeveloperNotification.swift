import Foundation
import Messages

/// `subscriptionNotification.notificationType`: Google's numbers and names, the table the worker reads pushes with
/// (its message tests pin it to Google's list).
public typealias PlaySubscriptionNotificationType = DeveloperNotification.SubscriptionType

/// `oneTimeProductNotification.notificationType`.
public typealias PlayOneTimeNotificationType = DeveloperNotification.OneTimeProductType

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
