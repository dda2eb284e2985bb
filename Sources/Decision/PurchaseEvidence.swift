import Foundation
import Messages

/// What the worker learned about a job's proof, in a form the decision rules understand without depending on
/// how it was learned. The pipeline maps the local analysis (Receipts) and Apple's answer (App Store clients)
/// into this model; the rules never parse a receipt and never see one.
public struct PurchaseEvidence: Sendable, Hashable {
    /// Which stage produced this evidence.
    public enum Source: String, Sendable, Hashable, CaseIterable {
        /// Local checks without cryptography (format, bundle id, product id read from the receipt).
        case prefilter
        /// Local signature verification (JWS chain, PKCS#7 signature).
        case signature
        /// Apple's answer (verifyReceipt or the App Store Server API).
        case apple
    }

    /// Whether the proof is known to come from Apple.
    public enum Authenticity: String, Sendable, Hashable, CaseIterable {
        /// Verified: a valid Apple signature, or Apple answered with a valid status.
        case authentic
        /// Known not to be Apple's: an invalid signature, or Apple's 21003.
        case notAuthenticated
        /// Not known yet: the content was read locally but not verified.
        case unknown
    }

    public var source: Source
    public var authenticity: Authenticity
    /// When known; `nil` is treated as production. The pipeline maps local testing to `xcode`.
    public var environment: AppleEnvironment?
    /// The bundle id the proof names, when read.
    public var bundleID: String?
    /// Every transaction the proof holds (for receipts: `in_app` merged with `latest_receipt_info`), any order.
    public var transactions: [PurchaseTransaction]
    /// A precise rejection found before any ledger rule applies (malformed, wrong_bundle, unknown_product,
    /// not_authenticated, apple_rejected…). When set, the verdict is `rejected` with this reason.
    public var rejection: Verdict.Reason?
    /// Apple's `status` (verifyReceipt) or HTTP status (Server API), when Apple answered.
    public var appleStatus: Int?
    /// Apple could not be reached before the job's deadline: the evidence is local only and final.
    public var appleUnavailable: Bool
    /// For App Store Server Notifications V2 jobs: what the notification says.
    public var notification: SubscriptionNotification?

    public init(
        source: Source, authenticity: Authenticity, environment: AppleEnvironment? = nil, bundleID: String? = nil,
        transactions: [PurchaseTransaction] = [], rejection: Verdict.Reason? = nil, appleStatus: Int? = nil,
        appleUnavailable: Bool = false, notification: SubscriptionNotification? = nil
    ) {
        self.source = source
        self.authenticity = authenticity
        self.environment = environment
        self.bundleID = bundleID
        self.transactions = transactions
        self.rejection = rejection
        self.appleStatus = appleStatus
        self.appleUnavailable = appleUnavailable
        self.notification = notification
    }
}

/// One transaction as a proof or Apple describes it.
public struct PurchaseTransaction: Sendable, Hashable {
    public var transactionID: String
    /// Shared by every renewal of one subscription; `nil` means the transaction is its own original.
    public var originalTransactionID: String?
    public var productID: String
    /// When the proof says (JWS `type`); otherwise the catalog decides, then the presence of an expiry date.
    public var productType: ProductType?
    public var purchaseDate: Date?
    public var expiresDate: Date?
    /// `cancellation_date` (verifyReceipt) or `revocationDate` (JWS): a refund or a revocation.
    public var revokedAt: Date?
    /// The end of the billing grace period, while Apple retries a failed renewal with access kept.
    public var gracePeriodExpiresDate: Date?
    /// Apple is retrying a failed renewal (without a grace period the entitlement has ended).
    public var isInBillingRetry: Bool
    public var quantity: Int?

    public init(
        transactionID: String, originalTransactionID: String? = nil, productID: String,
        productType: ProductType? = nil, purchaseDate: Date? = nil, expiresDate: Date? = nil,
        revokedAt: Date? = nil, gracePeriodExpiresDate: Date? = nil, isInBillingRetry: Bool = false,
        quantity: Int? = nil
    ) {
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.productType = productType
        self.purchaseDate = purchaseDate
        self.expiresDate = expiresDate
        self.revokedAt = revokedAt
        self.gracePeriodExpiresDate = gracePeriodExpiresDate
        self.isInBillingRetry = isInBillingRetry
        self.quantity = quantity
    }

    /// The original transaction id, or this transaction's own id when it is the original.
    public var subscriptionKey: String { originalTransactionID ?? transactionID }
}

/// What an App Store Server Notification V2 reports, reduced to what changes an entitlement.
public struct SubscriptionNotification: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// `DID_RENEW`, `SUBSCRIBED` (resubscribe), `DID_RECOVER`: a new period, a new transaction.
        case renewed
        /// `EXPIRED`: the subscription ended.
        case expired
        /// `DID_FAIL_TO_RENEW`: billing retry; with `gracePeriodExpiresDate` access continues until then.
        case renewalFailed = "renewal_failed"
        /// `GRACE_PERIOD_EXPIRED`: billing retry continues but access ends.
        case gracePeriodExpired = "grace_period_expired"
        /// `REFUND`: Apple refunded the transaction.
        case refunded
        /// `REVOKE`: Family Sharing access withdrawn.
        case revoked
        /// Anything else (renewal preference or status changes): re-states the entitlement, changes nothing.
        case other
    }

    public var kind: Kind
    /// The notification's `notificationType` as Apple wrote it, for logs.
    public var appleType: String?

    public init(kind: Kind, appleType: String? = nil) {
        self.kind = kind
        self.appleType = appleType
    }
}
