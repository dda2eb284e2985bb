import Foundation

/// Writes jobs and verdicts as JSON by hand, byte for byte what ``MessageCodec``'s `JSONEncoder` setup writes (keys
/// sorted, slashes not escaped, absent optionals left out, a transaction's absent dates as `null`).
///
/// Both messages sit on the hot path of every job (the frontend writes the job, the worker its verdict), and
/// `JSONEncoder` builds a value tree, sorts its keys and escapes each string scalar by scalar: on locally decided
/// traffic it was the largest single cost of the bench frontend and a large one in the worker (`bench pipeline`
/// (b)). The keys here are written already sorted; `MessageCodecTests` checks the bytes against `JSONEncoder`'s.
struct MessageJSONWriter {
    private(set) var bytes: [UInt8] = []
    private var needsComma = false

    init(capacity: Int) { bytes.reserveCapacity(capacity) }

    static func encode(_ job: ReceiptJob) -> [UInt8] {
        var writer = MessageJSONWriter(capacity: job.proof.value.utf8.count + 256)
        writer.beginObject()
        writer.field("account_id", job.accountID)
        writer.field("app_account_token", job.appAccountToken)
        writer.field("bundle_id", job.bundleID)
        writer.field("device_id", job.deviceID)
        writer.field("expected_product_id", job.expectedProductID)
        writer.field("job_id", job.jobID)
        if case .notification(let value) = job.proof { writer.field("notification", value) }
        if case .receipt(let value) = job.proof { writer.field("receipt", value) }
        writer.field("schema", ReceiptJob.schema)
        if case .signedTransaction(let value) = job.proof { writer.field("signed_transaction", value) }
        writer.field("submitted_at", job.submittedAt.map(RFC3339.format))
        if case .transactionID(let value) = job.proof { writer.field("transaction_id", value) }
        writer.endObject()
        return writer.bytes
    }

    static func encode(_ verdict: Verdict) -> [UInt8] {
        var writer = MessageJSONWriter(capacity: 320 + verdict.transactions.count * 256)
        writer.beginObject()
        writer.field("account_id", verdict.accountID)
        if let status = verdict.appleStatus { writer.field("apple_status", status) }
        writer.field("decided_at", RFC3339.format(verdict.decidedAt))
        writer.field("decided_by", verdict.decidedBy.rawValue)
        writer.field("environment", verdict.environment)
        writer.field("job_id", verdict.jobID)
        writer.field("outcome", verdict.outcome.rawValue)
        writer.field("reason", verdict.reason?.rawValue)
        writer.field("schema", Verdict.schema)
        writer.key("transactions")
        writer.bytes.append(UInt8(ascii: "["))
        writer.needsComma = false
        for transaction in verdict.transactions {
            writer.separate()
            writer.beginObject()
            // Written even when absent (null): the contract lists these fields on every transaction.
            writer.nullableField("expires_date", transaction.expiresDate.map(RFC3339.format))
            writer.field("grace_period_expires_date", transaction.gracePeriodExpiresDate.map(RFC3339.format))
            if let inBillingRetry = transaction.inBillingRetry { writer.field("in_billing_retry", inBillingRetry) }
            writer.nullableField("original_transaction_id", transaction.originalTransactionID)
            writer.field("product_id", transaction.productID)
            writer.nullableField("purchase_date", transaction.purchaseDate.map(RFC3339.format))
            if let quantity = transaction.quantity { writer.field("quantity", quantity) }
            writer.nullableField("revoked_at", transaction.revokedAt.map(RFC3339.format))
            writer.field("transaction_id", transaction.transactionID)
            writer.endObject()
        }
        writer.bytes.append(UInt8(ascii: "]"))
        writer.needsComma = true
        writer.field("verdict_id", verdict.verdictID)
        writer.endObject()
        return writer.bytes
    }

    // MARK: Pieces

    private mutating func separate() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
        needsComma = true
    }

    private mutating func beginObject() {
        bytes.append(UInt8(ascii: "{"))
        needsComma = false
    }

    private mutating func endObject() {
        bytes.append(UInt8(ascii: "}"))
        needsComma = true
    }

    /// A key known to need no escaping (the contract's field names).
    private mutating func key(_ name: StaticString) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    /// Left out when nil.
    private mutating func field(_ name: StaticString, _ value: String?) {
        guard let value else { return }
        key(name)
        string(value)
    }

    /// `null` when nil.
    private mutating func nullableField(_ name: StaticString, _ value: String?) {
        key(name)
        if let value { string(value) } else { bytes.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C]) }
    }

    private mutating func field(_ name: StaticString, _ value: Bool) {
        key(name)
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
    }

    private mutating func field(_ name: StaticString, _ value: Int) {
        key(name)
        bytes.append(contentsOf: String(value).utf8)
    }

    /// A JSON string: `"` and `\` escaped, control characters as `\b \t \n \f \r` or `\u00XX`, the rest (`/` and
    /// non-ASCII included) as is, as `JSONEncoder` with `.withoutEscapingSlashes` writes them.
    private mutating func string(_ value: String) {
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
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(byte)
                case 0x08: bytes.append(UInt8(ascii: "b"))
                case 0x09: bytes.append(UInt8(ascii: "t"))
                case 0x0A: bytes.append(UInt8(ascii: "n"))
                case 0x0C: bytes.append(UInt8(ascii: "f"))
                case 0x0D: bytes.append(UInt8(ascii: "r"))
                default:
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
