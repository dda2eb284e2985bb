import Foundation
import Messages

/// What the worker learned about a job's proof, in a form the decision rules understand without depending on
/// how it was learned. ``EvidenceMapping`` maps the facts the store adapters report (``ProofFacts`` read locally, a
/// ``StoreAnswer``) into this model; the rules never parse a receipt and never see one.
public struct PurchaseEvidence: Sendable, Hashable {
    /// Which stage produced this evidence.
    public enum Source: String, Sendable, Hashable, CaseIterable {
        /// Local checks without cryptography (format, bundle id, product id read from the receipt).
        case prefilter
        /// Local signature verification (JWS chain, PKCS#7 signature).
        case signature
        /// The store's answer: Apple's (verifyReceipt or the App Store Server API) or Google Play's (the Developer
        /// API); ``PurchaseEvidence/store`` says which.
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
    /// The store of the proof: whose apps and products in the catalog the rules check. Default: the App Store.
    public var store: Store
    /// When known; `nil` is treated as production. ``EvidenceMapping`` maps local testing to `xcode`.
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
    /// For Google Play notification jobs: why Google told us and when the purchase was read again.
    public var playNotification: PlayNotification? {
        get { playNotificationBox?.value }
        set { playNotificationBox = newValue.map(IndirectValue.init) }
    }
    private var playNotificationBox: IndirectValue<PlayNotification>?

    public init(
        source: Source, authenticity: Authenticity, environment: AppleEnvironment? = nil, bundleID: String? = nil,
        transactions: [PurchaseTransaction] = [], rejection: Verdict.Reason? = nil, appleStatus: Int? = nil,
        appleUnavailable: Bool = false, notification: SubscriptionNotification? = nil, store: Store = .appStore
    ) {
        self.source = source
        self.store = store
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
    /// Whether ``isInBillingRetry`` and ``gracePeriodExpiresDate`` come from Apple's renewal info (a notification's
    /// `signedRenewalInfo`, verifyReceipt's `pending_renewal_info`): only then does a verdict state them.
    public var hasRenewalInfo: Bool
    public var quantity: Int?
    /// The account the app tagged the purchase with when it bought (lower case), when the proof or the store shows
    /// one: the App Store's `appAccountToken`, Google Play's `obfuscatedExternalAccountId`.
    public var appAccountToken: String?
    /// The subscription this one replaced (Google Play's `linkedPurchaseToken`: an upgrade, a downgrade or a
    /// resubscription): its key (``subscriptionKey``) in the ledger. Its owner alone may take this subscription.
    public var linkedSubscriptionKey: String?
    /// Google Play's order id, when Google gave one (the verdict's `order_id`).
    public var orderID: String?
    /// Google Play's purchase token (the verdict's `purchase_token`).
    public var purchaseToken: String?
    /// Whether Google Play's subscription is paused (`SUBSCRIPTION_STATE_PAUSED`), stated with the renewal info
    /// (``hasRenewalInfo``); nil for the App Store's, whose subscriptions do not pause.
    public var isPaused: Bool?
    /// How the App Store revoked it (`revocationType`, `revocationPercentage`, `revocationReason`), with
    /// ``revokedAt``; nil when the store said nothing of it.
    public var revocation: Revocation?
    /// The App Store's `inAppOwnershipType`: a family member's transaction is `FAMILY_SHARED`.
    public var ownershipType: OwnershipType?
    /// The country of the storefront it was bought in (``StorefrontCountry``: ISO 3166-1 alpha-3): the App Store's
    /// `storefront`, Google Play's `regionCode`; nil when the store did not say (a legacy receipt).
    public var storefront: String?

    public init(
        transactionID: String, originalTransactionID: String? = nil, productID: String,
        productType: ProductType? = nil, purchaseDate: Date? = nil, expiresDate: Date? = nil,
        revokedAt: Date? = nil, gracePeriodExpiresDate: Date? = nil, isInBillingRetry: Bool = false,
        hasRenewalInfo: Bool = false, quantity: Int? = nil, appAccountToken: String? = nil,
        linkedSubscriptionKey: String? = nil, orderID: String? = nil, purchaseToken: String? = nil,
        isPaused: Bool? = nil, revocation: Revocation? = nil, ownershipType: OwnershipType? = nil,
        storefront: String? = nil
    ) {
        self.storefront = storefront
        self.isPaused = isPaused
        self.revocation = revocation?.nonEmpty
        self.ownershipType = ownershipType
        self.linkedSubscriptionKey = linkedSubscriptionKey
        self.orderID = orderID
        self.purchaseToken = purchaseToken
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.productType = productType
        self.purchaseDate = purchaseDate
        self.expiresDate = expiresDate
        self.revokedAt = revokedAt
        self.gracePeriodExpiresDate = gracePeriodExpiresDate
        self.isInBillingRetry = isInBillingRetry
        self.hasRenewalInfo = hasRenewalInfo || isInBillingRetry
        self.quantity = quantity
        self.appAccountToken = appAccountToken.flatMap { $0.isEmpty ? nil : $0.lowercased() }
    }

    /// The original transaction id, or this transaction's own id when it is the original.
    public var subscriptionKey: String { originalTransactionID ?? transactionID }

    /// A family member's transaction (Family Sharing), not the purchaser's.
    public var isFamilyShared: Bool { ownershipType == .familyShared }
}

/// What an App Store Server Notification V2 reports, reduced to what changes an entitlement
/// (docs/LEDGER.md, "Notification types", maps every `notificationType` and `subtype` to a kind).
public struct SubscriptionNotification: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// `DID_RENEW`, `SUBSCRIBED`, `OFFER_REDEEMED`, `ONE_TIME_CHARGE` (and the retired `DID_RECOVER`): a new
        /// transaction for the owner.
        case renewed
        /// `EXPIRED`: the subscription ended.
        case expired
        /// `DID_FAIL_TO_RENEW`: billing retry; with `gracePeriodExpiresDate` access continues until then.
        case renewalFailed = "renewal_failed"
        /// `GRACE_PERIOD_EXPIRED`: billing retry continues but access ends.
        case gracePeriodExpired = "grace_period_expired"
        /// `REFUND`: Apple refunded the transaction.
        case refunded
        /// `REVOKE`: Family Sharing access withdrawn, for the transaction in the notification only.
        case revoked
        /// `REFUND_REVERSED`: the refund is undone; the transaction entitles again.
        case refundReversed = "refund_reversed"
        /// `RENEWAL_EXTENDED`, `RENEWAL_EXTENSION`: the developer moved the expiry.
        case extended
        /// `DID_CHANGE_RENEWAL_STATUS`: auto-renew turned on or off (``SubscriptionNotification/autoRenew``).
        case renewalStatusChanged = "renewal_status_changed"
        /// `CONSUMPTION_REQUEST`: Apple asks for consumption information about a refund request.
        case consumptionRequest = "consumption_request"
        /// `REFUND_DECLINED`: Apple declined a refund request; nothing changes.
        case refundDeclined = "refund_declined"
        /// Anything else (renewal preference, price increase, metadata, a type Apple adds later): re-states the
        /// entitlement, changes nothing.
        case other
    }

    public var kind: Kind
    /// The notification's `notificationType` as Apple wrote it (logs, and the consumption answer recognises
    /// `CONSUMPTION_REQUEST` by it).
    public var appleType: String?
    /// The notification's `subtype`, when Apple sent one.
    public var subtype: String?
    /// When Apple signed the notification: notifications about one subscription are applied in this order.
    public var signedDate: Date?
    /// Auto-renew as the notification states it (its subtype or its signed renewal info); nil when it does not.
    public var autoRenew: Bool?
    /// The app's Apple id the notification names (`data`, `summary`, `appData` or `externalPurchaseToken`).
    public var appAppleID: Int64?

    public init(
        kind: Kind, appleType: String? = nil, subtype: String? = nil, signedDate: Date? = nil, autoRenew: Bool? = nil,
        appAppleID: Int64? = nil
    ) {
        self.kind = kind
        self.appleType = appleType
        self.subtype = subtype
        self.signedDate = signedDate
        self.autoRenew = autoRenew
        self.appAppleID = appAppleID
    }
}
