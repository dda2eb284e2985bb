import Foundation
import Messages

/// A verifyReceipt answer, parsed leniently: unknown fields are ignored, numbers and strings are interchangeable.
public struct VerifyReceiptResponse: Sendable {
    /// Apple's status.
    public var status: VerifyReceiptStatus
    /// The environment the answer is for: the body's `environment`, else the endpoint that answered
    /// (iOS 6 answers carry no `environment`).
    public var environment: AppleEnvironment
    /// The endpoint that gave this answer (after any 21007/21008 hop).
    public var answeredBy: AppleEnvironment
    /// The decoded receipt (present for statuses 0 and 21006).
    public var receipt: VerifyReceiptReceipt?
    /// `latest_receipt_info`: the newest transactions of auto-renewable subscriptions.
    public var latestReceiptInfo: [ReceiptTransaction]
    /// `latest_expired_receipt_info` (iOS 6 receipts of expired subscriptions).
    public var latestExpiredReceiptInfo: [ReceiptTransaction]
    /// `pending_renewal_info`.
    public var pendingRenewalInfo: [PendingRenewalInfo]
    /// `is-retryable` for statuses 21100–21199.
    public var isRetryable: Bool?

    /// The transactions that describe subscription state: `latest_receipt_info` when Apple sent it (it is more
    /// recent than the receipt), else `latest_expired_receipt_info`, else the receipt's own transactions.
    public var subscriptionTransactions: [ReceiptTransaction] {
        if !latestReceiptInfo.isEmpty { return latestReceiptInfo }
        if !latestExpiredReceiptInfo.isEmpty { return latestExpiredReceiptInfo }
        return receipt?.inApp ?? []
    }
}

/// The `receipt` object of a verifyReceipt answer, in either of Apple's two shapes.
public struct VerifyReceiptReceipt: Sendable {
    /// Which shape Apple sent.
    public enum Style: Sendable, Hashable {
        /// iOS 7+ app receipt: app fields plus an `in_app` array.
        case appReceipt
        /// iOS 6 transaction receipt: one transaction's fields flat in the object (`bid`, `bvrs`, `transaction_id`).
        case transactionReceipt
    }

    /// Which shape Apple sent.
    public var style: Style
    /// `bundle_id` (iOS 7+) or `bid` (iOS 6).
    public var bundleID: String?
    /// `application_version` or `bvrs`.
    public var applicationVersion: String?
    /// `original_application_version`.
    public var originalApplicationVersion: String?
    /// `receipt_type` (`Production`, `ProductionSandbox`…).
    public var receiptType: String?
    /// `receipt_creation_date_ms`.
    public var creationDate: Date?
    /// `request_date_ms`.
    public var requestDate: Date?
    /// `original_purchase_date_ms` of the app.
    public var originalPurchaseDate: Date?
    /// `expiration_date` of the receipt (volume purchase program).
    public var expirationDate: Date?
    /// `adam_id` / `app_item_id` (0 in sandbox).
    public var appItemID: Int64?
    /// `in_app` (iOS 7+), or the one transaction of an iOS 6 receipt.
    public var inApp: [ReceiptTransaction]
}

/// One in-app purchase transaction as verifyReceipt reports it.
public struct ReceiptTransaction: Sendable, Hashable {
    /// `product_id`.
    public var productID: String
    /// `transaction_id`.
    public var transactionID: String
    /// `original_transaction_id`.
    public var originalTransactionID: String?
    /// `quantity`.
    public var quantity: Int?
    /// `app_account_token`: the UUID the app set at purchase (StoreKit's `appAccountToken`), when it set one.
    public var appAccountToken: String?
    /// `purchase_date_ms`.
    public var purchaseDate: Date?
    /// `original_purchase_date_ms`.
    public var originalPurchaseDate: Date?
    /// `expires_date_ms`, or the iOS 6 `expires_date` in milliseconds.
    public var expiresDate: Date?
    /// `cancellation_date_ms` (refund or revocation).
    public var cancellationDate: Date?
    /// `cancellation_reason` (0 other, 1 app issue).
    public var cancellationReason: Int?
    /// `web_order_line_item_id`.
    public var webOrderLineItemID: String?
    /// `is_trial_period`.
    public var isTrialPeriod: Bool?
    /// `is_in_intro_offer_period`.
    public var isInIntroOfferPeriod: Bool?
    /// `is_upgraded`.
    public var isUpgraded: Bool?
    /// `promotional_offer_id`.
    public var promotionalOfferID: String?
    /// `subscription_group_identifier`.
    public var subscriptionGroupIdentifier: String?
    /// `in_app_ownership_type` (`PURCHASED`, `FAMILY_SHARED`).
    public var inAppOwnershipType: String?
    /// `bid`, present on iOS 6 transactions.
    public var bundleID: String?
}

/// One entry of `pending_renewal_info`.
public struct PendingRenewalInfo: Sendable, Hashable {
    /// `original_transaction_id`.
    public var originalTransactionID: String?
    /// `product_id`.
    public var productID: String?
    /// `auto_renew_product_id`.
    public var autoRenewProductID: String?
    /// `auto_renew_status` (true: will renew).
    public var autoRenewStatus: Bool?
    /// `expiration_intent` (1 cancelled, 2 billing error…).
    public var expirationIntent: Int?
    /// `is_in_billing_retry_period`.
    public var isInBillingRetryPeriod: Bool?
    /// `grace_period_expires_date_ms`.
    public var gracePeriodExpiresDate: Date?
    /// `price_consent_status`.
    public var priceConsentStatus: Int?
}

// MARK: - Parsing

extension VerifyReceiptResponse {
    /// Parses a verifyReceipt body. Throws ``AppleClientError`` (`malformedResponse`) when the body is not a JSON
    /// object with an integer `status`, or when a part Apple documents as an object or array has another shape.
    /// The error names the field, never its value.
    static func parse(_ body: [UInt8], answeredBy: AppleEnvironment) throws -> VerifyReceiptResponse {
        guard let json = LenientJSON.parse(body, skipping: unreadMember), json.objectValue != nil else {
            throw malformed("the body is not a JSON object")
        }
        guard let statusCode = json["status"]?.intValue else {
            throw malformed("`status` is missing or not an integer")
        }
        let status = VerifyReceiptStatus(code: statusCode)
        let environment = json["environment"]?.stringValue.flatMap(AppleEnvironment.init(appleName:)) ?? answeredBy

        var receipt: VerifyReceiptReceipt?
        if let receiptJSON = json["receipt"] {
            guard let object = receiptJSON.objectValue else { throw malformed("`receipt` is not an object") }
            receipt = try VerifyReceiptReceipt(object, path: "receipt")
        } else if status == .valid {
            throw malformed("status 0 without `receipt`")
        }
        return VerifyReceiptResponse(
            status: status,
            environment: environment,
            answeredBy: answeredBy,
            receipt: receipt,
            latestReceiptInfo: try transactions(json["latest_receipt_info"], path: "latest_receipt_info"),
            latestExpiredReceiptInfo: try transactions(
                json["latest_expired_receipt_info"], path: "latest_expired_receipt_info"),
            pendingRenewalInfo: try renewals(json["pending_renewal_info"]),
            isRetryable: (json["is-retryable"] ?? json["is_retryable"])?.boolValue)
    }

    /// Members this parser never reads, so their values are not built: the Pacific-time twins of every date
    /// (`…_pst`), and `latest_receipt`, which repeats the whole base64 receipt (kilobytes) in subscription answers.
    private static let unreadMember: @Sendable (String) -> Bool = { key in
        key.utf8.count > 4 && (key.hasSuffix("_pst") || key == "latest_receipt")
    }

    /// An array of transaction objects, or (iOS 6) a single object.
    private static func transactions(_ json: LenientJSON?, path: String) throws -> [ReceiptTransaction] {
        switch json {
        case nil: return []
        case .object(let members): return [try ReceiptTransaction(members, path: path)]
        case .array(let items):
            return try items.enumerated().map { index, item in
                guard let members = item.objectValue else { throw malformed("`\(path)[\(index)]` is not an object") }
                return try ReceiptTransaction(members, path: "\(path)[\(index)]")
            }
        default: throw malformed("`\(path)` is neither an array nor an object")
        }
    }

    private static func renewals(_ json: LenientJSON?) throws -> [PendingRenewalInfo] {
        guard let json else { return [] }
        guard case .array(let items) = json else { throw malformed("`pending_renewal_info` is not an array") }
        return try items.enumerated().map { index, item in
            guard let members = item.objectValue else {
                throw malformed("`pending_renewal_info[\(index)]` is not an object")
            }
            return PendingRenewalInfo(members)
        }
    }
}

func malformed(_ detail: String, file: String = #fileID, line: Int = #line) -> AppleClientError {
    AppleClientError(code: .malformedResponse, detail: detail, file: file, line: line)
}

extension VerifyReceiptReceipt {
    init(_ object: [String: LenientJSON], path: String) throws {
        let json = LenientJSON.object(object)
        let isTransactionReceipt = json["in_app"] == nil && (json["bid"] != nil || json["transaction_id"] != nil)
        if isTransactionReceipt {
            style = .transactionReceipt
            bundleID = json["bid"]?.stringValue
            applicationVersion = json["bvrs"]?.stringValue
            inApp = [try ReceiptTransaction(object, path: path)]
        } else {
            style = .appReceipt
            bundleID = json["bundle_id"]?.stringValue
            applicationVersion = json["application_version"]?.stringValue
            switch json["in_app"] {
            case nil: inApp = []
            case .array(let items):
                inApp = try items.enumerated().map { index, item in
                    guard let members = item.objectValue else {
                        throw malformed("`\(path).in_app[\(index)]` is not an object")
                    }
                    return try ReceiptTransaction(members, path: "\(path).in_app[\(index)]")
                }
            default: throw malformed("`\(path).in_app` is not an array")
            }
        }
        originalApplicationVersion = json["original_application_version"]?.stringValue
        receiptType = json["receipt_type"]?.stringValue
        creationDate = json.date(milliseconds: "receipt_creation_date_ms", text: "receipt_creation_date")
        requestDate = json.date(milliseconds: "request_date_ms", text: "request_date")
        originalPurchaseDate =
            isTransactionReceipt
            ? nil : json.date(milliseconds: "original_purchase_date_ms", text: "original_purchase_date")
        expirationDate = json.date(milliseconds: "expiration_date_ms", text: "expiration_date")
        appItemID = (json["adam_id"] ?? json["app_item_id"])?.int64Value
    }
}

extension ReceiptTransaction {
    init(_ object: [String: LenientJSON], path: String) throws {
        let json = LenientJSON.object(object)
        guard let transactionID = json["transaction_id"]?.stringValue else {
            throw malformed("`\(path).transaction_id` is missing")
        }
        guard let productID = json["product_id"]?.stringValue else {
            throw malformed("`\(path).product_id` is missing")
        }
        self.productID = productID
        self.transactionID = transactionID
        originalTransactionID = json["original_transaction_id"]?.stringValue
        quantity = json["quantity"]?.intValue
        appAccountToken = json["app_account_token"]?.stringValue
        purchaseDate = json.date(milliseconds: "purchase_date_ms", text: "purchase_date")
        originalPurchaseDate = json.date(milliseconds: "original_purchase_date_ms", text: "original_purchase_date")
        // iOS 6 sends `expires_date` itself in milliseconds, with `expires_date_formatted` as text.
        expiresDate =
            json.date(milliseconds: "expires_date_ms", text: "expires_date")
            ?? json["expires_date"]?.millisecondsDate
            ?? json["expires_date_formatted"]?.textDate
        cancellationDate = json.date(milliseconds: "cancellation_date_ms", text: "cancellation_date")
        cancellationReason = json["cancellation_reason"]?.intValue
        webOrderLineItemID = json["web_order_line_item_id"]?.stringValue
        isTrialPeriod = json["is_trial_period"]?.boolValue
        isInIntroOfferPeriod = json["is_in_intro_offer_period"]?.boolValue
        isUpgraded = json["is_upgraded"]?.boolValue
        promotionalOfferID = json["promotional_offer_id"]?.stringValue
        subscriptionGroupIdentifier = json["subscription_group_identifier"]?.stringValue
        inAppOwnershipType = json["in_app_ownership_type"]?.stringValue
        bundleID = json["bid"]?.stringValue
    }
}

extension PendingRenewalInfo {
    init(_ object: [String: LenientJSON]) {
        let json = LenientJSON.object(object)
        originalTransactionID = json["original_transaction_id"]?.stringValue
        productID = json["product_id"]?.stringValue
        autoRenewProductID = json["auto_renew_product_id"]?.stringValue
        autoRenewStatus = json["auto_renew_status"]?.boolValue
        expirationIntent = json["expiration_intent"]?.intValue
        isInBillingRetryPeriod = json["is_in_billing_retry_period"]?.boolValue
        gracePeriodExpiresDate = json.date(
            milliseconds: "grace_period_expires_date_ms", text: "grace_period_expires_date")
        priceConsentStatus = json["price_consent_status"]?.intValue
    }
}

extension LenientJSON {
    /// A date from the `…_ms` field, else from the text field (Apple's `yyyy-MM-dd HH:mm:ss Etc/GMT`), else from
    /// the text field holding milliseconds (iOS 6 style receipts write `expires_date` and friends that way).
    func date(milliseconds: String, text: String) -> Date? {
        self[milliseconds]?.millisecondsDate ?? self[text]?.textDate ?? self[text]?.millisecondsDate
    }
}
