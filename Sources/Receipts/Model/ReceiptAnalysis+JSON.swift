import Foundation
import Messages

extension ReceiptAnalysis {
    /// The JSON object `verify-worker inspect` prints (with the judgement it adds): snake-case keys, RFC 3339
    /// dates, absent values omitted.
    public var jsonObject: [String: any Sendable] {
        var object: [String: any Sendable] = [
            "format": format.rawValue,
            "signature": signatureObject,
            "transactions": transactions.map(\.jsonObject),
        ]
        object["environment"] = environment?.rawValue ?? unrecognizedEnvironment
        object["bundle_id"] = bundleID
        object["signed_date"] = signedDate.map(receiptDate)
        object["app_version"] = appVersion
        object["original_app_version"] = originalAppVersion
        object["reason"] = unknownReason
        if let notification {
            object["notification_type"] = notification.notificationType
            object["subtype"] = notification.subtype
            object["notification_uuid"] = notification.notificationUUID
        }
        if let renewalInfo {
            var renewal: [String: any Sendable] = [:]
            renewal["original_transaction_id"] = renewalInfo.originalTransactionID
            renewal["product_id"] = renewalInfo.productID
            renewal["auto_renew_product_id"] = renewalInfo.autoRenewProductID
            renewal["auto_renew_status"] = renewalInfo.autoRenewStatus
            renewal["expiration_intent"] = renewalInfo.expirationIntent
            renewal["renewal_date"] = renewalInfo.renewalDate.map(receiptDate)
            renewal["is_in_billing_retry_period"] = renewalInfo.isInBillingRetryPeriod
            object["renewal_info"] = renewal
        }
        return object
    }

    private var signatureObject: [String: any Sendable] {
        var object: [String: any Sendable] = ["status": signature.code]
        object["reason"] = signature.reason
        return object
    }

    /// The analysis as pretty, key-sorted JSON text, with `members` added to its object.
    public func jsonText(adding members: [String: any Sendable] = [:]) -> String {
        let object = jsonObject.merging(members) { _, added in added }
        guard
            let data = try? JSONSerialization.data(
                withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }
}

extension ReceiptTransaction {
    var jsonObject: [String: any Sendable] {
        var object: [String: any Sendable] = ["transaction_id": transactionID]
        object["original_transaction_id"] = originalTransactionID
        object["product_id"] = productID
        object["purchase_date"] = purchaseDate.map(receiptDate)
        object["original_purchase_date"] = originalPurchaseDate.map(receiptDate)
        object["expires_date"] = expiresDate.map(receiptDate)
        object["cancellation_date"] = cancellationDate.map(receiptDate)
        object["revocation_date"] = revocationDate.map(receiptDate)
        object["revocation_reason"] = revocationReason
        object["quantity"] = quantity
        object["web_order_line_item_id"] = webOrderLineItemID
        object["type"] = productType
        object["app_account_token"] = appAccountToken
        return object
    }
}

/// A receipt date as `inspect` prints it: `.mmm` only when the date has milliseconds.
private func receiptDate(_ date: Date) -> String { RFC3339.format(date, precision: .millisecondsWhenPresent) }
