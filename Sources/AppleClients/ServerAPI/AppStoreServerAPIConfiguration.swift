import Messages

/// Settings of ``AppStoreServerAPIClient``.
public struct AppStoreServerAPIConfiguration: Sendable {
    /// The production base URL. Default: `https://api.storekit.apple.com`.
    public var productionBaseURL: String
    /// The sandbox base URL. Default: `https://api.storekit-sandbox.apple.com`.
    public var sandboxBaseURL: String
    /// The time limit of each request. Default: 30 s.
    public var requestTimeout: Duration
    /// The most pages ``AppStoreServerAPIClient/completeTransactionHistory(transactionID:)`` reads. Default: 50.
    public var maximumHistoryPages: Int

    /// Creates a configuration; every argument has the documented default.
    public init(
        productionBaseURL: String = "https://api.storekit.apple.com",
        sandboxBaseURL: String = "https://api.storekit-sandbox.apple.com",
        requestTimeout: Duration = .seconds(30),
        maximumHistoryPages: Int = 50
    ) {
        self.productionBaseURL = Self.trimmed(productionBaseURL)
        self.sandboxBaseURL = Self.trimmed(sandboxBaseURL)
        self.requestTimeout = requestTimeout
        self.maximumHistoryPages = maximumHistoryPages
    }

    func baseURL(for environment: AppleEnvironment) -> String {
        environment == .sandbox ? sandboxBaseURL : productionBaseURL
    }

    private static func trimmed(_ url: String) -> String {
        url.hasSuffix("/") ? String(url.dropLast()) : url
    }
}
