import Messages

/// A store's endpoint with its own request-rate limit: one table of endpoints for every store the gate serves.
public struct StoreEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// The store an endpoint belongs to, spelled as in messages.
    public enum Store: String, Sendable, Hashable, CaseIterable {
        case appStore = "app_store"
        case googlePlay = "google_play"
    }

    /// The store.
    public var store: Store
    /// A short stable name, unique within its store, e.g. `transaction_info` (the `endpoint` metric label).
    public var name: String

    public init(_ name: String, store: Store = .appStore) {
        self.store = store
        self.name = name
    }

    public var description: String { name }

    /// The legacy `verifyReceipt` endpoint (no published limit: the operator sets a ceiling).
    public static let verifyReceipt = StoreEndpoint("verify_receipt")
    /// App Store Server API, Get Transaction Info.
    public static let transactionInfo = StoreEndpoint("transaction_info")
    /// App Store Server API, Get Transaction History.
    public static let transactionHistory = StoreEndpoint("transaction_history")
    /// App Store Server API, Get All Subscription Statuses.
    public static let subscriptionStatuses = StoreEndpoint("subscription_statuses")
    /// App Store Server API, Get Notification History.
    public static let notificationHistory = StoreEndpoint("notification_history")
    /// App Store Server API, Get Refund History.
    public static let refundHistory = StoreEndpoint("refund_history")
    /// App Store Server API, Send Consumption Information (V2).
    public static let consumptionInformation = StoreEndpoint("consumption_information")
    /// App Store Server API, Finish Transaction.
    public static let finishTransaction = StoreEndpoint("finish_transaction")
    /// App Store Server API, Set App Account Token.
    public static let appAccountToken = StoreEndpoint("app_account_token")
    /// App Store Server API, Get App Transaction Info.
    public static let appTransactionInfo = StoreEndpoint("app_transaction_info")
    /// App Store Server API, Request a Test Notification.
    public static let testNotification = StoreEndpoint("test_notification")
    /// App Store Server API, Get Test Notification Status.
    public static let testNotificationStatus = StoreEndpoint("test_notification_status")

    /// Google Play Developer API, `purchases.subscriptionsv2.get` (quota bucket: Subscriptions).
    public static let playSubscriptionRead = StoreEndpoint("subscription_read", store: .googlePlay)
    /// Google Play Developer API, `purchases.productsv2.getproductpurchasev2` (quota bucket: One-time Purchases).
    public static let playProductRead = StoreEndpoint("product_read", store: .googlePlay)
    /// Google Play Developer API, `purchases.subscriptions.acknowledge` (quota bucket: Subscriptions).
    public static let playSubscriptionAcknowledge = StoreEndpoint("subscription_acknowledge", store: .googlePlay)
    /// Google Play Developer API, `purchases.products.acknowledge` (quota bucket: One-time Purchases).
    public static let playProductAcknowledge = StoreEndpoint("product_acknowledge", store: .googlePlay)
    /// Google Play Developer API, `purchases.products.consume` (quota bucket: One-time Purchases).
    public static let playProductConsume = StoreEndpoint("product_consume", store: .googlePlay)
    /// `orders.reviewrefund`: the answer to a pending refund review.
    public static let playOrderReviewRefund = StoreEndpoint("order_review_refund", store: .googlePlay)
    /// Google Play Developer API, `purchases.voidedpurchases.list` (the reconciler's sweep; counted in the daily
    /// quota).
    public static let playVoidedPurchases = StoreEndpoint("voided_purchases", store: .googlePlay)
    /// Google's OAuth 2.0 token endpoint, where the service account's signed assertion buys an access token (not a
    /// Developer API call: outside its quota).
    public static let playToken = StoreEndpoint("token", store: .googlePlay)

    /// Every Google Play endpoint the client knows.
    public static let googlePlayEndpoints: [StoreEndpoint] = [
        .playSubscriptionRead, .playProductRead, .playSubscriptionAcknowledge, .playProductAcknowledge,
        .playProductConsume, .playOrderReviewRefund, .playVoidedPurchases, .playToken,
    ]
}

/// A sustained rate and a burst for one endpoint.
public struct EndpointRateLimit: Sendable, Hashable {
    /// Requests per second.
    public var ratePerSecond: Double
    /// Requests allowed at once after a quiet period.
    public var burst: Int

    public init(ratePerSecond: Double, burst: Int) {
        self.ratePerSecond = ratePerSecond
        self.burst = burst
    }

    /// Apple's documented App Store Server API limit for transaction info, history and statuses: 50 requests/s in
    /// production; the sandbox allows 10 % of that. Burst: one tenth of a second's worth (at least 1), so a burst
    /// never pushes a one-second window above the limit by more than 10 %. Xcode and local testing never reach
    /// Apple's servers; they get the sandbox's limit.
    public static func appStoreServerAPI(_ environment: AppleEnvironment) -> EndpointRateLimit {
        switch environment {
        case .production: EndpointRateLimit(ratePerSecond: 50, burst: 5)
        case .sandbox, .xcode, .localTesting: EndpointRateLimit(ratePerSecond: 5, burst: 1)
        }
    }

    /// Apple's documented production limit of an App Store Server API endpoint ("Identifying rate limits"), scaled
    /// to 10 % in the sandbox; nil for `verifyReceipt`. Burst as in ``appStoreServerAPI(_:)``.
    public static func appStoreServerAPI(
        _ endpoint: StoreEndpoint, environment: AppleEnvironment
    ) -> EndpointRateLimit? {
        let production: Double
        switch endpoint {
        case .transactionInfo, .transactionHistory, .subscriptionStatuses, .notificationHistory,
            .consumptionInformation, .finishTransaction, .appTransactionInfo:
            production = 50
        case .appAccountToken: production = 20
        case .refundHistory: production = 10
        case .testNotification, .testNotificationStatus: production = 1
        default: return nil
        }
        let rate = environment == .production ? production : production / 10
        return EndpointRateLimit(ratePerSecond: rate, burst: max(1, Int(rate / 10)))
    }

    /// Every App Store Server API endpoint the client knows.
    public static let appStoreServerAPIEndpoints: [StoreEndpoint] = [
        .transactionInfo, .transactionHistory, .subscriptionStatuses, .notificationHistory, .refundHistory,
        .consumptionInformation, .finishTransaction, .appAccountToken, .appTransactionInfo, .testNotification,
        .testNotificationStatus,
    ]

    /// The rate limits of every App Store Server API endpoint, plus the operator's ceiling for `verifyReceipt`
    /// (Apple publishes none).
    public static func appleDefaults(
        environment: AppleEnvironment,
        verifyReceiptRateLimit: EndpointRateLimit = EndpointRateLimit(ratePerSecond: 50, burst: 10)
    ) -> [StoreEndpoint: EndpointRateLimit] {
        var limits: [StoreEndpoint: EndpointRateLimit] = [.verifyReceipt: verifyReceiptRateLimit]
        for endpoint in appStoreServerAPIEndpoints {
            limits[endpoint] = appStoreServerAPI(endpoint, environment: environment)
        }
        return limits
    }
}

extension EndpointRateLimit {
    /// Google Play's per-endpoint limits: Google publishes no per-method rate, only each quota bucket's per-minute
    /// quota (``QuotaBudget/googlePlayMinuteQuota``), so each Developer API endpoint gets that quota spread over a
    /// minute (3,000 a minute is 50/s), burst one tenth of a second's worth; the per-minute ``QuotaBudget`` keeps the
    /// endpoints of one bucket together under the bucket's quota. The token endpoint is called about once an hour;
    /// 1/s, burst 2, only stops a refresh loop.
    public static func googlePlayDefaults(
        minuteQuota: Int = QuotaBudget.googlePlayMinuteQuota
    ) -> [StoreEndpoint: EndpointRateLimit] {
        let rate = Double(max(minuteQuota, 1)) / 60
        let api = EndpointRateLimit(ratePerSecond: rate, burst: max(1, Int(rate / 10)))
        var limits: [StoreEndpoint: EndpointRateLimit] = [.playToken: EndpointRateLimit(ratePerSecond: 1, burst: 2)]
        for endpoint in StoreEndpoint.googlePlayEndpoints where endpoint != .playToken {
            limits[endpoint] = api
        }
        return limits
    }
}
