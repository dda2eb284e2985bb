import Foundation
import Messages

// The projection's stored JSON (history entries, lifecycle events), written by Messages' `JSONWriter`: `JSONEncoder`
// was a quarter of the projection's CPU (`bench entitlements`, perf). The output is what `JSONDecoder` reads back
// into the same values (`Entitlement stores` round-trips them).

extension LifecycleEvent {
    /// The event's JSON (`entitlement-event/v1`), as stored, published and POSTed.
    public var json: [UInt8] {
        var writer = JSONWriter(capacity: 512)
        write(to: &writer)
        return writer.bytes
    }

    func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("schema", Self.schema)
        writer.field("event_id", eventID)
        writer.field("type", kind.rawValue)
        writer.field("account_id", accountID)
        writer.field("entitlement_id", entitlementID)
        writer.field("active", active)
        writer.field("product_id", productID)
        writer.field("transaction_id", transactionID)
        writer.field("original_transaction_id", originalTransactionID)
        writer.field("store", store.rawValue)
        writer.field("expires_at", expiresAt)
        writer.field("occurred_at", occurredAt)
        writer.field("verdict_id", verdictID)
        writer.optionalField("from_account_id", fromAccountID)
        writer.optionalField("to_account_id", toAccountID)
        writer.optionalField("revocation_type", revocation?.type?.rawValue)
        if let percentage = revocation?.percentage { writer.field("revocation_percentage", percentage) }
        if let reason = revocation?.reason { writer.field("revocation_reason", reason) }
        writer.endObject()
    }
}

extension HistoryEntry {
    /// The entry's stored JSON (read back by its `Decodable` conformance).
    var json: [UInt8] {
        var writer = JSONWriter(capacity: 512 + transactions.count * 200)
        writer.beginObject()
        writer.field("sequence", sequence)
        writer.field("account_id", accountID)
        writer.field("kind", kind.rawValue)
        writer.field("recorded_at", recordedAt)
        if let occurredAt { writer.field("occurred_at", occurredAt) }
        writer.optionalField("verdict_id", verdictID)
        writer.optionalField("job_id", jobID)
        writer.optionalField("outcome", outcome)
        writer.optionalField("reason", reason)
        writer.optionalField("decided_by", decidedBy)
        writer.optionalField("store", store?.rawValue)
        writer.optionalField("environment", environment)
        writer.optionalField("effect", effect?.rawValue)
        writer.optionalField("problem", problem)
        writer.key("transactions")
        writer.beginArray()
        for transaction in transactions {
            writer.beginObject()
            writer.field("transaction_id", transaction.transactionID)
            writer.field("original_transaction_id", transaction.originalTransactionID)
            writer.field("product_id", transaction.productID)
            writer.field("purchase_date", transaction.purchaseDate)
            writer.field("expires_date", transaction.expiresDate)
            writer.field("revoked_at", transaction.revokedAt)
            if let quantity = transaction.quantity { writer.field("quantity", quantity) }
            writer.optionalField("order_id", transaction.orderID)
            writer.endObject()
        }
        writer.endArray()
        writer.key("notes")
        writer.beginArray()
        for note in notes { writer.string(note) }
        writer.endArray()
        if let event {
            writer.key("event")
            event.write(to: &writer)
        }
        if let revocations {
            writer.key("revocations")
            writer.beginArray()
            for revocation in revocations {
                writer.beginObject()
                writer.field("transaction_id", revocation.transactionID)
                writer.optionalField("revocation_type", revocation.type)
                if let percentage = revocation.percentage { writer.field("revocation_percentage", percentage) }
                writer.optionalField("revocation_reason", revocation.reason)
                writer.endObject()
            }
            writer.endArray()
        }
        writer.endObject()
        return writer.bytes
    }
}
