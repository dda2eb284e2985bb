import Foundation

/// A Google Play Real-time developer notification (the JSON Pub/Sub carries base64-encoded in `message.data`): which
/// app, when, and one notification about one purchase. It carries no purchase state: the worker reads the purchase
/// from Google. A kind Google adds later is kept as ``Kind/unknown(_:)``, never refused for being new.
public struct DeveloperNotification: Sendable, Hashable {
    /// The notification's format version (`version`, "1.0").
    public var version: String?
    /// The app's package name (`packageName`).
    public var packageName: String
    /// When the event happened (`eventTimeMillis`, milliseconds since 1970; Google writes it as a string).
    public var eventTimeMillis: Int64?
    /// The one notification it carries.
    public var kind: Kind

    /// The notification a DeveloperNotification carries (exactly one).
    public enum Kind: Sendable, Hashable {
        /// `subscriptionNotification`.
        case subscription(Subscription)
        /// `oneTimeProductNotification`.
        case oneTimeProduct(OneTimeProduct)
        /// `voidedPurchaseNotification`: a purchase refunded, charged back or revoked.
        case voidedPurchase(VoidedPurchase)
        /// `pendingRefundReviewNotification`: Google asks for the developer's opinion on a chargeback.
        case pendingRefundReview(PendingRefundReview)
        /// `testNotification`, sent from the Play Console; about no purchase.
        case test(version: String?)
        /// A notification field this build does not know (its name): recorded and answered, never a crash.
        case unknown(String)
    }

    /// The purchase token the notification is about; nil for a test notification or an unknown kind.
    public var purchaseToken: String? {
        switch kind {
        case .subscription(let n): n.purchaseToken
        case .oneTimeProduct(let n): n.purchaseToken
        case .voidedPurchase(let n): n.purchaseToken
        case .pendingRefundReview(let n): n.purchaseToken
        case .test, .unknown: nil
        }
    }

    /// Why a text is not a DeveloperNotification. The description names the field, never a value.
    public enum Failure: Error, Sendable, Hashable, CustomStringConvertible {
        /// Not a JSON object.
        case notJSONObject
        /// A required field is absent or not of its type (the field's path).
        case invalidField(String)
        /// No notification field at all.
        case noNotification
        /// More than one notification field.
        case severalNotifications

        public var description: String {
            switch self {
            case .notJSONObject: "not a JSON object"
            case .invalidField(let path): "\(path) is missing or of the wrong type"
            case .noNotification: "no notification field"
            case .severalNotifications: "more than one notification field"
            }
        }
    }

    /// Reads a DeveloperNotification from its JSON text.
    public static func parse(_ text: String) throws(Failure) -> DeveloperNotification {
        try parse(bytes: Array(text.utf8))
    }

    /// Reads a DeveloperNotification from its JSON bytes. Tolerant of unknown fields, strict about the types of the
    /// fields it reads (a number sent as a boolean or a fraction is refused, not rounded).
    public static func parse(bytes: [UInt8]) throws(Failure) -> DeveloperNotification {
        do {
            return try JSONDecoder().decode(Wire.self, from: Data(bytes)).notification
        } catch let failure as Failure {
            throw failure
        } catch DecodingError.typeMismatch(_, let context) where context.codingPath.isEmpty {
            throw .notJSONObject
        } catch DecodingError.dataCorrupted(let context) where context.codingPath.isEmpty {
            throw .notJSONObject
        } catch let error as DecodingError {
            throw .invalidField(Self.path(of: error))
        } catch {
            throw .notJSONObject
        }
    }

    /// The dotted path of the field a decoding error is about (names only; never a value).
    private static func path(of error: DecodingError) -> String {
        let keys: [any CodingKey]
        switch error {
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            keys = context.codingPath
        case .keyNotFound(let key, let context):
            keys = context.codingPath + [key]
        @unknown default:
            keys = []
        }
        return keys.map(\.stringValue).joined(separator: ".")
    }

    /// Any JSON key.
    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ name: String) { stringValue = name }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// The decoding of the whole text: the envelope fields, then the one notification field.
    private struct Wire: Decodable {
        var notification: DeveloperNotification

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: AnyKey.self)
            let packageName = try c.decode(String.self, forKey: AnyKey("packageName"))
            let version = try c.decodeIfPresent(String.self, forKey: AnyKey("version"))
            var eventTime: Int64?
            let eventKey = AnyKey("eventTimeMillis")
            if c.contains(eventKey), try !c.decodeNil(forKey: eventKey) {
                // Google writes an int64 as a string of digits; a plain number is read too.
                if let text = try? c.decode(String.self, forKey: eventKey) {
                    guard let millis = Int64(text) else { throw Failure.invalidField("eventTimeMillis") }
                    eventTime = millis
                } else {
                    eventTime = try c.decode(Int64.self, forKey: eventKey)
                }
            }
            let present = c.allKeys.filter { key in
                key.stringValue.hasSuffix("Notification")
                    && (try? c.nestedContainer(keyedBy: AnyKey.self, forKey: key)) != nil
            }
            guard let key = present.first else { throw Failure.noNotification }
            guard present.count == 1 else { throw Failure.severalNotifications }
            let body = try c.nestedContainer(keyedBy: AnyKey.self, forKey: key)
            func string(_ name: String) throws -> String { try body.decode(String.self, forKey: AnyKey(name)) }
            func optionalString(_ name: String) throws -> String? {
                try body.decodeIfPresent(String.self, forKey: AnyKey(name))
            }
            // A fraction or a boolean is no integer; named here, as the decoder's own error may carry no path.
            func optionalInt(_ name: String) throws -> Int? {
                let field = AnyKey(name)
                guard body.contains(field), try !body.decodeNil(forKey: field) else { return nil }
                guard let value = try? body.decode(Int.self, forKey: field) else {
                    throw Failure.invalidField(key.stringValue + "." + name)
                }
                return value
            }
            func int(_ name: String) throws -> Int {
                guard let value = try optionalInt(name) else {
                    throw Failure.invalidField(key.stringValue + "." + name)
                }
                return value
            }
            let kind: Kind
            switch key.stringValue {
            case "subscriptionNotification":
                kind = .subscription(
                    Subscription(
                        version: try optionalString("version"), notificationType: try int("notificationType"),
                        purchaseToken: try string("purchaseToken"), subscriptionID: try optionalString("subscriptionId")
                    ))
            case "oneTimeProductNotification":
                kind = .oneTimeProduct(
                    OneTimeProduct(
                        version: try optionalString("version"), notificationType: try int("notificationType"),
                        purchaseToken: try string("purchaseToken"), sku: try optionalString("sku")))
            case "voidedPurchaseNotification":
                kind = .voidedPurchase(
                    VoidedPurchase(
                        purchaseToken: try string("purchaseToken"), orderID: try string("orderId"),
                        productType: try optionalInt("productType"), refundType: try optionalInt("refundType")))
            case "pendingRefundReviewNotification":
                kind = .pendingRefundReview(
                    PendingRefundReview(
                        purchaseToken: try string("purchaseToken"), orderID: try string("orderId"),
                        pendingRefundToken: try string("pendingRefundToken")))
            case "testNotification":
                kind = .test(version: try optionalString("version"))
            default:
                kind = .unknown(key.stringValue)
            }
            notification = DeveloperNotification(
                version: version, packageName: packageName, eventTimeMillis: eventTime, kind: kind)
        }
    }
}

extension DeveloperNotification {
    /// `subscriptionNotification`: something happened to a subscription.
    public struct Subscription: Sendable, Hashable {
        public var version: String?
        /// Google's number for what happened; ``type`` names it when this build knows it.
        public var notificationType: Int
        public var purchaseToken: String
        /// The subscription's product id (`subscriptionId`), when Google sends it.
        public var subscriptionID: String?

        /// The known type, or nil for a number Google added later.
        public var type: SubscriptionType? { SubscriptionType(rawValue: notificationType) }
    }

    /// Google's subscription notification types, by their numbers (14, 15, 16 and 21 are not assigned).
    public enum SubscriptionType: Int, Sendable, Hashable, CaseIterable {
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

        /// Google's name of the type.
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

    /// `oneTimeProductNotification`: a one-time purchase was made or cancelled (a pending one included).
    public struct OneTimeProduct: Sendable, Hashable {
        public var version: String?
        /// Google's number for what happened; ``type`` names it when this build knows it.
        public var notificationType: Int
        public var purchaseToken: String
        /// The product id (`sku`).
        public var sku: String?

        /// The known type, or nil for a number Google added later.
        public var type: OneTimeProductType? { OneTimeProductType(rawValue: notificationType) }
    }

    /// Google's one-time product notification types, by their numbers.
    public enum OneTimeProductType: Int, Sendable, Hashable, CaseIterable {
        case purchased = 1
        case canceled = 2

        /// Google's name of the type.
        public var name: String {
            switch self {
            case .purchased: "ONE_TIME_PRODUCT_PURCHASED"
            case .canceled: "ONE_TIME_PRODUCT_CANCELED"
            }
        }
    }

    /// `voidedPurchaseNotification`: a purchase was voided (refunded, charged back, revoked).
    public struct VoidedPurchase: Sendable, Hashable {
        public var purchaseToken: String
        /// The voided order (`orderId`).
        public var orderID: String
        /// Google's number for the purchase's kind (`productType`); ``voidedProductType`` names it.
        public var productType: Int?
        /// Google's number for the refund's kind (`refundType`); ``voidedRefundType`` names it.
        public var refundType: Int?

        public init(purchaseToken: String, orderID: String, productType: Int?, refundType: Int?) {
            self.purchaseToken = purchaseToken
            self.orderID = orderID
            self.productType = productType
            self.refundType = refundType
        }

        public var voidedProductType: VoidedProductType? { productType.flatMap(VoidedProductType.init(rawValue:)) }
        public var voidedRefundType: VoidedRefundType? { refundType.flatMap(VoidedRefundType.init(rawValue:)) }
    }

    /// The kind of a voided purchase (`productType`).
    public enum VoidedProductType: Int, Sendable, Hashable, CaseIterable {
        case subscription = 1
        case oneTime = 2

        /// Google's name of the type.
        public var name: String {
            switch self {
            case .subscription: "PRODUCT_TYPE_SUBSCRIPTION"
            case .oneTime: "PRODUCT_TYPE_ONE_TIME"
            }
        }
    }

    /// The kind of a voided purchase's refund (`refundType`).
    public enum VoidedRefundType: Int, Sendable, Hashable, CaseIterable {
        case fullRefund = 1
        case quantityBasedPartialRefund = 2

        /// Google's name of the type.
        public var name: String {
            switch self {
            case .fullRefund: "REFUND_TYPE_FULL_REFUND"
            case .quantityBasedPartialRefund: "REFUND_TYPE_QUANTITY_BASED_PARTIAL_REFUND"
            }
        }
    }

    /// `pendingRefundReviewNotification`: a chargeback awaits the developer's opinion, given once with
    /// `orders.reviewrefund` (which takes the `pendingRefundToken`) within 24 hours.
    public struct PendingRefundReview: Sendable, Hashable {
        public var purchaseToken: String
        /// The order under review (`orderId`), the `orders.reviewrefund` call's path.
        public var orderID: String
        /// The token `orders.reviewrefund` must carry (`pendingRefundToken`).
        public var pendingRefundToken: String

    }
}
