import Foundation

/// A request to verify one purchase proof, published by a frontend to `receipt-jobs` (key = ``messageKey``: the
/// `account_id`, or for a notification the purchase it is about).
///
/// `job_id` is the idempotency key: a job delivered twice (a frontend retry, a redelivery after a crash)
/// gets the same verdict twice. Exactly one proof is carried; see ``Proof``.
public struct ReceiptJob: Sendable, Hashable {
    /// The schema tag of this version of the message.
    public static let schema = "receipt-job/v1"

    /// Idempotency key chosen by the frontend (1 to 256 characters).
    public var jobID: String
    /// The account the purchase should be granted to (1 to 256 characters). Also the Kafka key, but for notifications.
    public var accountID: String
    /// The device that sent the proof, if the frontend knows it.
    public var deviceID: String?
    /// The app the frontend expects the proof to be for; the catalog decides when absent.
    public var bundleID: String?
    /// The product the app client said it bought, when the frontend knows it.
    public var expectedProductID: String?
    /// When the frontend accepted the proof from the client.
    public var submittedAt: Date?
    /// The `appAccountToken` (a UUID) the app passed to StoreKit when it bought, for this account: a transaction
    /// that carries a token is granted only to a job with the same one (``Verdict/Reason/accountTokenMismatch``).
    /// Stored in lower case. Workers before this field ignore it (readers are tolerant of unknown fields).
    public var appAccountToken: String?
    /// The purchase proof itself.
    public var proof: Proof

    /// The one purchase proof a job carries.
    public enum Proof: Sendable, Hashable {
        /// A base64 app receipt (PKCS#7) or iOS 6 transaction receipt (`receipt`).
        case receipt(String)
        /// A StoreKit 2 signed transaction, compact JWS (`signed_transaction`).
        case signedTransaction(String)
        /// A transaction id to look up with the App Store Server API (`transaction_id`).
        case transactionID(String)
        /// An App Store Server Notifications V2 `signedPayload` (`notification`).
        case notification(String)
        /// A Google Play purchase (`google_play`, an object).
        case googlePlay(GooglePlayPurchase)
        /// A Google Play notification about a purchase (`google_play_notification`, an object): a Real-time
        /// developer notification or the reconciler's word about a purchase.
        case googlePlayNotification(GooglePlayNotification)

        /// The JSON field that carries this proof.
        public var fieldName: String {
            switch self {
            case .receipt: "receipt"
            case .signedTransaction: "signed_transaction"
            case .transactionID: "transaction_id"
            case .notification: "notification"
            case .googlePlay: "google_play"
            case .googlePlayNotification: "google_play_notification"
            }
        }

        /// The store the proof comes from.
        public var store: Store {
            switch self {
            case .googlePlay, .googlePlayNotification: .googlePlay
            case .receipt, .signedTransaction, .transactionID, .notification: .appStore
            }
        }

        /// The product a Google Play purchase names (its `product_id`); nil for the App Store's proofs. Google's
        /// answer must show it, as a receipt must show a job's `expected_product_id`.
        public var googlePlayProductID: String? {
            if case .googlePlay(let purchase) = self { return purchase.productID }
            return nil
        }

        /// Whether this is an App Store Server Notification.
        public var isNotification: Bool {
            if case .notification = self { return true }
            return false
        }

        /// Whether this is a Google Play notification.
        public var isGooglePlayNotification: Bool {
            if case .googlePlayNotification = self { return true }
            return false
        }

        /// The proof's text, whatever its kind (a Google Play purchase's or notification's: its purchase token, ""
        /// for a test notification).
        public var value: String {
            switch self {
            case .receipt(let v), .signedTransaction(let v), .transactionID(let v), .notification(let v): v
            case .googlePlay(let purchase): purchase.purchaseToken
            case .googlePlayNotification(let notification): notification.purchaseToken ?? ""
            }
        }
    }

    /// The Kafka message key every producer gives this job (the worker decides jobs of one key in order): the
    /// `account_id`, so an account's jobs are decided one after another; for a notification, its purchase
    /// (``NotificationJob/messageKey(ofSignedPayload:accountID:)``), so a burst of notifications about many
    /// subscriptions is decided in parallel while those of one subscription keep their order. A Google Play
    /// notification is keyed by its purchase token the same way
    /// (``GooglePlayNotificationJob/messageKey(of:accountID:)``).
    public var messageKey: [UInt8] {
        switch proof {
        case .notification(let payload):
            return Array(NotificationJob.messageKey(ofSignedPayload: payload, accountID: accountID).utf8)
        case .googlePlayNotification(let notification):
            return Array(GooglePlayNotificationJob.messageKey(of: notification, accountID: accountID).utf8)
        case .receipt, .signedTransaction, .transactionID, .googlePlay:
            return Array(accountID.utf8)
        }
    }

    public init(
        jobID: String, accountID: String, proof: Proof, deviceID: String? = nil, bundleID: String? = nil,
        expectedProductID: String? = nil, submittedAt: Date? = nil, appAccountToken: String? = nil
    ) {
        self.jobID = jobID
        self.accountID = accountID
        self.proof = proof
        self.deviceID = deviceID
        self.bundleID = bundleID
        self.expectedProductID = expectedProductID
        self.submittedAt = submittedAt
        self.appAccountToken = appAccountToken?.lowercased()
    }
}

extension ReceiptJob: Codable {
    enum CodingKeys: String, CodingKey, CaseIterable {
        case schema
        case jobID = "job_id"
        case accountID = "account_id"
        case deviceID = "device_id"
        case bundleID = "bundle_id"
        case expectedProductID = "expected_product_id"
        case submittedAt = "submitted_at"
        case appAccountToken = "app_account_token"
        case receipt
        case signedTransaction = "signed_transaction"
        case transactionID = "transaction_id"
        case notification
        case googlePlay = "google_play"
        case googlePlayNotification = "google_play_notification"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let schema = try c.decode(String.self, forKey: .schema)
        guard schema == Self.schema else {
            throw MessageError(.unsupportedSchema, field: "schema", "expected \(Self.schema)")
        }
        jobID = try c.decode(String.self, forKey: .jobID)
        accountID = try c.decode(String.self, forKey: .accountID)
        deviceID = try c.decodeIfPresent(String.self, forKey: .deviceID)
        bundleID = try c.decodeIfPresent(String.self, forKey: .bundleID)
        expectedProductID = try c.decodeIfPresent(String.self, forKey: .expectedProductID)
        submittedAt = try c.decodeIfPresent(Date.self, forKey: .submittedAt)
        appAccountToken = try c.decodeIfPresent(String.self, forKey: .appAccountToken)?.lowercased()

        var proofs: [Proof] = []
        if let v = try c.decodeIfPresent(String.self, forKey: .receipt) { proofs.append(.receipt(v)) }
        if let v = try c.decodeIfPresent(String.self, forKey: .signedTransaction) {
            proofs.append(.signedTransaction(v))
        }
        if let v = try c.decodeIfPresent(String.self, forKey: .transactionID) { proofs.append(.transactionID(v)) }
        if let v = try c.decodeIfPresent(String.self, forKey: .notification) { proofs.append(.notification(v)) }
        if let v = try c.decodeIfPresent(GooglePlayPurchase.self, forKey: .googlePlay) {
            proofs.append(.googlePlay(v))
        }
        if let v = try c.decodeIfPresent(GooglePlayNotification.self, forKey: .googlePlayNotification) {
            proofs.append(.googlePlayNotification(v))
        }
        guard proofs.count == 1, let proof = proofs.first else {
            throw MessageError(
                .invalidValue, field: Self.proofFields,
                "exactly one proof is required, found \(proofs.count)")
        }
        self.proof = proof
        try validate()
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(Self.schema, forKey: .schema)
        try c.encode(jobID, forKey: .jobID)
        try c.encode(accountID, forKey: .accountID)
        try c.encodeIfPresent(deviceID, forKey: .deviceID)
        try c.encodeIfPresent(bundleID, forKey: .bundleID)
        try c.encodeIfPresent(expectedProductID, forKey: .expectedProductID)
        try c.encodeIfPresent(submittedAt, forKey: .submittedAt)
        try c.encodeIfPresent(appAccountToken, forKey: .appAccountToken)
        switch proof {
        case .receipt(let v): try c.encode(v, forKey: .receipt)
        case .signedTransaction(let v): try c.encode(v, forKey: .signedTransaction)
        case .transactionID(let v): try c.encode(v, forKey: .transactionID)
        case .notification(let v): try c.encode(v, forKey: .notification)
        case .googlePlay(let v): try c.encode(v, forKey: .googlePlay)
        case .googlePlayNotification(let v): try c.encode(v, forKey: .googlePlayNotification)
        }
    }

    /// The proof fields, one of which a job carries, as a refusal names them.
    static let proofFields =
        "receipt|signed_transaction|transaction_id|notification|google_play|google_play_notification"

    /// Checks the values the types alone cannot: identifiers are non-empty and bounded, the proof is not empty.
    public func validate() throws {
        try Self.checkIdentifier(jobID, field: "job_id")
        try Self.checkIdentifier(accountID, field: "account_id")
        if Self.isLane(accountID, of: NotificationJob.defaultAccountID), !proof.isNotification {
            throw MessageError(
                .invalidValue, field: "account_id",
                "\(NotificationJob.defaultAccountID) is reserved for notification jobs")
        }
        if Self.isLane(accountID, of: GooglePlayNotificationJob.defaultAccountID), !proof.isGooglePlayNotification {
            throw MessageError(
                .invalidValue, field: "account_id",
                "\(GooglePlayNotificationJob.defaultAccountID) is reserved for Google Play notification jobs")
        }
        if let deviceID { try Self.checkIdentifier(deviceID, field: "device_id") }
        if let bundleID { try Self.checkIdentifier(bundleID, field: "bundle_id") }
        if let expectedProductID { try Self.checkIdentifier(expectedProductID, field: "expected_product_id") }
        if case .googlePlay(let purchase) = proof {
            try purchase.validate()
        } else if case .googlePlayNotification(let notification) = proof {
            try notification.validate()
        } else if proof.value.isEmpty {
            throw MessageError(.invalidValue, field: proof.fieldName, "must not be empty")
        }
        if case .transactionID(let id) = proof { try Self.checkIdentifier(id, field: "transaction_id") }
        if let appAccountToken, !Self.isUUID(appAccountToken) {
            throw MessageError(.invalidValue, field: "app_account_token", "must be a UUID (8-4-4-4-12 hex digits)")
        }
    }

    /// `text` is a UUID in its canonical 8-4-4-4-12 form, in either case (StoreKit's `appAccountToken`).
    public static func isUUID(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 36 else { return false }
        for (index, byte) in bytes.enumerated() {
            if index == 8 || index == 13 || index == 18 || index == 23 {
                guard byte == UInt8(ascii: "-") else { return false }
            } else {
                let hex = (0x30...0x39).contains(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte)
                guard hex else { return false }
            }
        }
        return true
    }

    /// The longest identifier (job, account, device, bundle, product, transaction id) a job may carry.
    public static let maximumIdentifierLength = 256

    /// The contract's identifier rule (``Identifier``), with the rule broken named: an id with a control character
    /// is refused here, at every entrance, because the ledger's database refuses some of them (PostgreSQL: NUL) for
    /// good, and an id it refuses would hold its account's lane for ever.
    static func checkIdentifier(_ value: String, field: String) throws {
        if value.isEmpty { throw MessageError(.invalidValue, field: field, "must not be empty") }
        if value.utf8.count > maximumIdentifierLength {
            throw MessageError(.invalidValue, field: field, "longer than \(maximumIdentifierLength) bytes")
        }
        if Identifier.hasControlCharacter(value) {
            throw MessageError(.invalidValue, field: field, "must not contain control characters")
        }
    }

    /// Whether `accountID` is a notification lane's account (``NotificationJob/defaultAccountID`` or
    /// ``GooglePlayNotificationJob/defaultAccountID``, alone or followed by `/`): only a notification job of that
    /// store may carry it, or a frontend's job would share a lane with notifications.
    public static func isReservedAccountID(_ accountID: String) -> Bool {
        isLane(accountID, of: NotificationJob.defaultAccountID)
            || isLane(accountID, of: GooglePlayNotificationJob.defaultAccountID)
    }

    /// Whether `accountID` is `notificationAccount` or one of its lanes (`<notificationAccount>/…`, the Kafka keys of
    /// notification jobs).
    public static func isLane(_ accountID: String, of notificationAccount: String) -> Bool {
        guard accountID.hasPrefix(notificationAccount) else { return false }
        return accountID.utf8.count == notificationAccount.utf8.count
            || accountID.utf8.dropFirst(notificationAccount.utf8.count).first == UInt8(ascii: "/")
    }
}
