import Foundation

/// How a Google Play notification becomes a job, the same way wherever it comes from: the gateway (a Pub/Sub push of
/// a Real-time developer notification) and the reconciler (a voided purchase, a re-read of an unsure subscription)
/// (docs/messages.md, "Google Play notification jobs").
///
/// The job id is derived from what identifies the event, so a redelivery, or the same event seen twice, is one job;
/// the message key from the purchase token, so the notifications of one purchase keep their order while those of
/// different purchases are decided in parallel. Both are read without trust: the worker reads the purchase from
/// Google again.
public enum GooglePlayNotificationJob {
    /// The default `account_id` of Google Play notification jobs (they name no account; the worker finds the owner of
    /// the purchase in its ledger). Reserved like ``NotificationJob/defaultAccountID``.
    public static let defaultAccountID = "google-play-notification"
    /// Prefix of the `job_id` of a notification that came through Pub/Sub, followed by its `messageId`.
    public static let jobIDPrefix = "google-play-notification-"
    /// Prefix of the `job_id` of a voided purchase the reconciler found, followed by its order id.
    public static let voidedJobIDPrefix = "google-play-voided-"
    /// Prefix of the `job_id` of the reconciler's re-read of an unsure subscription.
    public static let rereadJobIDPrefix = "google-play-reread-"
    /// The last part of the message key of a test notification (it is about no purchase).
    public static let testKeyPart = "test"

    /// The job of one Google Play notification. `jobID` defaults to the Pub/Sub message's
    /// (``jobID(messageID:)``); the reconciler passes ``voidedJobID(orderID:)`` or
    /// ``rereadJobID(purchaseToken:expiryMillis:state:rereadMillis:)``. The job is not validated here: ``ReceiptJob/validate()``
    /// judges it, as it judges every job before it is published.
    public static func job(
        packageName: String, purchaseToken: String?, notification: String?, messageID: String? = nil,
        publishedAt: Date? = nil, accountID: String = defaultAccountID, submittedAt: Date, jobID: String? = nil
    ) -> ReceiptJob {
        let proof = GooglePlayNotification(
            packageName: packageName, purchaseToken: purchaseToken, notification: notification, messageID: messageID,
            publishedAt: publishedAt)
        return ReceiptJob(
            jobID: jobID ?? Self.jobID(messageID: messageID ?? ""), accountID: accountID,
            proof: .googlePlayNotification(proof), submittedAt: submittedAt)
    }

    /// The job id of a notification that came through Pub/Sub: every delivery of one message is one job.
    public static func jobID(messageID: String) -> String { jobIDPrefix + messageID }

    /// The job id of a voided purchase: one job per voided order however often the sweep sees it.
    public static func voidedJobID(orderID: String) -> String { voidedJobIDPrefix + orderID }

    /// The job id of a re-read of an unsure subscription: `<prefix><first 16 hex of SHA-256(token)>-<expiry ms the
    /// ledger holds>-<state>-<ms of the re-read>`. Each re-read is a job of its own, even of a ledger state re-read
    /// before: Google's state may have changed since (a renewal or a hold whose notification was lost), and a job id
    /// decided before is answered from its recorded verdict without reading Google.
    public static func rereadJobID(
        purchaseToken: String, expiryMillis: Int64, state: String, rereadMillis: Int64
    ) -> String {
        let digest = sha256Hex(Array(purchaseToken.utf8))
        return rereadJobIDPrefix + digest.prefix(16) + "-\(expiryMillis)-" + state + "-\(rereadMillis)"
    }

    /// The Kafka message key of a Google Play notification job: `<accountID>/<purchase_token>` (one lane per purchase),
    /// `<accountID>/test` for a notification about no purchase.
    public static func messageKey(of notification: GooglePlayNotification, accountID: String) -> String {
        accountID + "/" + (notification.purchaseToken ?? testKeyPart)
    }
}
