import Messages

/// An Apple endpoint with its own request-rate limit.
public struct AppleEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// A short stable name, e.g. `transaction_info`.
    public var name: String

    public init(_ name: String) {
        self.name = name
    }

    public var description: String { name }

    /// The legacy `verifyReceipt` endpoint (no published limit: the operator sets a ceiling).
    public static let verifyReceipt = AppleEndpoint("verify_receipt")
    /// App Store Server API, Get Transaction Info.
    public static let transactionInfo = AppleEndpoint("transaction_info")
    /// App Store Server API, Get Transaction History.
    public static let transactionHistory = AppleEndpoint("transaction_history")
    /// App Store Server API, Get All Subscription Statuses.
    public static let subscriptionStatuses = AppleEndpoint("subscription_statuses")
    /// App Store Server API, Get Notification History.
    public static let notificationHistory = AppleEndpoint("notification_history")
    /// App Store Server API, Get Refund History.
    public static let refundHistory = AppleEndpoint("refund_history")
    /// App Store Server API, Send Consumption Information (V2).
    public static let consumptionInformation = AppleEndpoint("consumption_information")
    /// App Store Server API, Finish Transaction.
    public static let finishTransaction = AppleEndpoint("finish_transaction")
    /// App Store Server API, Set App Account Token.
    public static let appAccountToken = AppleEndpoint("app_account_token")
    /// App Store Server API, Get App Transaction Info.
    public static let appTransactionInfo = AppleEndpoint("app_transaction_info")
    /// App Store Server API, Request a Test Notification.
    public static let testNotification = AppleEndpoint("test_notification")
    /// App Store Server API, Get Test Notification Status.
    public static let testNotificationStatus = AppleEndpoint("test_notification_status")
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
        _ endpoint: AppleEndpoint, environment: AppleEnvironment
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
    public static let appStoreServerAPIEndpoints: [AppleEndpoint] = [
        .transactionInfo, .transactionHistory, .subscriptionStatuses, .notificationHistory, .refundHistory,
        .consumptionInformation, .finishTransaction, .appAccountToken, .appTransactionInfo, .testNotification,
        .testNotificationStatus,
    ]

    /// The rate limits of every App Store Server API endpoint, plus the operator's ceiling for `verifyReceipt`
    /// (Apple publishes none).
    public static func appleDefaults(
        environment: AppleEnvironment,
        verifyReceiptRateLimit: EndpointRateLimit = EndpointRateLimit(ratePerSecond: 50, burst: 10)
    ) -> [AppleEndpoint: EndpointRateLimit] {
        var limits: [AppleEndpoint: EndpointRateLimit] = [.verifyReceipt: verifyReceiptRateLimit]
        for endpoint in appStoreServerAPIEndpoints {
            limits[endpoint] = appStoreServerAPI(endpoint, environment: environment)
        }
        return limits
    }
}
