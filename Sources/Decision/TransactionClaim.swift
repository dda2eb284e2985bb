import Foundation
import Messages

/// One row of the ledger: a transaction granted to one account. Never holds a receipt or a secret.
public struct TransactionClaim: Sendable, Hashable {
    /// Primary key.
    public var transactionID: String
    /// The subscription this transaction renews; the transaction's own id for an original purchase.
    public var originalTransactionID: String
    /// The owner. Changes only when an expired subscription moves to another account.
    public var accountID: String
    public var productID: String
    public var productType: ProductType
    public var bundleID: String?
    /// `Production`, `Sandbox` or `Xcode`.
    public var environment: String?
    public var purchaseDate: Date?
    public var expiresDate: Date?
    public var gracePeriodExpiresDate: Date?
    public var revokedAt: Date?
    /// How the App Store revoked it (schema version 8): Apple's `revocationType`, `revocationPercentage` and
    /// `revocationReason`, recorded with ``revokedAt`` and cleared with it; nil when Apple did not say.
    public var revocation: Revocation?
    /// Apple's `inAppOwnershipType` as the claim was made (schema version 8): a family member's claim is
    /// `FAMILY_SHARED`, and belongs to the member's account alone; nil: not stated (the purchaser's).
    public var ownershipType: OwnershipType?
    /// The country of the storefront the purchase was made in, as the claim was made (schema version 9; an ISO
    /// 3166-1 alpha-3 code, ``StorefrontCountry``): the App Store's `storefront`, Google Play's `regionCode`; nil
    /// when the store did not say (a legacy receipt) or the claim was written before version 9.
    public var storefront: String?
    /// Auto-renew as the latest notification stated it (`DID_CHANGE_RENEWAL_STATUS`, signed renewal info); nil
    /// when no notification said.
    public var autoRenew: Bool?
    /// The `signedDate` of the newest notification applied to this claim's subscription: an older one arriving
    /// later is answered from the ledger and changes nothing.
    public var notificationSignedAt: Date?
    /// The job that first granted this transaction, and the verdict it was given.
    public var grantedJobID: String
    public var verdictID: String
    public var createdAt: Date
    public var updatedAt: Date

    public init(
        transactionID: String, originalTransactionID: String, accountID: String, productID: String,
        productType: ProductType, bundleID: String? = nil, environment: String? = nil, purchaseDate: Date? = nil,
        expiresDate: Date? = nil, gracePeriodExpiresDate: Date? = nil, revokedAt: Date? = nil,
        grantedJobID: String, verdictID: String, createdAt: Date, updatedAt: Date, autoRenew: Bool? = nil,
        notificationSignedAt: Date? = nil, revocation: Revocation? = nil, ownershipType: OwnershipType? = nil,
        storefront: String? = nil
    ) {
        self.storefront = storefront
        self.revocation = revocation?.nonEmpty
        self.ownershipType = ownershipType
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.accountID = accountID
        self.productID = productID
        self.productType = productType
        self.bundleID = bundleID
        self.environment = environment
        self.purchaseDate = purchaseDate
        self.expiresDate = expiresDate
        self.gracePeriodExpiresDate = gracePeriodExpiresDate
        self.revokedAt = revokedAt
        self.grantedJobID = grantedJobID
        self.verdictID = verdictID
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.autoRenew = autoRenew
        self.notificationSignedAt = notificationSignedAt
    }

    /// The end of the entitlement this claim gives: the later of the expiry and the grace period's end;
    /// `nil` when it never ends (consumables, non-consumables, subscriptions without a known expiry).
    public var entitlementEnd: Date? {
        switch productType {
        case .consumable, .nonConsumable: nil
        case .autoRenewable, .nonRenewing:
            switch (expiresDate, gracePeriodExpiresDate) {
            case (nil, nil): nil
            case (let e?, nil): e
            case (nil, let g?): g
            case (let e?, let g?): max(e, g)
            }
        }
    }

    /// A family member's claim (Family Sharing), not the purchaser's.
    public var isFamilyShared: Bool { ownershipType == .familyShared }

    /// True while the claim still entitles its owner at `now`.
    public func isActive(at now: Date) -> Bool {
        guard revokedAt == nil else { return false }
        guard let end = entitlementEnd else { return true }
        return end > now
    }

    /// The latest claim of one subscription (``SubscriptionPeriod``): an earlier period whose stored end is later
    /// (extended, or kept when Apple's dates moved) never outlives a latest period that has expired or was refunded.
    public static func latest(of claims: some Sequence<TransactionClaim>) -> TransactionClaim? {
        claims.max { $0.periodOrder < $1.periodOrder }
    }

    /// This claim's place among its subscription's periods (``SubscriptionPeriod/order(purchased:ends:transactionID:)``).
    var periodOrder: (Date, Date, String) {
        SubscriptionPeriod.order(purchased: purchaseDate, ends: entitlementEnd, transactionID: transactionID)
    }

    /// Whether a subscription (all its claims) entitles at `now`: its latest claim does.
    public static func subscriptionIsActive(_ claims: some Sequence<TransactionClaim>, at now: Date) -> Bool {
        latest(of: claims)?.isActive(at: now) ?? false
    }
}

/// What the ledger knows that matters to one job, read in one call before deciding.
public struct LedgerSnapshot: Sendable, Hashable {
    /// The verdict already recorded for this job, if it was decided before (a redelivery).
    public var priorVerdict: Messages.Verdict?
    /// The claims on the proof's transactions and on every transaction of the same subscriptions.
    public var claims: [TransactionClaim]
    /// For a Google Play notification job: the pending purchase recorded for its token, if a verification job found
    /// it pending.
    public var pendingPlayPurchase: PendingPlayPurchase? {
        get { pendingPlayPurchaseBox?.value }
        set { pendingPlayPurchaseBox = newValue.map(IndirectValue.init) }
    }
    private var pendingPlayPurchaseBox: IndirectValue<PendingPlayPurchase>?

    public init(
        priorVerdict: Messages.Verdict? = nil, claims: [TransactionClaim] = [],
        pendingPlayPurchase: PendingPlayPurchase? = nil
    ) {
        self.priorVerdict = priorVerdict
        self.claims = claims
        self.pendingPlayPurchaseBox = pendingPlayPurchase.map(IndirectValue.init)
    }

    /// The claim on one transaction.
    public func claim(_ transactionID: String) -> TransactionClaim? {
        claims.first { $0.transactionID == transactionID }
    }

    /// Every claim of one subscription (same original transaction id).
    public func claims(ofSubscription originalTransactionID: String) -> [TransactionClaim] {
        claims.filter { $0.originalTransactionID == originalTransactionID || $0.transactionID == originalTransactionID }
    }
}
