import Foundation
import Messages

/// An App Store Server Notification V2 as Apple sends it: the body is `{"signedPayload": JWS}`, the JWS signed by
/// the same chain as the simulator's transactions, its payload shaped like Apple's `ResponseBodyV2DecodedPayload`.
enum SimulatedNotification {
    /// `ResponseBodyV2DecodedPayload`.
    struct Payload: Encodable {
        var notificationType: String
        var subtype: String?
        var notificationUUID: String
        var data: DataPayload
        var version = "2.0"
        var signedDate: Int64
    }

    /// The `data` object of a notification.
    struct DataPayload: Encodable {
        /// Apple leaves it out in the sandbox.
        var appAppleId: Int64?
        var bundleId: String
        var bundleVersion: String?
        var environment: String
        var signedTransactionInfo: String?
        var signedRenewalInfo: String?
        var status: Int?
        var consumptionRequestReason: String?
    }

    /// What one notification is about; the signed payload is built from it at the moment it is sent.
    struct Event: Sendable {
        var type: String
        var subtype: String?
        var transaction: SimulatedTransaction?
        /// For subscriptions: the family's latest transaction and its first purchase date, for renewal info.
        var renewal: (latest: SimulatedTransaction, firstPurchaseMs: Int64)?
        var consumptionRequestReason: String?
        /// For a TEST notification, which carries no transaction.
        var bundleId: String?
        var environment: AppleEnvironment
    }

    /// Signs `event` as a notification with a fresh `notificationUUID`, signed now.
    static func sign(
        _ event: Event, uuid: String, appAppleId: Int64, pki: SimulatorPKI, nowMs: Int64
    ) throws -> String {
        var data = DataPayload(
            appAppleId: event.environment == .production ? appAppleId : nil,
            bundleId: event.transaction?.bundleId ?? event.bundleId ?? "",
            bundleVersion: event.transaction == nil ? nil : "1",
            environment: event.environment.rawValue,
            consumptionRequestReason: event.consumptionRequestReason)
        if let transaction = event.transaction {
            data.signedTransactionInfo = try SimulatedJWS.signTransaction(transaction, pki: pki, nowMs: nowMs)
        }
        if let renewal = event.renewal {
            data.signedRenewalInfo = try SimulatedJWS.signRenewalInfo(
                latest: renewal.latest, firstPurchaseMs: renewal.firstPurchaseMs, pki: pki, nowMs: nowMs)
            data.status = renewal.latest.subscriptionStatus(nowMs: nowMs)
        }
        return try SimulatedJWS.sign(
            Payload(
                notificationType: event.type, subtype: event.subtype, notificationUUID: uuid, data: data,
                signedDate: nowMs),
            pki: pki)
    }

    /// The HTTP body Apple posts.
    static func body(signedPayload: String) -> [UInt8] {
        VerifyReceiptService.json(["signedPayload": signedPayload])
    }
}
