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

    /// The rate limits of every App Store Server API endpoint the worker calls, plus the operator's ceiling for
    /// `verifyReceipt` (Apple publishes none).
    public static func appleDefaults(
        environment: AppleEnvironment,
        verifyReceiptCeiling: EndpointRateLimit = EndpointRateLimit(ratePerSecond: 50, burst: 10)
    ) -> [AppleEndpoint: EndpointRateLimit] {
        let api = appStoreServerAPI(environment)
        return [
            .transactionInfo: api,
            .transactionHistory: api,
            .subscriptionStatuses: api,
            .verifyReceipt: verifyReceiptCeiling,
        ]
    }
}
