import Foundation

/// A StoreKit 2 / App Store Server Notifications V2 JWS in compact form: `header.payload.signature`.
package struct JWS {
    /// The header segment exactly as received (base64url): the chain cache key, so a warm cache skips decoding it.
    var headerSegment: ArraySlice<UInt8>
    /// `header.payload` as received: the bytes the signature covers.
    package var signingInput: ArraySlice<UInt8>
    var payload: JWSPayload
    /// The raw `r || s` ES256 signature.
    package var signature: [UInt8]

    package struct FormatError: Error {
        var reason: String
    }

    /// The header fields Apple uses.
    package struct Header: Decodable {
        var alg: String?
        package var x5c: [String]?
    }

    package init(text: [UInt8]) throws(FormatError) {
        var dots: [Int] = []
        for (index, byte) in text.enumerated() where byte == UInt8(ascii: ".") {
            dots.append(index)
            guard dots.count <= 2 else { throw FormatError(reason: "JWS has more than three segments") }
        }
        guard dots.count == 2 else { throw FormatError(reason: "JWS must have three segments") }
        headerSegment = text[0..<dots[0]]
        signingInput = text[0..<dots[1]]
        guard let payloadBytes = Base64.decodeURL(text[(dots[0] + 1)..<dots[1]]) else {
            throw FormatError(reason: "JWS payload is not base64url")
        }
        guard let signature = Base64.decodeURL(text[(dots[1] + 1)...]) else {
            throw FormatError(reason: "JWS signature is not base64url")
        }
        self.signature = signature
        do {
            payload = try JSONDecoder().decode(JWSPayload.self, from: Data(payloadBytes))
        } catch {
            throw FormatError(reason: "JWS payload is not the JSON of an Apple signed object")
        }
    }

    /// Decodes the header (only on a chain cache miss).
    package func header() throws(FormatError) -> Header {
        guard let bytes = Base64.decodeURL(headerSegment) else {
            throw FormatError(reason: "JWS header is not base64url")
        }
        do {
            return try JSONDecoder().decode(Header.self, from: Data(bytes))
        } catch {
            throw FormatError(reason: "JWS header is not JSON")
        }
    }

    /// The kind of signed object, from the payload's keys (renewal info is the one without a bundle id).
    var format: ReceiptFormat {
        if payload.notificationType != nil { return .notification }
        if payload.receiptType != nil || payload.applicationVersion != nil { return .appTransaction }
        if payload.transactionId != nil || payload.bundleId != nil { return .signedTransaction }
        return .signedRenewalInfo
    }
}

/// The union of the fields of Apple's signed payloads (transaction, renewal info, notification, app transaction).
/// Every field is optional: which are present decides the kind of object.
struct JWSPayload: Decodable {
    // Transaction
    var transactionId: String?
    var originalTransactionId: String?
    var webOrderLineItemId: String?
    var bundleId: String?
    var productId: String?
    var purchaseDate: Double?
    var originalPurchaseDate: Double?
    var expiresDate: Double?
    var quantity: Int?
    var appAccountToken: String?
    var type: String?
    var revocationDate: Double?
    var revocationReason: Int?
    var revocationType: String?
    var revocationPercentage: Int?
    var inAppOwnershipType: String?
    /// Read leniently: a storefront of another shape is not known, and never makes the rest of the payload unreadable.
    var storefront: LenientText?
    var signedDate: Double?
    var environment: String?
    // Renewal info
    var autoRenewProductId: String?
    var autoRenewStatus: Int?
    var expirationIntent: Int?
    var renewalDate: Double?
    var isInBillingRetryPeriod: Bool?
    var gracePeriodExpiresDate: Double?
    var priceIncreaseStatus: Int?
    // App transaction
    var receiptType: String?
    var applicationVersion: String?
    var originalApplicationVersion: String?
    var receiptCreationDate: Double?
    // Notification
    var notificationType: String?
    var subtype: String?
    var notificationUUID: String?
    var data: NotificationData?
    /// `RENEWAL_EXTENSION` / `SUMMARY`: the outcome of a mass extension request, instead of `data`.
    var summary: NotificationSummary?
    /// `EXTERNAL_PURCHASE_TOKEN`: instead of `data`.
    var externalPurchaseToken: ExternalPurchaseToken?
    /// Notifications about the app rather than a purchase (`RESCIND_CONSENT`): instead of `data`.
    var appData: AppData?

    struct NotificationData: Decodable {
        var appAppleId: Int64?
        var bundleId: String?
        var environment: String?
        var signedTransactionInfo: String?
        var signedRenewalInfo: String?
    }

    struct NotificationSummary: Decodable {
        var requestIdentifier: String?
        var environment: String?
        var appAppleId: Int64?
        var bundleId: String?
        var productId: String?
        var succeededCount: Int64?
        var failedCount: Int64?
    }

    struct ExternalPurchaseToken: Decodable {
        var externalPurchaseId: String?
        var tokenCreationDate: Double?
        var appAppleId: Int64?
        var bundleId: String?
    }

    struct AppData: Decodable {
        var appAppleId: Int64?
        var bundleId: String?
        var environment: String?
        var signedAppTransactionInfo: String?
    }

    /// How many of `data`, `summary`, `externalPurchaseToken` and `appData` the notification carries (Apple sends
    /// exactly one, or none for `TEST`).
    var notificationBodyCount: Int {
        [data != nil, summary != nil, externalPurchaseToken != nil, appData != nil].filter { $0 }.count
    }

    /// The bundle id, from wherever the payload's kind puts it.
    var anyBundleID: String? {
        bundleId ?? data?.bundleId ?? summary?.bundleId ?? appData?.bundleId ?? externalPurchaseToken?.bundleId
    }

    /// The environment, from wherever the payload's kind puts it. An external purchase token names none.
    var anyEnvironment: String? {
        environment ?? receiptType ?? data?.environment ?? summary?.environment ?? appData?.environment
    }

    /// A notification's `appAppleId` (absent in sandbox, per Apple).
    var appAppleID: Int64? {
        data?.appAppleId ?? summary?.appAppleId ?? appData?.appAppleId ?? externalPurchaseToken?.appAppleId
    }

    static func date(_ milliseconds: Double?) -> Date? {
        milliseconds.map { Date(timeIntervalSince1970: $0 / 1000) }
    }

    var transaction: ReceiptTransaction? {
        guard let transactionId else { return nil }
        return ReceiptTransaction(
            transactionID: transactionId, originalTransactionID: originalTransactionId, productID: productId,
            purchaseDate: Self.date(purchaseDate), originalPurchaseDate: Self.date(originalPurchaseDate),
            expiresDate: Self.date(expiresDate), revocationDate: Self.date(revocationDate),
            revocationReason: revocationReason, quantity: quantity, webOrderLineItemID: webOrderLineItemId,
            productType: type, appAccountToken: appAccountToken, revocationType: revocationType,
            revocationPercentage: revocationPercentage, inAppOwnershipType: inAppOwnershipType,
            storefront: storefront?.value)
    }

    var renewalInfo: RenewalInfo {
        RenewalInfo(
            originalTransactionID: originalTransactionId, productID: productId, autoRenewProductID: autoRenewProductId,
            autoRenewStatus: autoRenewStatus, expirationIntent: expirationIntent, renewalDate: Self.date(renewalDate),
            isInBillingRetryPeriod: isInBillingRetryPeriod,
            gracePeriodExpiresDate: Self.date(gracePeriodExpiresDate), priceIncreaseStatus: priceIncreaseStatus)
    }
}

/// A member read as text when it is text, else as absent (a number, an object): for a fact whose shape alone must not
/// make a signed payload unreadable.
struct LenientText: Decodable {
    var value: String?

    init(from decoder: any Decoder) throws {
        value = try? decoder.singleValueContainer().decode(String.self)
    }
}
