import Foundation

/// A Google Play notification as a job carries it (`google_play_notification`): a Real-time developer notification
/// that came through Pub/Sub, or the reconciler's word about a purchase (a voided one, a re-read of an unsure one).
///
/// Nothing here is trusted: a notification carries no state, and the worker reads the purchase from Google again.
/// The `notification` text is kept exactly as it was decoded from the Pub/Sub message, so the worker reads what
/// Google sent, not a re-serialisation of it.
public struct GooglePlayNotification: Sendable, Hashable {
    /// The app's package name (`package_name`, the DeveloperNotification's `packageName`).
    public var packageName: String
    /// The purchase token the notification is about (`purchase_token`); nil only for a test notification.
    public var purchaseToken: String?
    /// The DeveloperNotification JSON text exactly as decoded from `message.data` (`notification`); nil for a
    /// reconciler's plain re-read of the token.
    public var notification: String?
    /// Pub/Sub's `messageId` (`message_id`), when the notification came through Pub/Sub.
    public var messageID: String?
    /// Pub/Sub's `publishTime` (`published_at`), when the notification came through Pub/Sub.
    public var publishedAt: Date?

    /// The longest purchase token carried (Google's tokens are far shorter; the bound keeps a Kafka key small).
    public static let maximumPurchaseTokenLength = 4096
    /// The longest Pub/Sub message id carried (Google's are decimal numbers of about 16 digits).
    public static let maximumMessageIDLength = 64

    /// The contract's rules (docs/messages.md, "Google Play notification jobs"). Errors name the field, never its
    /// value.
    func validate() throws {
        try ReceiptJob.checkIdentifier(packageName, field: "google_play_notification.package_name")
        if let purchaseToken {
            let field = "google_play_notification.purchase_token"
            if purchaseToken.isEmpty { throw MessageError(.invalidValue, field: field, "must not be empty") }
            if purchaseToken.utf8.count > Self.maximumPurchaseTokenLength {
                throw MessageError(.invalidValue, field: field, "longer than \(Self.maximumPurchaseTokenLength) bytes")
            }
            if Identifier.hasControlCharacter(purchaseToken) {
                throw MessageError(.invalidValue, field: field, "must not contain control characters")
            }
        }
        if let notification, notification.isEmpty {
            throw MessageError(.invalidValue, field: "google_play_notification.notification", "must not be empty")
        }
        if let messageID, !Self.isMessageID(messageID) {
            throw MessageError(
                .invalidValue, field: "google_play_notification.message_id",
                "must be 1-\(Self.maximumMessageIDLength) letters, digits or dashes")
        }
        if purchaseToken == nil, notification == nil {
            throw MessageError(
                .missingField, field: "google_play_notification.purchase_token|google_play_notification.notification",
                "one of them is required")
        }
    }

    /// Whether `text` is 1 to ``maximumMessageIDLength`` ASCII letters, digits or dashes: it becomes part of a job id.
    public static func isMessageID(_ text: String) -> Bool {
        guard !text.isEmpty, text.utf8.count <= maximumMessageIDLength else { return false }
        return text.utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                || byte == UInt8(ascii: "-")
        }
    }
}

extension GooglePlayNotification: Codable {
    enum CodingKeys: String, CodingKey, CaseIterable {
        case packageName = "package_name"
        case purchaseToken = "purchase_token"
        case notification
        case messageID = "message_id"
        case publishedAt = "published_at"
    }
}
