import Foundation
import Messages

/// A verified `JWSTransactionDecodedPayload`. Fields Apple may omit are optional; unknown fields are ignored.
public struct SignedTransaction: Sendable, Hashable {
    public var transactionID: String
    public var originalTransactionID: String?
    public var webOrderLineItemID: String?
    public var bundleID: String?
    public var productID: String?
    public var subscriptionGroupIdentifier: String?
    public var purchaseDate: Date?
    public var originalPurchaseDate: Date?
    public var expiresDate: Date?
    public var quantity: Int?
    /// `type`: `Auto-Renewable Subscription`, `Consumable`, …
    public var type: String?
    public var inAppOwnershipType: String?
    public var signedDate: Date?
    public var revocationReason: Int?
    public var revocationDate: Date?
    /// `revocationType`: `REFUND_FULL`, `REFUND_PRORATED` or `FAMILY_REVOKE` (Server API 1.19).
    public var revocationType: String?
    /// `revocationPercentage`: the share refunded, in milliunits (25000 is 25 %).
    public var revocationPercentage: Int?
    public var isUpgraded: Bool?
    public var offerType: Int?
    public var environment: AppleEnvironment?
    public var transactionReason: String?
    public var storefront: String?
    public var appAccountToken: String?
}

/// A verified `JWSRenewalInfoDecodedPayload`.
public struct SignedRenewalInfo: Sendable, Hashable {
    public var originalTransactionID: String?
    public var productID: String?
    public var autoRenewProductID: String?
    /// `autoRenewStatus`: 1 on, 0 off.
    public var autoRenewStatus: Int?
    public var expirationIntent: Int?
    public var isInBillingRetryPeriod: Bool?
    public var gracePeriodExpiresDate: Date?
    public var renewalDate: Date?
    public var signedDate: Date?
    public var environment: AppleEnvironment?
}

/// Answer of Get Transaction Info.
public struct TransactionInfoAnswer: Sendable {
    /// The verified transaction.
    public var transaction: SignedTransaction
    /// The environment whose endpoint answered.
    public var answeredBy: AppleEnvironment
}

/// One page of Get Transaction History v2.
public struct TransactionHistoryPage: Sendable {
    /// Pass this as `revision` to get the next page.
    public var revision: String?
    /// Whether more pages follow.
    public var hasMore: Bool
    public var bundleID: String?
    public var appAppleID: Int64?
    /// The body's `environment`.
    public var environment: AppleEnvironment?
    /// The environment whose endpoint answered.
    public var answeredBy: AppleEnvironment
    /// The verified transactions of this page.
    public var transactions: [SignedTransaction]
}

/// Answer of Get All Subscription Statuses.
public struct SubscriptionStatusesAnswer: Sendable {
    /// One subscription group's latest transactions.
    public struct Group: Sendable {
        public var subscriptionGroupIdentifier: String?
        public var lastTransactions: [LastTransaction]
    }

    /// The latest transaction of one original transaction in a group.
    public struct LastTransaction: Sendable {
        /// 1 active, 2 expired, 3 billing retry, 4 grace period, 5 revoked.
        public var status: Int?
        public var originalTransactionID: String?
        public var transaction: SignedTransaction?
        public var renewalInfo: SignedRenewalInfo?
    }

    public var environment: AppleEnvironment?
    public var bundleID: String?
    public var appAppleID: Int64?
    public var groups: [Group]
    /// The environment whose endpoint answered.
    public var answeredBy: AppleEnvironment
}

extension SignedTransaction {
    init(payload json: LenientJSON) throws {
        guard json.objectValue != nil else { throw malformed("the transaction payload is not an object") }
        guard let transactionID = json["transactionId"]?.stringValue else {
            throw malformed("the transaction payload has no `transactionId`")
        }
        self.transactionID = transactionID
        originalTransactionID = json["originalTransactionId"]?.stringValue
        webOrderLineItemID = json["webOrderLineItemId"]?.stringValue
        bundleID = json["bundleId"]?.stringValue
        productID = json["productId"]?.stringValue
        subscriptionGroupIdentifier = json["subscriptionGroupIdentifier"]?.stringValue
        purchaseDate = json["purchaseDate"]?.millisecondsDate
        originalPurchaseDate = json["originalPurchaseDate"]?.millisecondsDate
        expiresDate = json["expiresDate"]?.millisecondsDate
        quantity = json["quantity"]?.intValue
        type = json["type"]?.stringValue
        inAppOwnershipType = json["inAppOwnershipType"]?.stringValue
        signedDate = json["signedDate"]?.millisecondsDate
        revocationReason = json["revocationReason"]?.intValue
        revocationDate = json["revocationDate"]?.millisecondsDate
        revocationType = json["revocationType"]?.stringValue
        revocationPercentage = json["revocationPercentage"]?.intValue
        isUpgraded = json["isUpgraded"]?.boolValue
        offerType = json["offerType"]?.intValue
        environment = json["environment"]?.stringValue.flatMap(AppleEnvironment.init(appleName:))
        transactionReason = json["transactionReason"]?.stringValue
        storefront = json["storefront"]?.stringValue
        appAccountToken = json["appAccountToken"]?.stringValue
    }
}

extension SignedRenewalInfo {
    init(payload json: LenientJSON) throws {
        guard json.objectValue != nil else { throw malformed("the renewal info payload is not an object") }
        originalTransactionID = json["originalTransactionId"]?.stringValue
        productID = json["productId"]?.stringValue
        autoRenewProductID = json["autoRenewProductId"]?.stringValue
        autoRenewStatus = json["autoRenewStatus"]?.intValue
        expirationIntent = json["expirationIntent"]?.intValue
        isInBillingRetryPeriod = json["isInBillingRetryPeriod"]?.boolValue
        gracePeriodExpiresDate = json["gracePeriodExpiresDate"]?.millisecondsDate
        renewalDate = json["renewalDate"]?.millisecondsDate
        signedDate = json["signedDate"]?.millisecondsDate
        environment = json["environment"]?.stringValue.flatMap(AppleEnvironment.init(appleName:))
    }
}
