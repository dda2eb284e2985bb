import Foundation

/// Writes jobs and verdicts as JSON by hand, byte for byte what ``MessageCodec``'s `JSONEncoder` setup writes (keys
/// sorted, slashes not escaped, absent optionals left out, a transaction's absent dates as `null`).
///
/// Both messages sit on the hot path of every job (the frontend writes the job, the worker its verdict), and
/// `JSONEncoder` builds a value tree, sorts its keys and escapes each string scalar by scalar: on locally decided
/// traffic it was the largest single cost of the bench frontend and a large one in the worker (`bench pipeline`
/// (b)). The keys here are written already sorted; `MessageCodecTests` checks the bytes against `JSONEncoder`'s.
enum MessageJSONWriter {
    static func encode(_ job: ReceiptJob) -> [UInt8] {
        var capacity = job.proof.value.utf8.count + 256
        if case .googlePlay(let purchase) = job.proof {
            capacity += (purchase.purchaseData?.utf8.count ?? 0) + (purchase.signature?.utf8.count ?? 0) + 128
        }
        if case .googlePlayNotification(let notification) = job.proof {
            capacity += (notification.notification?.utf8.count ?? 0) + 192
        }
        var writer = JSONWriter(capacity: capacity)
        writer.beginObject()
        writer.field("account_id", job.accountID)
        writer.optionalField("app_account_token", job.appAccountToken)
        writer.optionalField("bundle_id", job.bundleID)
        writer.optionalField("device_id", job.deviceID)
        writer.optionalField("expected_product_id", job.expectedProductID)
        if case .googlePlay(let purchase) = job.proof {
            writer.key("google_play")
            writer.beginObject()
            writer.field("package_name", purchase.packageName)
            writer.field("product_id", purchase.productID)
            writer.optionalField("purchase_data", purchase.purchaseData)
            writer.field("purchase_token", purchase.purchaseToken)
            writer.optionalField("signature", purchase.signature)
            writer.endObject()
        }
        if case .googlePlayNotification(let notification) = job.proof {
            writer.key("google_play_notification")
            writer.beginObject()
            writer.optionalField("message_id", notification.messageID)
            writer.optionalField("notification", notification.notification)
            writer.field("package_name", notification.packageName)
            writer.optionalField("published_at", notification.publishedAt.map(RFC3339.format))
            writer.optionalField("purchase_token", notification.purchaseToken)
            writer.endObject()
        }
        writer.field("job_id", job.jobID)
        if case .notification(let value) = job.proof { writer.field("notification", value) }
        if case .receipt(let value) = job.proof { writer.field("receipt", value) }
        writer.field("schema", ReceiptJob.schema)
        if case .signedTransaction(let value) = job.proof { writer.field("signed_transaction", value) }
        writer.optionalField("submitted_at", job.submittedAt.map(RFC3339.format))
        if case .transactionID(let value) = job.proof { writer.field("transaction_id", value) }
        writer.endObject()
        return writer.bytes
    }

    static func encode(_ verdict: Verdict) -> [UInt8] {
        var writer = JSONWriter(capacity: 320 + verdict.transactions.count * 256)
        writer.beginObject()
        writer.field("account_id", verdict.accountID)
        if let status = verdict.appleStatus { writer.field("apple_status", status) }
        writer.field("decided_at", RFC3339.format(verdict.decidedAt))
        writer.field("decided_by", verdict.decidedBy.rawValue)
        writer.optionalField("environment", verdict.environment)
        writer.field("job_id", verdict.jobID)
        writer.field("outcome", verdict.outcome.rawValue)
        writer.optionalField("reason", verdict.reason?.rawValue)
        writer.field("schema", Verdict.schema)
        writer.field("store", verdict.store.rawValue)
        writer.key("transactions")
        writer.beginArray()
        for transaction in verdict.transactions {
            writer.beginObject()
            // Written even when absent (null): the contract lists these fields on every transaction.
            writer.field("expires_date", transaction.expiresDate.map(RFC3339.format))
            writer.optionalField("grace_period_expires_date", transaction.gracePeriodExpiresDate.map(RFC3339.format))
            writer.optionalField("in_app_ownership_type", transaction.ownershipType?.rawValue)
            if let inBillingRetry = transaction.inBillingRetry { writer.field("in_billing_retry", inBillingRetry) }
            writer.optionalField("order_id", transaction.orderID)
            writer.field("original_transaction_id", transaction.originalTransactionID)
            if let paused = transaction.paused { writer.field("paused", paused) }
            writer.field("product_id", transaction.productID)
            writer.field("purchase_date", transaction.purchaseDate.map(RFC3339.format))
            writer.optionalField("purchase_token", transaction.purchaseToken)
            if let quantity = transaction.quantity { writer.field("quantity", quantity) }
            if let percentage = transaction.revocation?.percentage { writer.field("revocation_percentage", percentage) }
            if let reason = transaction.revocation?.reason { writer.field("revocation_reason", reason) }
            writer.optionalField("revocation_type", transaction.revocation?.type?.rawValue)
            writer.field("revoked_at", transaction.revokedAt.map(RFC3339.format))
            writer.field("transaction_id", transaction.transactionID)
            writer.endObject()
        }
        writer.endArray()
        writer.field("verdict_id", verdict.verdictID)
        writer.endObject()
        return writer.bytes
    }
}
