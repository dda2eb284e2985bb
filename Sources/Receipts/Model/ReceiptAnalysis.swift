import Foundation
import Messages

/// The kind of receipt, detected from its bytes, never from a hint.
public enum ReceiptFormat: String, Sendable, Hashable, Codable, CaseIterable {
    /// An iOS 6 style transaction receipt (OpenStep text with `signature` and `purchase-info`).
    case transactionReceipt = "transaction_receipt"
    /// A PKCS#7 app receipt (the app's `appStoreReceiptURL` contents).
    case appReceipt = "app_receipt"
    /// A StoreKit 2 JWS signed transaction.
    case signedTransaction = "signed_transaction"
    /// A StoreKit 2 JWS signed renewal info.
    case signedRenewalInfo = "signed_renewal_info"
    /// An App Store Server Notification V2 `signedPayload`.
    case notification
    /// A StoreKit 2 JWS app transaction.
    case appTransaction = "app_transaction"
    /// Not a receipt.
    case unknown
}

/// The environment names found in receipts, normalized across formats: `ProductionSandbox` in app receipts is
/// `Sandbox` (a missing `environment` in iOS 6 receipts is `Production`, where that format is read).
enum ReceiptEnvironmentName {
    static func normalized<S: StringProtocol>(_ text: S) -> String {
        text == "ProductionSandbox" ? AppleEnvironment.sandbox.rawValue : String(text)
    }
}

/// The outcome of checking a receipt's signature and certificate chain, offline.
public enum SignatureStatus: Sendable, Hashable {
    /// The signature verifies and the chain reaches a configured anchor, valid at the validation time.
    case valid
    /// The signature or the chain is wrong: the receipt was altered or forged.
    case invalid(reason: String)
    /// The signature may be right but the chain does not reach a configured anchor (or cannot be completed).
    case untrusted(reason: String)
    /// Nothing was checked (not a receipt, or a format without a signature).
    case notChecked(reason: String)

    /// `valid`, `invalid`, `untrusted` or `not_checked`.
    public var code: String {
        switch self {
        case .valid: "valid"
        case .invalid: "invalid"
        case .untrusted: "untrusted"
        case .notChecked: "not_checked"
        }
    }

    /// Why, for every status but `valid`.
    public var reason: String? {
        switch self {
        case .valid: nil
        case .invalid(let reason), .untrusted(let reason), .notChecked(let reason): reason
        }
    }
}

/// One purchase found in a receipt.
public struct ReceiptTransaction: Sendable, Hashable {
    public var transactionID: String
    public var originalTransactionID: String?
    public var productID: String?
    public var purchaseDate: Date?
    public var originalPurchaseDate: Date?
    public var expiresDate: Date?
    /// App receipts (1712) and iOS 6 receipts: when Apple customer support refunded the purchase.
    public var cancellationDate: Date?
    /// StoreKit 2: when the purchase was refunded or revoked.
    public var revocationDate: Date?
    public var revocationReason: Int?
    public var quantity: Int?
    public var webOrderLineItemID: String?
    /// StoreKit 2 `type` (for example "Auto-Renewable Subscription"), when the format carries it.
    public var productType: String?
    /// StoreKit 2 `appAccountToken`: the UUID the app set at purchase, when it set one.
    public var appAccountToken: String?
    /// StoreKit 2 `revocationType` (`REFUND_FULL`, `REFUND_PRORATED`, `FAMILY_REVOKE`), once revoked.
    public var revocationType: String?
    /// StoreKit 2 `revocationPercentage`: the share refunded, in milliunits.
    public var revocationPercentage: Int?
    /// StoreKit 2 `inAppOwnershipType` (`PURCHASED`, `FAMILY_SHARED`).
    public var inAppOwnershipType: String?
    /// StoreKit 2 `storefront`: the App Store country's three-letter code (`USA`), as Apple wrote it.
    public var storefront: String?

    public init(
        transactionID: String, originalTransactionID: String? = nil, productID: String? = nil,
        purchaseDate: Date? = nil, originalPurchaseDate: Date? = nil, expiresDate: Date? = nil,
        cancellationDate: Date? = nil, revocationDate: Date? = nil, revocationReason: Int? = nil,
        quantity: Int? = nil, webOrderLineItemID: String? = nil, productType: String? = nil,
        appAccountToken: String? = nil, revocationType: String? = nil, revocationPercentage: Int? = nil,
        inAppOwnershipType: String? = nil, storefront: String? = nil
    ) {
        self.storefront = storefront
        self.revocationType = revocationType
        self.revocationPercentage = revocationPercentage
        self.inAppOwnershipType = inAppOwnershipType
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.purchaseDate = purchaseDate
        self.originalPurchaseDate = originalPurchaseDate
        self.expiresDate = expiresDate
        self.cancellationDate = cancellationDate
        self.revocationDate = revocationDate
        self.revocationReason = revocationReason
        self.quantity = quantity
        self.webOrderLineItemID = webOrderLineItemID
        self.productType = productType
        self.appAccountToken = appAccountToken
    }

    /// True when the purchase was refunded, cancelled by support or revoked.
    public var isRevoked: Bool { cancellationDate != nil || revocationDate != nil }
}

/// The state of an auto-renewable subscription from a signed renewal info.
public struct RenewalInfo: Sendable, Hashable {
    public var originalTransactionID: String?
    public var productID: String?
    public var autoRenewProductID: String?
    public var autoRenewStatus: Int?
    public var expirationIntent: Int?
    public var renewalDate: Date?
    public var isInBillingRetryPeriod: Bool?
    /// The end of the billing grace period, while Apple retries a failed renewal with access kept.
    public var gracePeriodExpiresDate: Date?
    public var priceIncreaseStatus: Int?
}

/// The type and subtype of an App Store Server Notification V2.
public struct NotificationInfo: Sendable, Hashable {
    public var notificationType: String
    public var subtype: String?
    public var notificationUUID: String?
    /// The app's Apple id the notification names (absent in sandbox).
    public var appAppleID: Int64?
    /// `RENEWAL_EXTENSION` / `SUMMARY`: the request id and its counts, recorded with the verdict.
    public var summaryRequestID: String?
}

/// Everything a receipt says, read and verified offline: facts only (Decision judges them: ``facts``).
public struct ReceiptAnalysis: Sendable {
    public var format: ReceiptFormat
    /// The environment the receipt names (Apple's four spellings, exactly); nil when it names none or one of
    /// its own (then in ``unrecognizedEnvironment``).
    public var environment: AppleEnvironment?
    /// An environment name the receipt gives that is none of Apple's four, as written.
    public var unrecognizedEnvironment: String?
    public var bundleID: String?
    public var signature: SignatureStatus
    /// When the receipt was signed or created: the time its chain is validated at unless told otherwise.
    public var signedDate: Date?
    public var appVersion: String?
    public var originalAppVersion: String?
    /// Every purchase found, in receipt order (for a notification: the nested signed transaction).
    public var transactions: [ReceiptTransaction]
    public var renewalInfo: RenewalInfo?
    public var notification: NotificationInfo?
    /// For `unknown`: why the bytes are not a receipt.
    public var unknownReason: String?

    public init(
        format: ReceiptFormat, environmentName: String? = nil, bundleID: String? = nil,
        signature: SignatureStatus, signedDate: Date? = nil, appVersion: String? = nil,
        originalAppVersion: String? = nil, transactions: [ReceiptTransaction] = [], renewalInfo: RenewalInfo? = nil,
        notification: NotificationInfo? = nil, unknownReason: String? = nil
    ) {
        self.format = format
        self.environment = environmentName.flatMap { AppleEnvironment(rawValue: $0) }
        self.unrecognizedEnvironment = environment == nil ? environmentName : nil
        self.bundleID = bundleID
        self.signature = signature
        self.signedDate = signedDate
        self.appVersion = appVersion
        self.originalAppVersion = originalAppVersion
        self.transactions = transactions
        self.renewalInfo = renewalInfo
        self.notification = notification
        self.unknownReason = unknownReason
    }

    /// A result for bytes that are not a receipt.
    static func unknown(_ reason: String) -> ReceiptAnalysis {
        ReceiptAnalysis(format: .unknown, signature: .notChecked(reason: "not a receipt"), unknownReason: reason)
    }
}
