import Foundation

/// How an App Store Server Notification V2 becomes a job, the same way wherever it comes from: the gateway (Apple's
/// POST) and the reconciler (Get Notification History) both give one notification the same job, so one that arrives
/// both ways is decided once (docs/messages.md, "Notification jobs").
///
/// The signed payload is read without verifying its signature (the worker verifies it), only for its
/// `notificationUUID`, from which the `job_id` is derived: Apple's retries of one notification are one job, and for
/// its original transaction id, from which the Kafka message key is derived (``messageKey(ofSignedPayload:accountID:)``).
public enum NotificationJob {
    /// Prefix of a notification job's `job_id`, followed by the notification's `notificationUUID` in lower case.
    public static let jobIDPrefix = "apple-notification-"
    /// The default `account_id` of notification jobs (they name no account; the worker finds the owner of the
    /// subscription in its ledger).
    public static let defaultAccountID = "apple-notification"
    /// The longest `notificationUUID` accepted (Apple's are 36-character UUIDs).
    public static let maximumUUIDLength = 64

    /// Why a signed payload makes no notification job.
    public enum Failure: Error, Sendable, Hashable, CustomStringConvertible {
        /// Not three dot-separated segments.
        case notCompactJWS
        /// The middle segment is not base64url-encoded JSON.
        case payloadNotJSON
        /// The payload has no `notificationUUID` string.
        case noNotificationUUID
        /// The `notificationUUID` is empty, too long, or has other characters than letters, digits and dashes.
        case invalidNotificationUUID

        public var description: String {
            switch self {
            case .notCompactJWS: "not a compact JWS"
            case .payloadNotJSON: "payload is not base64url JSON"
            case .noNotificationUUID: "no notificationUUID"
            case .invalidNotificationUUID:
                "notificationUUID must be 1-\(NotificationJob.maximumUUIDLength) letters, digits or dashes"
            }
        }
    }

    /// The job of the notification `signedPayload`, for `accountID` (the deployment's notification account).
    public static func job(
        signedPayload: String, accountID: String = defaultAccountID, submittedAt: Date
    ) throws(Failure) -> ReceiptJob {
        let uuid = try notificationUUID(ofSignedPayload: signedPayload)
        return ReceiptJob(
            jobID: jobIDPrefix + uuid.lowercased(), accountID: accountID, proof: .notification(signedPayload),
            submittedAt: submittedAt)
    }

    /// The unverified `notificationUUID` of a signed payload.
    public static func notificationUUID(ofSignedPayload jws: String) throws(Failure) -> String {
        guard let segment = CompactJWS.payloadSegment(of: jws) else { throw .notCompactJWS }
        guard let object = CompactJWS.object(base64URL: segment) else { throw .payloadNotJSON }
        return try notificationUUID(in: object)
    }

    private static func notificationUUID(in payload: [String: Any]) throws(Failure) -> String {
        guard let uuid = payload["notificationUUID"] as? String else { throw .noNotificationUUID }
        let allowed = uuid.utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                || byte == UInt8(ascii: "-")
        }
        guard !uuid.isEmpty, uuid.utf8.count <= maximumUUIDLength, allowed else { throw .invalidNotificationUUID }
        return uuid
    }

    /// The Kafka message key of the notification job of `jws`, for `accountID` (the deployment's notification
    /// account): `<accountID>/<originalTransactionId>` of the transaction (or renewal info) it is about, else
    /// `<accountID>/<notificationUUID in lower case>` (a summary, an external purchase token, `TEST`), else
    /// `accountID` (a payload that is not a notification's; never published by the gateway or the reconciler).
    ///
    /// Why per purchase and not one key: the worker orders its lanes by message key, so one key decided every
    /// notification of the deployment one after another. Apple's order matters only within one original
    /// transaction, and that order is kept twice: one key per original transaction keeps its notifications in one
    /// partition and one lane, and the ledger applies them per original transaction in `signedDate` order anyway.
    /// Read without verifying, like the uuid: a forged payload can only choose its own lane.
    public static func messageKey(ofSignedPayload jws: String, accountID: String = defaultAccountID) -> String {
        guard let payload = CompactJWS.payloadObject(of: jws) else { return accountID }
        if let data = payload["data"] as? [String: Any] {
            for field in ["signedTransactionInfo", "signedRenewalInfo"] {
                if let nested = data[field] as? String, let info = CompactJWS.payloadObject(of: nested),
                    let original = identifier(info["originalTransactionId"])
                {
                    return accountID + "/" + original
                }
            }
        }
        if let uuid = try? notificationUUID(in: payload) { return accountID + "/" + uuid.lowercased() }
        return accountID
    }

    /// The longest original transaction id put in a message key (Apple's are up to 20 digits).
    static let maximumKeyPartLength = 64

    /// A string of at most ``maximumKeyPartLength`` letters, digits, dashes or dots (Apple's ids are strings of
    /// digits); anything else is not used, so a key never carries arbitrary text from an unverified payload.
    private static func identifier(_ value: Any?) -> String? {
        guard let text = value as? String else { return nil }
        let allowed = text.utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
        }
        guard !text.isEmpty, text.utf8.count <= maximumKeyPartLength, allowed else { return nil }
        return text
    }
}
