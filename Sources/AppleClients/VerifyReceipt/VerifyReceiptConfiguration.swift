import Messages

/// Settings of ``VerifyReceiptClient``.
public struct VerifyReceiptConfiguration: Sendable {
    /// Apple's production endpoint (`POST`). Default: `https://buy.itunes.apple.com/verifyReceipt`.
    public var productionURL: String
    /// Apple's sandbox endpoint. Default: `https://sandbox.itunes.apple.com/verifyReceipt`.
    public var sandboxURL: String
    /// The app's shared secret (`password`), needed for auto-renewable subscriptions. Default: nil.
    public var sharedSecret: AppleSharedSecret?
    /// `exclude-old-transactions`: only the latest renewal of each subscription in `latest_receipt_info`.
    /// Default: false.
    public var excludeOldTransactions: Bool
    /// The time limit for each request to Apple. Default: 30 s.
    public var requestTimeout: Duration

    /// Creates a configuration; every argument has the documented default.
    public init(
        productionURL: String = "https://buy.itunes.apple.com/verifyReceipt",
        sandboxURL: String = "https://sandbox.itunes.apple.com/verifyReceipt",
        sharedSecret: AppleSharedSecret? = nil,
        excludeOldTransactions: Bool = false,
        requestTimeout: Duration = .seconds(30)
    ) {
        self.productionURL = productionURL
        self.sandboxURL = sandboxURL
        self.sharedSecret = sharedSecret
        self.excludeOldTransactions = excludeOldTransactions
        self.requestTimeout = requestTimeout
    }

    /// The simulator's (or any Apple look-alike's) endpoints below one base URL: `POST {base}/verifyReceipt` and
    /// `POST {base}/sandbox/verifyReceipt`.
    public static func endpoints(
        base: String, sharedSecret: AppleSharedSecret? = nil, excludeOldTransactions: Bool = false
    ) -> VerifyReceiptConfiguration {
        let trimmed = base.hasSuffix("/") ? String(base.dropLast()) : base
        return VerifyReceiptConfiguration(
            productionURL: trimmed + "/verifyReceipt", sandboxURL: trimmed + "/sandbox/verifyReceipt",
            sharedSecret: sharedSecret, excludeOldTransactions: excludeOldTransactions)
    }

    func url(for environment: AppleEnvironment) -> String {
        environment == .sandbox ? sandboxURL : productionURL
    }
}
