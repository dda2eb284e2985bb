import Foundation

/// The decision about one job, published to `receipt-verdicts` (key = `account_id`) for entitlement services.
///
/// Delivery is at-least-once: a job reprocessed after a crash or a rebalance produces the same verdict again,
/// with the same ``verdictID``, so consumers de-duplicate on it.
public struct Verdict: Sendable, Hashable {
    /// The schema tag of this version of the message.
    public static let schema = "receipt-verdict/v1"

    /// Deterministic from the job: its ``jobID`` and the digest of its content (see ``Verdict/verdictID(for:)``).
    /// One id always names one verdict: a redelivery repeats it; a job id reused with another proof or account gets
    /// another id.
    public var verdictID: String
    public var jobID: String
    public var accountID: String
    public var outcome: Outcome
    /// A stable machine code for every outcome but `granted`.
    public var reason: Reason?
    public var decidedBy: DecidedBy
    /// The store of the job's proof (`store`): written on every verdict; read as `app_store` when absent, as
    /// verdicts written before the field are all the App Store's.
    public var store: Store
    /// `Production`, `Sandbox` or `Xcode`, when known.
    public var environment: String?
    /// Every transaction the proof held that the decision considered, in purchase order.
    public var transactions: [Transaction]
    /// Apple's `status` (verifyReceipt) or HTTP error code (Server API), when Apple answered.
    public var appleStatus: Int?
    public var decidedAt: Date

    /// What the entitlement service should do.
    public enum Outcome: String, Sendable, Hashable, Codable, CaseIterable {
        /// A new, authentic purchase, now owned by this account.
        case granted
        /// This account already owns the transaction: idempotent, nothing new to grant.
        case alreadyGranted = "already_granted"
        /// Not a valid purchase for this account; ``Verdict/reason`` says why.
        case rejected
        /// Could not be decided (Apple unreachable past the job's deadline); nothing was claimed.
        case unverifiable
    }

    /// Which stage decided.
    public enum DecidedBy: String, Sendable, Hashable, Codable, CaseIterable {
        /// Local checks without cryptography: format, bundle id, product id.
        case prefilter
        /// Local signature verification (JWS chain, PKCS#7).
        case signature
        /// The ledger of granted transactions (repeats, replays).
        case ledger
        /// Apple's answer.
        case apple
        /// Google Play's answer (the Developer API).
        case googlePlay = "google_play"
    }

    /// A stable machine code for a non-grant. Open-ended: new codes may appear in later versions, so consumers
    /// must treat an unknown code as a rejection they do not specifically handle.
    public struct Reason: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public init(_ rawValue: String) { self.rawValue = rawValue }
        public init(from decoder: any Decoder) throws {
            rawValue = try decoder.singleValueContainer().decode(String.self)
        }
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.singleValueContainer()
            try c.encode(rawValue)
        }
        public var description: String { rawValue }

        /// Not a receipt at all (cracker-made, garbage, unreadable).
        public static let malformed = Reason("malformed")
        /// A receipt of another app.
        public static let wrongBundle = Reason("wrong_bundle")
        /// A product not in the catalog.
        public static let unknownProduct = Reason("unknown_product")
        /// The transaction belongs to another account.
        public static let replayed = Reason("replayed")
        /// Signature invalid, or Apple says the receipt is not authentic (21003).
        public static let notAuthenticated = Reason("not_authenticated")
        /// A subscription whose period is over.
        public static let expired = Reason("expired")
        /// Refunded or revoked by Apple.
        public static let revoked = Reason("revoked")
        /// Sandbox (or Xcode) where only production is allowed.
        public static let environmentNotAllowed = Reason("environment_not_allowed")
        /// Apple could not be reached before the job's deadline.
        public static let appleUnavailable = Reason("apple_unavailable")
        /// The proof holds no transaction (of a product in the catalog).
        public static let noTransaction = Reason("no_transaction")
        /// The proof holds purchases, but none of the product the job named (`expected_product_id`): the frontend
        /// (or the client) named the wrong product, or sent the wrong proof.
        public static let productMismatch = Reason("product_mismatch")
        /// Apple answered with a status that rejects the request (bad shared secret, account not found, …).
        public static let appleRejected = Reason("apple_rejected")
        /// The transaction is already granted to this account (reason of `already_granted`).
        public static let alreadyOwned = Reason("already_owned")
        /// The job id was already decided for another content (another proof, account or expected product): the
        /// job is not decided again. A frontend sends a new `job_id` for a new purchase attempt.
        public static let jobIDReused = Reason("job_id_reused")
        /// The transaction carries an `appAccountToken` that is not the job's (`app_account_token`, or the token
        /// derived from its `account_id` when the job has none): bought for another account.
        public static let accountTokenMismatch = Reason("account_token_mismatch")
        /// A notification for a subscription no account owns in the ledger: nothing to update, nobody to tell.
        public static let unclaimed = Reason("unclaimed")
        /// A production notification for another app (its `appAppleId` is not `apple_app_apple_id`).
        public static let wrongApp = Reason("wrong_app")
        /// A notification about no transaction (`TEST`, a `SUMMARY`, an external purchase token, a rescinded
        /// consent): recorded, nothing in the ledger changes.
        public static let notificationRecorded = Reason("notification_recorded")
        /// Google Play could not be asked before the job's deadline (the App Store's is ``appleUnavailable``).
        public static let googlePlayUnavailable = Reason("google_play_unavailable")
        /// Google Play refused the request about the purchase (HTTP 400: a token or product it does not accept).
        public static let googlePlayRejected = Reason("google_play_rejected")
        /// Google Play knows no such purchase for the package: the token never existed there (404: forged, or
        /// another app's) or no longer exists (410).
        public static let purchaseNotFound = Reason("purchase_not_found")
        /// The purchase awaits payment (Google Play's `PENDING`): not granted yet, nothing claimed; the reason of an
        /// `unverifiable` verdict. The app submits the purchase again, under a new `job_id`, once it is paid.
        public static let purchasePending = Reason("purchase_pending")
    }

    /// One transaction as the decision saw it.
    public struct Transaction: Sendable, Hashable, Codable {
        public var transactionID: String
        public var originalTransactionID: String?
        public var productID: String
        public var purchaseDate: Date?
        public var expiresDate: Date?
        public var revokedAt: Date?
        public var quantity: Int?
        /// The subscription's renewal info as Apple stated it for this decision (`isInBillingRetryPeriod`), on the
        /// subscription's latest transaction only; nil when the decision saw no renewal info (absent from the JSON).
        public var inBillingRetry: Bool?
        /// The renewal info's `gracePeriodExpiresDate`, with ``inBillingRetry``; nil when none (absent from the JSON).
        public var gracePeriodExpiresDate: Date?
        /// Google Play's order id of the purchase (a one-time purchase's identity; a subscription's latest
        /// successful order), when Google gave one; nil otherwise (absent from the JSON).
        public var orderID: String?
        /// Google Play's purchase token of a subscription (its identity across renewals); nil otherwise (absent from
        /// the JSON).
        public var purchaseToken: String?
        /// Whether Google Play's subscription is paused (`SUBSCRIPTION_STATE_PAUSED`: no access until it resumes), as
        /// Google stated it for this decision, on the subscription's latest transaction beside ``inBillingRetry``;
        /// nil when the decision saw no Google Play state (absent from the JSON).
        public var paused: Bool?
        /// How Apple revoked the transaction (`revocationType`, `revocationPercentage`, `revocationReason`), when it
        /// said; nil otherwise (each field absent from the JSON).
        public var revocation: Revocation?
        /// Apple's `inAppOwnershipType` when the decision read it; nil otherwise (absent from the JSON).
        public var ownershipType: OwnershipType?

        public init(
            transactionID: String, originalTransactionID: String? = nil, productID: String,
            purchaseDate: Date? = nil, expiresDate: Date? = nil, revokedAt: Date? = nil, quantity: Int? = nil,
            inBillingRetry: Bool? = nil, gracePeriodExpiresDate: Date? = nil, orderID: String? = nil,
            purchaseToken: String? = nil, paused: Bool? = nil, revocation: Revocation? = nil,
            ownershipType: OwnershipType? = nil
        ) {
            self.transactionID = transactionID
            self.originalTransactionID = originalTransactionID
            self.productID = productID
            self.purchaseDate = purchaseDate
            self.expiresDate = expiresDate
            self.revokedAt = revokedAt
            self.quantity = quantity
            self.inBillingRetry = inBillingRetry
            self.gracePeriodExpiresDate = gracePeriodExpiresDate
            self.orderID = orderID
            self.purchaseToken = purchaseToken
            self.paused = paused
            self.revocation = revocation?.isEmpty == true ? nil : revocation
            self.ownershipType = ownershipType
        }

        enum CodingKeys: String, CodingKey {
            case transactionID = "transaction_id"
            case originalTransactionID = "original_transaction_id"
            case productID = "product_id"
            case purchaseDate = "purchase_date"
            case expiresDate = "expires_date"
            case revokedAt = "revoked_at"
            case quantity
            case inBillingRetry = "in_billing_retry"
            case gracePeriodExpiresDate = "grace_period_expires_date"
            case orderID = "order_id"
            case purchaseToken = "purchase_token"
            case paused
            case revocationType = "revocation_type"
            case revocationPercentage = "revocation_percentage"
            case revocationReason = "revocation_reason"
            case ownershipType = "in_app_ownership_type"
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            self.init(
                transactionID: try c.decode(String.self, forKey: .transactionID),
                originalTransactionID: try c.decodeIfPresent(String.self, forKey: .originalTransactionID),
                productID: try c.decode(String.self, forKey: .productID),
                purchaseDate: try c.decodeIfPresent(Date.self, forKey: .purchaseDate),
                expiresDate: try c.decodeIfPresent(Date.self, forKey: .expiresDate),
                revokedAt: try c.decodeIfPresent(Date.self, forKey: .revokedAt),
                quantity: try c.decodeIfPresent(Int.self, forKey: .quantity),
                inBillingRetry: try c.decodeIfPresent(Bool.self, forKey: .inBillingRetry),
                gracePeriodExpiresDate: try c.decodeIfPresent(Date.self, forKey: .gracePeriodExpiresDate),
                orderID: try c.decodeIfPresent(String.self, forKey: .orderID),
                purchaseToken: try c.decodeIfPresent(String.self, forKey: .purchaseToken),
                paused: try c.decodeIfPresent(Bool.self, forKey: .paused),
                revocation: Revocation(
                    type: try c.decodeIfPresent(String.self, forKey: .revocationType).map { Revocation.Kind($0) },
                    percentage: try c.decodeIfPresent(Int.self, forKey: .revocationPercentage),
                    reason: try c.decodeIfPresent(Int.self, forKey: .revocationReason)),
                ownershipType: try c.decodeIfPresent(String.self, forKey: .ownershipType).map { OwnershipType($0) })
        }

        public func encode(to encoder: any Encoder) throws {
            // Absent dates are written as null, not omitted: the contract lists these fields on every transaction.
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(transactionID, forKey: .transactionID)
            try c.encode(originalTransactionID, forKey: .originalTransactionID)
            try c.encode(productID, forKey: .productID)
            try c.encode(purchaseDate, forKey: .purchaseDate)
            try c.encode(expiresDate, forKey: .expiresDate)
            try c.encode(revokedAt, forKey: .revokedAt)
            try c.encodeIfPresent(quantity, forKey: .quantity)
            try c.encodeIfPresent(inBillingRetry, forKey: .inBillingRetry)
            try c.encodeIfPresent(gracePeriodExpiresDate, forKey: .gracePeriodExpiresDate)
            try c.encodeIfPresent(orderID, forKey: .orderID)
            try c.encodeIfPresent(purchaseToken, forKey: .purchaseToken)
            try c.encodeIfPresent(paused, forKey: .paused)
            try c.encodeIfPresent(revocation?.type?.rawValue, forKey: .revocationType)
            try c.encodeIfPresent(revocation?.percentage, forKey: .revocationPercentage)
            try c.encodeIfPresent(revocation?.reason, forKey: .revocationReason)
            try c.encodeIfPresent(ownershipType?.rawValue, forKey: .ownershipType)
        }
    }

    public init(
        verdictID: String, jobID: String, accountID: String, outcome: Outcome, reason: Reason? = nil,
        decidedBy: DecidedBy, store: Store = .appStore, environment: String? = nil, transactions: [Transaction] = [],
        appleStatus: Int? = nil, decidedAt: Date
    ) {
        self.verdictID = verdictID
        self.jobID = jobID
        self.accountID = accountID
        self.outcome = outcome
        self.reason = reason
        self.decidedBy = decidedBy
        self.store = store
        self.environment = environment
        self.transactions = transactions
        self.appleStatus = appleStatus
        self.decidedAt = decidedAt
    }

    /// The verdict of `job`, with its id derived from the job (``verdictID(for:)``) and its store the proof's.
    public init(
        job: ReceiptJob, accountID: String? = nil, outcome: Outcome, reason: Reason? = nil, decidedBy: DecidedBy,
        environment: String? = nil, transactions: [Transaction] = [], appleStatus: Int? = nil, decidedAt: Date
    ) {
        self.init(
            verdictID: Self.verdictID(for: job), jobID: job.jobID, accountID: accountID ?? job.accountID,
            outcome: outcome, reason: reason, decidedBy: decidedBy, store: job.proof.store, environment: environment,
            transactions: transactions, appleStatus: appleStatus, decidedAt: decidedAt)
    }

    /// The verdict id of a job: a name-based UUID (RFC 9562 version 5), in this project's namespace, of the job id
    /// and the digest of the job's content (``ReceiptJob/contentDigest``). Every worker derives the same id for the
    /// same job without coordination, and a job id reused with another proof, account or expectation gets another
    /// id, so a consumer that de-duplicates on `verdict_id` never drops a verdict it has not seen.
    public static func verdictID(for job: ReceiptJob) -> String {
        verdictID(jobID: job.jobID, contentDigest: job.contentDigest)
    }

    /// The id of the verdict of job `jobID` whose content has `contentDigest`.
    public static func verdictID(jobID: String, contentDigest: String) -> String {
        NameBasedUUID.v5(namespace: NameBasedUUID.verdictNamespace, name: jobID + "\n" + contentDigest)
    }

    /// The id that builds before the content digest gave every verdict of `jobID` (version 5 UUID of the job id
    /// alone). Ledger rows written by them carry it: a job whose recorded verdict has it is taken as the same job.
    public static func legacyVerdictID(jobID: String) -> String {
        NameBasedUUID.v5(namespace: NameBasedUUID.verdictNamespace, name: jobID)
    }

    /// Whether this (recorded) verdict is the one of `job`: its id is `job`'s, or the legacy id of its job id.
    public func isVerdict(of job: ReceiptJob) -> Bool {
        jobID == job.jobID && (verdictID == Self.verdictID(for: job) || verdictID == Self.legacyVerdictID(jobID: jobID))
    }
}

extension Verdict: Codable {
    enum CodingKeys: String, CodingKey {
        case schema
        case verdictID = "verdict_id"
        case jobID = "job_id"
        case accountID = "account_id"
        case outcome, reason
        case decidedBy = "decided_by"
        case store
        case environment, transactions
        case appleStatus = "apple_status"
        case decidedAt = "decided_at"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let schema = try c.decode(String.self, forKey: .schema)
        guard schema == Self.schema else {
            throw MessageError(.unsupportedSchema, field: "schema", "expected \(Self.schema)")
        }
        verdictID = try c.decode(String.self, forKey: .verdictID)
        jobID = try c.decode(String.self, forKey: .jobID)
        accountID = try c.decode(String.self, forKey: .accountID)
        outcome = try c.decode(Outcome.self, forKey: .outcome)
        reason = try c.decodeIfPresent(Reason.self, forKey: .reason)
        decidedBy = try c.decode(DecidedBy.self, forKey: .decidedBy)
        store = try c.decodeIfPresent(Store.self, forKey: .store) ?? .appStore
        environment = try c.decodeIfPresent(String.self, forKey: .environment)
        transactions = try c.decode([Transaction].self, forKey: .transactions)
        appleStatus = try c.decodeIfPresent(Int.self, forKey: .appleStatus)
        decidedAt = try c.decode(Date.self, forKey: .decidedAt)
        if outcome != .granted && reason == nil {
            throw MessageError(.missingField, field: "reason", "required when outcome is \(outcome.rawValue)")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(Self.schema, forKey: .schema)
        try c.encode(verdictID, forKey: .verdictID)
        try c.encode(jobID, forKey: .jobID)
        try c.encode(accountID, forKey: .accountID)
        try c.encode(outcome, forKey: .outcome)
        try c.encodeIfPresent(reason, forKey: .reason)
        try c.encode(decidedBy, forKey: .decidedBy)
        try c.encode(store, forKey: .store)
        try c.encodeIfPresent(environment, forKey: .environment)
        try c.encode(transactions, forKey: .transactions)
        try c.encodeIfPresent(appleStatus, forKey: .appleStatus)
        try c.encode(decidedAt, forKey: .decidedAt)
    }
}
