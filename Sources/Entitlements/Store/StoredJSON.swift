import Foundation
import Messages

/// Writes the projection's stored JSON (history entries, lifecycle events, PostgreSQL row documents) by hand.
///
/// `JSONEncoder` builds a value tree and escapes each string scalar by scalar: it was a quarter of the projection's
/// CPU (`bench entitlements`, perf), more than SQLite itself. The output is what `JSONDecoder` reads back into the
/// same values (`Entitlement stores` round-trips them).
struct StoredJSONWriter {
    private(set) var bytes: [UInt8] = []
    private var needsComma = false

    init(capacity: Int = 512) { bytes.reserveCapacity(capacity) }

    var text: String { String(decoding: bytes, as: UTF8.self) }

    mutating func beginObject() {
        separate()
        bytes.append(UInt8(ascii: "{"))
        needsComma = false
    }

    mutating func endObject() {
        bytes.append(UInt8(ascii: "}"))
        needsComma = true
    }

    mutating func beginArray() {
        separate()
        bytes.append(UInt8(ascii: "["))
        needsComma = false
    }

    mutating func endArray() {
        bytes.append(UInt8(ascii: "]"))
        needsComma = true
    }

    /// A key that needs no escaping (this file's own field names). The value follows.
    mutating func key(_ name: StaticString) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
        needsComma = false
    }

    mutating func field(_ name: StaticString, _ value: String?) {
        key(name)
        if let value { string(value) } else { null() }
    }

    mutating func field(_ name: StaticString, _ value: Date?) {
        field(name, value.map(RFC3339.format))
    }

    mutating func field(_ name: StaticString, _ value: Int) {
        key(name)
        separate()
        bytes.append(contentsOf: String(value).utf8)
    }

    mutating func field(_ name: StaticString, _ value: Int64) {
        key(name)
        separate()
        bytes.append(contentsOf: String(value).utf8)
    }

    mutating func field(_ name: StaticString, _ value: Bool) {
        key(name)
        separate()
        bytes.append(contentsOf: value ? Array("true".utf8) : Array("false".utf8))
    }

    /// Left out when nil.
    mutating func optionalField(_ name: StaticString, _ value: String?) {
        guard let value else { return }
        field(name, value)
    }

    /// An already-written JSON value (a nested document).
    mutating func raw(_ name: StaticString, _ json: [UInt8]) {
        key(name)
        separate()
        bytes.append(contentsOf: json)
    }

    mutating func null() {
        separate()
        bytes.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C])
    }

    private mutating func separate() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
        needsComma = true
    }

    /// A JSON string: `"` and `\` escaped, control characters as `\uXXXX`, the rest as is.
    mutating func string(_ value: String) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { utf8 in
            var runStart = 0
            for index in utf8.indices {
                let byte = utf8[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
                runStart = index + 1
                bytes.append(UInt8(ascii: "\\"))
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                    bytes.append(byte)
                } else {
                    let hex = Array("0123456789abcdef".utf8)
                    bytes.append(contentsOf: [
                        UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)],
                        hex[Int(byte & 0xF)],
                    ])
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<utf8.count]))
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

extension LifecycleEvent {
    /// The event's JSON (`entitlement-event/v1`), as stored, published and POSTed.
    public var json: [UInt8] {
        var writer = StoredJSONWriter(capacity: 512)
        write(to: &writer)
        return writer.bytes
    }

    func write(to writer: inout StoredJSONWriter) {
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
        writer.field("expires_at", expiresAt)
        writer.field("occurred_at", occurredAt)
        writer.field("verdict_id", verdictID)
        writer.optionalField("from_account_id", fromAccountID)
        writer.optionalField("to_account_id", toAccountID)
        writer.endObject()
    }
}

extension HistoryEntry {
    /// The entry's stored JSON (read back by its `Decodable` conformance).
    var json: [UInt8] {
        var writer = StoredJSONWriter(capacity: 512 + transactions.count * 200)
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
        writer.endObject()
        return writer.bytes
    }
}
