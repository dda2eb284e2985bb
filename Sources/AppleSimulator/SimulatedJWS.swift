import Crypto
import Foundation
import Messages

/// StoreKit 2 signed data as Apple sends it: a compact JWS, ES256, header `{"alg":"ES256","x5c":[leaf,
/// intermediate, root]}` (standard base64 DER certificates), payload field names as in Apple's
/// `JWSTransactionDecodedPayload` and `JWSRenewalInfoDecodedPayload`.
package enum SimulatedJWS {
    struct Header: Codable {
        var alg = "ES256"
        var x5c: [String]
    }

    /// `JWSTransactionDecodedPayload`.
    struct TransactionPayload: Codable, Equatable {
        var transactionId: String
        var originalTransactionId: String
        var webOrderLineItemId: String?
        var bundleId: String
        var productId: String
        var subscriptionGroupIdentifier: String?
        var purchaseDate: Int64
        var originalPurchaseDate: Int64
        var expiresDate: Int64?
        var quantity: Int
        var type: String
        var inAppOwnershipType: String
        var signedDate: Int64
        var revocationReason: Int?
        var revocationDate: Int64?
        var revocationType: String?
        var revocationPercentage: Int?
        var isUpgraded: Bool?
        var environment: String
        var transactionReason: String
        var storefront: String
        var storefrontId: String
        var price: Int
        var currency: String
        var appAccountToken: String?
    }

    /// `JWSRenewalInfoDecodedPayload`.
    struct RenewalInfoPayload: Codable, Equatable {
        var originalTransactionId: String
        var autoRenewProductId: String
        var productId: String
        var autoRenewStatus: Int
        var signedDate: Int64
        var environment: String
        var recentSubscriptionStartDate: Int64
        var renewalDate: Int64?
        var expirationIntent: Int?
        var isInBillingRetryPeriod: Bool?
        var gracePeriodExpiresDate: Int64?
        var priceIncreaseStatus: Int?
        var appAccountToken: String?
    }

    /// The subscription group every simulated subscription belongs to.
    static let subscriptionGroup = "SIM00001"

    static func transactionPayload(_ transaction: SimulatedTransaction, signedDateMs: Int64) -> TransactionPayload {
        TransactionPayload(
            transactionId: transaction.transactionId,
            originalTransactionId: transaction.originalTransactionId,
            webOrderLineItemId: transaction.webOrderLineItemId,
            bundleId: transaction.bundleId,
            productId: transaction.productId,
            subscriptionGroupIdentifier: transaction.isSubscription ? subscriptionGroup : nil,
            purchaseDate: transaction.purchaseDateMs,
            originalPurchaseDate: transaction.originalPurchaseDateMs,
            expiresDate: transaction.expiresDateMs,
            quantity: transaction.quantity,
            type: transaction.productType,
            inAppOwnershipType: transaction.inAppOwnershipType ?? "PURCHASED",
            signedDate: signedDateMs,
            revocationReason: transaction.revocationDateMs == nil ? nil : (transaction.revocationReason ?? 0),
            revocationDate: transaction.revocationDateMs,
            revocationType: transaction.revocationDateMs == nil ? nil : (transaction.revocationType ?? "REFUND_FULL"),
            revocationPercentage: transaction.revocationDateMs == nil ? nil : transaction.revocationPercentage,
            isUpgraded: transaction.isSubscription ? false : nil,
            environment: transaction.environment.rawValue,
            transactionReason: transaction.transactionId == transaction.originalTransactionId ? "PURCHASE" : "RENEWAL",
            storefront: transaction.storefront ?? "USA",
            storefrontId: "143441",
            price: 990,
            currency: "USD",
            appAccountToken: transaction.appAccountToken)
    }

    static func signTransaction(_ transaction: SimulatedTransaction, pki: SimulatorPKI, nowMs: Int64) throws -> String {
        try sign(transactionPayload(transaction, signedDateMs: nowMs), pki: pki)
    }

    /// Renewal info for the latest transaction of a subscription family.
    static func signRenewalInfo(
        latest: SimulatedTransaction, firstPurchaseMs: Int64, pki: SimulatorPKI, nowMs: Int64
    ) throws -> String {
        let inBillingRetry = latest.inBillingRetry(nowMs: nowMs) && latest.revocationDateMs == nil
        let expired =
            !inBillingRetry && ((latest.expiresDateMs ?? .max) <= nowMs || latest.revocationDateMs != nil)
        let autoRenewOff = latest.autoRenewStatus == 0
        // Expiration intent: 1 the customer cancelled, 2 a billing error (Apple's codes).
        let intent: Int? = expired ? (latest.inBillingRetry(nowMs: nowMs) ? 2 : 1) : nil
        let payload = RenewalInfoPayload(
            originalTransactionId: latest.originalTransactionId,
            autoRenewProductId: latest.productId,
            productId: latest.productId,
            autoRenewStatus: expired || autoRenewOff ? 0 : 1,
            signedDate: nowMs,
            environment: latest.environment.rawValue,
            recentSubscriptionStartDate: firstPurchaseMs,
            renewalDate: latest.expiresDateMs,
            expirationIntent: inBillingRetry ? 2 : intent,
            isInBillingRetryPeriod: latest.isSubscription ? inBillingRetry : nil,
            gracePeriodExpiresDate: inBillingRetry ? latest.gracePeriodExpiresDateMs : nil,
            priceIncreaseStatus: latest.priceIncreaseStatus,
            appAccountToken: latest.appAccountToken)
        return try sign(payload, pki: pki)
    }

    static func sign<Payload: Encodable>(_ payload: Payload, pki: SimulatorPKI) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let header = Base64URL.encode(try encoder.encode(Header(x5c: pki.x5c)))
        let body = Base64URL.encode(try encoder.encode(payload))
        let signingInput = header + "." + body
        let signature = try pki.ecLeafKey.signature(for: Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature.rawRepresentation)
    }
}
