import Foundation
import Messages

/// Turns a Cloud Pub/Sub push (the envelope `{"message":{"data":…,"messageId":…,"publishTime":…},"subscription":…}`
/// whose `data` is base64 of a Google Play DeveloperNotification) into a ``GooglePlayNotificationJob``, or into a
/// reason to acknowledge it without a job.
///
/// Why a bad push is acknowledged (2xx) and not refused (4xx): Pub/Sub treats every answer but a 2xx as a failure
/// and delivers the same message again until it expires (7 days by default), so a message that can never make a job
/// would be pushed for a week. Such a message is counted (`verify_gateway_notifications_discarded_total{reason}`) and
/// logged without its content, never published as a junk job. What the notification says about a purchase is not
/// judged here: a token the ledger never saw is the worker's to decide.
public struct GooglePlayPushIntake: Sendable {
    /// The `account_id` of the jobs (`gateway_google_play_notification_account`).
    public var accountID: String = GooglePlayNotificationJob.defaultAccountID
    /// The Play apps' package names; a notification for another is discarded. Empty: every package is published
    /// (the worker refuses an unknown app).
    public var packages: Set<String> = []
    /// The push subscription the envelope must name, when configured.
    public var subscription: String?
    /// The largest body read.
    public var maximumBytes: Int = 1 << 20
    /// Now, for `submitted_at`.
    public var now: @Sendable () -> Date = Date.init

    /// Why a push makes no job (the `reason` label of the discard counter, and the answer's `discarded`).
    public enum Discard: String, Sendable, CaseIterable {
        /// The body is larger than `max_message_bytes`.
        case tooLarge = "too_large"
        /// The body is not a JSON object.
        case notJSON = "not_json"
        /// The envelope has no `message` object.
        case noMessage = "no_message"
        /// The message has no `data` string.
        case noData = "no_data"
        /// `data` is not base64.
        case dataNotBase64 = "data_not_base64"
        /// `data` decodes to something that is not UTF-8 JSON.
        case dataNotJSON = "data_not_json"
        /// `data` is JSON but no DeveloperNotification (no `packageName`, no notification, a field of a wrong type).
        case notDeveloperNotification = "not_developer_notification"
        /// The message has no usable `messageId` (1-64 letters, digits or dashes): no job id.
        case noMessageID = "no_message_id"
        /// The package is none of the configured Play apps'.
        case unknownPackage = "unknown_package"
        /// The notification makes no valid job (a token too long or with control characters, …).
        case invalidJob = "invalid_job"
    }

    /// What becomes of a push.
    public enum Outcome: Sendable, Equatable {
        /// Publish this job, then acknowledge.
        case job(ReceiptJob)
        /// Acknowledge without publishing.
        case discard(Discard)
    }

    /// The outcome of an authenticated push's body. Throws only when the envelope names another subscription than
    /// the configured one (401: that push was meant for someone else).
    public func outcome(of body: [UInt8]) throws(GatewayError) -> Outcome {
        guard body.count <= maximumBytes,
            let envelope = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
        else { return .discard(.notJSON) }
        if let subscription, envelope["subscription"] as? String != subscription {
            throw GatewayError(
                .unauthenticated, field: "subscription", "the envelope's subscription is not the configured one")
        }
        guard let message = envelope["message"] as? [String: Any] else { return .discard(.noMessage) }
        guard let data = message["data"] as? String else { return .discard(.noData) }
        guard let decoded = Data(base64Encoded: data) ?? Base64URL.decode(data) else {
            return .discard(.dataNotBase64)
        }
        guard let text = String(validating: Array(decoded), as: UTF8.self),
            (try? JSONSerialization.jsonObject(with: decoded, options: [.fragmentsAllowed])) != nil
        else { return .discard(.dataNotJSON) }
        guard let notification = try? DeveloperNotification.parse(text) else {
            return .discard(.notDeveloperNotification)
        }
        guard let messageID = (message["messageId"] ?? message["message_id"]) as? String,
            GooglePlayNotification.isMessageID(messageID)
        else { return .discard(.noMessageID) }
        if !packages.isEmpty, !packages.contains(notification.packageName) { return .discard(.unknownPackage) }
        let published = ((message["publishTime"] ?? message["publish_time"]) as? String).flatMap(RFC3339.parse)
        let job = GooglePlayNotificationJob.job(
            packageName: notification.packageName, purchaseToken: notification.purchaseToken, notification: text,
            messageID: messageID, publishedAt: published, accountID: accountID, submittedAt: now())
        guard (try? job.validate()) != nil else { return .discard(.invalidJob) }
        return .job(job)
    }
}
