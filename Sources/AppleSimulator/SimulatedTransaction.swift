import CodedErrors
import Foundation
import Messages

/// What the simulator knows of the App Store environments a simulated purchase belongs to.
extension AppleEnvironment {
    /// The environments the simulator serves and mints in (Apple's servers know no other).
    static let simulated: [AppleEnvironment] = [.production, .sandbox]

    /// The value of attribute 0 in a PKCS#7 app receipt (`receipt_type` in verifyReceipt answers).
    var receiptType: String {
        switch self {
        case .production: "Production"
        case .sandbox: "ProductionSandbox"
        case .xcode, .localTesting: rawValue
        }
    }

    /// The leading digit of transaction ids minted in this environment (Apple's sandbox ids start with 2).
    var transactionIdPrefix: Int64 {
        switch self {
        case .production: 1
        case .sandbox, .xcode, .localTesting: 2
        }
    }
}

/// The receipt formats the simulator mints.
public enum SimulatedReceiptFormat: String, Codable, Sendable, CaseIterable {
    /// A PKCS#7 app receipt (iOS 7 and later), base64.
    case appReceipt = "app_receipt"
    /// An iOS 6 style transaction receipt (OpenStep text with `signature` and `purchase-info`), base64.
    case transactionReceipt = "transaction_receipt"
    /// A StoreKit 2 signed transaction (compact JWS, ES256).
    case signedTransaction = "signed_transaction"
}

/// One purchase the simulator minted: what its registry remembers and what every receipt format carries.
/// Dates are milliseconds since 1970, as Apple sends them.
public struct SimulatedTransaction: Codable, Sendable, Equatable {
    public var transactionId: String
    public var originalTransactionId: String
    public var bundleId: String
    public var productId: String
    public var environment: AppleEnvironment
    public var quantity: Int
    public var purchaseDateMs: Int64
    public var originalPurchaseDateMs: Int64
    /// Set for auto-renewable subscriptions.
    public var expiresDateMs: Int64?
    /// Set for auto-renewable subscriptions.
    public var webOrderLineItemId: String?
    /// StoreKit 2 product type (`Auto-Renewable Subscription`, `Non-Consumable`, `Consumable`, …).
    public var productType: String
    /// Set once the purchase was refunded or revoked (`POST /sim/refund`).
    public var revocationDateMs: Int64?
    /// Apple's revocation reason: 0 (other) or 1 (an app issue).
    public var revocationReason: Int?
    /// When the subscription enters billing retry: the end of the period whose renewal fails
    /// (`POST /sim/billing-retry`); cleared by a renewal or expiry.
    public var billingRetryStartMs: Int64?
    /// The end of the grace period inside billing retry, if the app grants one.
    public var gracePeriodExpiresDateMs: Int64?
    /// The UUID set by Set App Account Token (on every transaction of the family).
    public var appAccountToken: String?
    /// The bodies of Send Consumption Information calls, as received.
    public var consumptionAnswers: [String]?
    /// How often Finish Transaction was called for this transaction.
    public var finishCalls: Int?
    /// Renewal info's `priceIncreaseStatus` after a price-increase notification: 0 pending, 1 accepted.
    public var priceIncreaseStatus: Int?
    /// Renewal info's `autoRenewStatus` when the customer turned it off (0); nil means on.
    public var autoRenewStatus: Int?
    /// `revocationType` once revoked: `REFUND_FULL`, `REFUND_PRORATED` (a refund with a percentage) or
    /// `FAMILY_REVOKE` (a family member's access ended).
    public var revocationType: String?
    /// `revocationPercentage` of a prorated refund, in milliunits (25000 is 25 %).
    public var revocationPercentage: Int?
    /// `FAMILY_SHARED` for a family member's transaction (``AppleSimulator/shareWithFamily(transactionId:)``); nil
    /// for the purchaser's own (`PURCHASED`).
    public var inAppOwnershipType: String?
    /// For a family member's transaction: the purchaser's transaction it was shared from.
    public var sharedFromTransactionId: String?
    /// The signed transaction's `storefront` (ISO 3166-1 alpha-3) when minted for another country; nil: `USA`.
    public var storefront: String?

    /// Whether Apple retries a failed renewal at `nowMs`: a billing retry starts at the period's end
    /// (``billingRetryStartMs``), never before.
    func inBillingRetry(nowMs: Int64) -> Bool {
        guard let start = billingRetryStartMs else { return false }
        return start <= nowMs
    }

    /// True for auto-renewable subscriptions (those with an expiry date).
    var isSubscription: Bool { expiresDateMs != nil }

    /// The simulator's truth about the purchase at `nowMs`, as `GET /sim/transactions/{id}` reports it:
    /// `revoked`, `grace_period`, `billing_retry`, `expired` or `active`.
    func lifecycleState(nowMs: Int64) -> String {
        if revocationDateMs != nil { return "revoked" }
        if inBillingRetry(nowMs: nowMs) {
            if let grace = gracePeriodExpiresDateMs, grace > nowMs { return "grace_period" }
            return "billing_retry"
        }
        if let expires = expiresDateMs, expires <= nowMs { return "expired" }
        return "active"
    }

    /// Apple's subscription `status` (1 active, 2 expired, 3 billing retry, 4 grace period, 5 revoked).
    func subscriptionStatus(nowMs: Int64) -> Int {
        switch lifecycleState(nowMs: nowMs) {
        case "revoked": 5
        case "grace_period": 4
        case "billing_retry": 3
        case "expired": 2
        default: 1
        }
    }
}

/// What a client asks `POST /sim/mint` for.
public struct MintRequest: Sendable, Equatable {
    public var bundleId: String
    public var productId: String
    public var format: SimulatedReceiptFormat
    public var environment: AppleEnvironment
    public var expiresDateMs: Int64?
    public var quantity: Int
    /// Mint a renewal (or another purchase) in an existing subscription family.
    public var originalTransactionId: String?
    /// The purchase date; now when absent.
    public var purchaseDateMs: Int64?
    /// StoreKit 2 product type; derived from `expiresDateMs` when absent.
    public var productType: String?
    /// The `appAccountToken` the app passed to StoreKit (a UUID), carried by the transaction from the start.
    public var appAccountToken: String?
    /// The storefront's country (alpha-3) its signed transactions state; nil: `USA`.
    public var storefront: String?

    public init(
        bundleId: String,
        productId: String,
        format: SimulatedReceiptFormat,
        environment: AppleEnvironment,
        expiresDateMs: Int64? = nil,
        quantity: Int = 1,
        originalTransactionId: String? = nil,
        purchaseDateMs: Int64? = nil,
        productType: String? = nil,
        appAccountToken: String? = nil,
        storefront: String? = nil
    ) {
        self.storefront = storefront
        self.bundleId = bundleId
        self.productId = productId
        self.format = format
        self.environment = environment
        self.expiresDateMs = expiresDateMs
        self.quantity = quantity
        self.originalTransactionId = originalTransactionId
        self.purchaseDateMs = purchaseDateMs
        self.productType = productType
        self.appAccountToken = appAccountToken?.lowercased()
    }
}

/// What `POST /sim/mint` answers.
public struct MintedReceipt: Sendable, Equatable {
    /// Base64 for app and transaction receipts, the compact JWS for signed transactions.
    public var receipt: String
    public var transaction: SimulatedTransaction
}

/// An error of the simulator itself (bad configuration, unreadable state, bad mint input).
public typealias AppleSimulatorError = CodedError<AppleSimulatorErrorCode>

/// What went wrong in the simulator (``AppleSimulatorError``'s codes).
public enum AppleSimulatorErrorCode: String, ErrorCodes {
    case invalidRequest = "invalid_request"
    case unknownTransaction = "unknown_transaction"
    /// The transaction is not in a state the event applies to (a reversal of a refund that never happened).
    case conflict
    case stateDirectory = "state_directory"
    case certificates
    case server

    public static func description(of error: AppleSimulatorError) -> String {
        "AppleSimulatorError.\(error.code.rawValue): \(error.message) (\(error.file):\(error.line))"
    }
}
