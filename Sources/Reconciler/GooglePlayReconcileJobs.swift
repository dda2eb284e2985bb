import Foundation
import GooglePlayClients
import Messages

/// The jobs the reconciler makes about Play purchases (docs/messages.md, the `google_play_notification` job): a
/// voided purchase as the `voidedPurchaseNotification` Google would have sent, and a plain re-read of a token.
public enum GooglePlayReconcileJobs {
    /// Why a voided purchase makes no job.
    public struct Unusable: Error, Sendable, Hashable, CustomStringConvertible {
        public var description: String
    }

    /// The job of one voided purchase: job id `google-play-voided-<orderId>` (one job per voided order however often
    /// a sweep sees it), a `voidedPurchaseNotification` built from the record only and the product type, so every
    /// sweep that sees the order makes the same content. `refundType` 2 (quantity-based partial) when Google gives a
    /// `voidedQuantity`, else 1 (full); `productType` 1 (subscription) or 2 (one-time) when the ledger knows the token,
    /// else absent.
    public static func voided(
        _ record: GooglePlayVoidedPurchase, packageName: String, productType: Int?, accountID: String,
        submittedAt: Date
    ) throws -> ReceiptJob {
        guard let orderID = record.orderID, !orderID.isEmpty else {
            throw Unusable(description: "a voided purchase without an orderId")
        }
        guard let token = record.purchaseToken, !token.isEmpty else {
            throw Unusable(description: "voided order \(orderID) without a purchaseToken")
        }
        var voided: [String: Any] = [
            "purchaseToken": token, "orderId": orderID, "refundType": (record.voidedQuantity ?? 0) > 0 ? 2 : 1,
        ]
        if let productType { voided["productType"] = productType }
        let notification: [String: Any] = [
            "version": "1.0", "packageName": packageName,
            "eventTimeMillis": String(record.voidedTimeMillis ?? record.purchaseTimeMillis ?? 0),
            "voidedPurchaseNotification": voided,
        ]
        let data = try JSONSerialization.data(withJSONObject: notification, options: [.sortedKeys])
        let job = GooglePlayNotificationJob.job(
            packageName: packageName, purchaseToken: token, notification: String(decoding: data, as: UTF8.self),
            accountID: accountID, submittedAt: submittedAt,
            jobID: GooglePlayNotificationJob.voidedJobID(orderID: orderID))
        try job.validate()
        return job
    }

    /// A plain re-read of `purchaseToken` (no `notification`): job id
    /// `google-play-reread-<first 16 hex of SHA-256(token)>-<expiry ms the ledger holds>-<state>-<submittedAt ms>`, one
    /// job per re-read (a ledger state re-read before may since have changed at Google).
    public static func reread(
        packageName: String, purchaseToken: String, expiresDate: Date, state: String, accountID: String,
        submittedAt: Date
    ) throws -> ReceiptJob {
        let job = GooglePlayNotificationJob.job(
            packageName: packageName, purchaseToken: purchaseToken, notification: nil, accountID: accountID,
            submittedAt: submittedAt,
            jobID: GooglePlayNotificationJob.rereadJobID(
                purchaseToken: purchaseToken,
                expiryMillis: Int64((expiresDate.timeIntervalSince1970 * 1000).rounded()), state: state,
                rereadMillis: Int64((submittedAt.timeIntervalSince1970 * 1000).rounded())))
        try job.validate()
        return job
    }
}
