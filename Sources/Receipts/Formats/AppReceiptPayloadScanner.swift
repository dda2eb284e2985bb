import Foundation
import Messages

/// The fast reader of an app receipt's payload: the same attributes and in-app records as `AppReceipt`'s generic
/// BER reading, read straight from memory for definite-length DER (what Apple's App Store receipts use).
///
/// A 187-purchase receipt holds about 2,000 attributes, so the per-attribute cost dominates its parse. At the first
/// structure this reader does not handle alone (an indefinite length, a long tag, anything malformed) it gives up and
/// the generic reader reads the whole payload, so both paths accept and reject exactly the same inputs.
package struct AppReceiptPayloadScanner {
    /// What the payload says.
    package struct Fields {
        /// The environment's name (``ReceiptEnvironmentName``).
        var environment: String?
        var bundleID: String?
        var appVersion: String?
        var originalAppVersion: String?
        var creationDate: Date?
        var expirationDate: Date?
        var transactions: [ReceiptTransaction] = []
    }

    /// A definite-length element: its identifier and contents, as offsets into the buffer.
    struct Element {
        var identifier: UInt8
        var start: Int
        var end: Int
    }

    let base: UnsafePointer<UInt8>
    let count: Int

    /// Reads the payload, or nil when the generic reader must decide.
    static func read(_ payload: ArraySlice<UInt8>) -> Fields? {
        payload.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress, !buffer.isEmpty else { return nil }
            return AppReceiptPayloadScanner(base: base, count: buffer.count).fields()
        }
    }

    /// The element at `offset` ending by `limit`, when it has a definite length and a low tag number; nil where
    /// the generic reader would throw or read an indefinite length.
    @inline(__always)
    func element(at offset: Int, limit: Int) -> Element? {
        guard offset >= 0, offset + 2 <= limit, limit <= count else { return nil }
        let identifier = base[offset]
        guard identifier & 0x1F != 0x1F else { return nil }
        let first = base[offset + 1]
        var start = offset + 2
        var length: Int
        if first < 0x80 {
            length = Int(first)
        } else {
            let octets = Int(first & 0x7F)
            guard octets >= 1, octets <= 4, start + octets <= limit else { return nil }
            length = 0
            for index in 0..<octets { length = length << 8 | Int(base[start + index]) }
            start += octets
        }
        guard length <= limit - start else { return nil }
        return Element(identifier: identifier, start: start, end: start + length)
    }

    /// Calls `body` with each attribute `SEQUENCE { type INTEGER, version INTEGER, value OCTET STRING }` of the SET
    /// spanning `start..<end`; attributes of another shape are skipped as the generic reader skips them. Returns
    /// false when the generic reader must decide.
    @inline(__always)
    func forEachAttribute(from start: Int, to end: Int, _ body: (Int64, Element) -> Bool) -> Bool {
        var position = start
        while position < end {
            guard let attribute = element(at: position, limit: end) else { return false }
            position = attribute.end
            // Other children are skipped whole, as the generic reader skips them.
            guard attribute.identifier == BERTag.sequence else { continue }
            guard let type = element(at: attribute.start, limit: attribute.end),
                let version = element(at: type.end, limit: attribute.end),
                let value = element(at: version.end, limit: attribute.end)
            else { return false }
            guard value.end == attribute.end, let typeValue = integer(type), value.identifier == BERTag.octetString
            else { continue }
            guard body(typeValue, value) else { return false }
        }
        return true
    }

    private func fields() -> Fields? {
        guard let set = element(at: 0, limit: count), set.identifier == BERTag.set else { return nil }
        var fields = Fields()
        let complete = forEachAttribute(from: set.start, to: set.end) { type, value in
            switch type {
            case 0: fields.environment = string(value).map { ReceiptEnvironmentName.normalized($0) }
            case 2: fields.bundleID = string(value)
            case 3: fields.appVersion = string(value)
            case 12: fields.creationDate = date(value)
            case 19: fields.originalAppVersion = string(value)
            case 21: fields.expirationDate = date(value)
            case 17:
                guard let record = element(at: value.start, limit: value.end) else { return false }
                guard record.identifier == BERTag.set else { return true }  // skipped, as by the generic reader
                guard let transaction = inAppPurchase(record) else { return false }
                fields.transactions.append(transaction)
            default: break
            }
            return true
        }
        return complete ? fields : nil
    }

    private func inAppPurchase(_ set: Element) -> ReceiptTransaction? {
        var transaction = ReceiptTransaction(transactionID: "")
        let complete = forEachAttribute(from: set.start, to: set.end) { type, value in
            switch type {
            case 1701: transaction.quantity = innerInteger(value).map { Int(clamping: $0) }
            case 1702: transaction.productID = string(value)
            case 1703: transaction.transactionID = string(value) ?? ""
            case 1704: transaction.purchaseDate = date(value)
            case 1705: transaction.originalTransactionID = string(value)
            case 1706: transaction.originalPurchaseDate = date(value)
            case 1708: transaction.expiresDate = date(value)
            case 1711: transaction.webOrderLineItemID = innerInteger(value).map { String($0) }
            case 1712: transaction.cancellationDate = date(value)
            default: break
            }
            return true
        }
        return complete ? transaction : nil
    }

    /// The bytes of an element's contents.
    @inline(__always)
    private func contents(_ element: Element) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(start: base + element.start, count: element.end - element.start)
    }

    /// A non-negative INTEGER that fits in 63 bits, or nil (as `BERReader.integer`).
    private func integer(_ element: Element) -> Int64? {
        let length = element.end - element.start
        guard element.identifier == BERTag.integer, length > 0, length <= 9 else { return nil }
        let first = base[element.start]
        guard first & 0x80 == 0, length < 9 || first == 0 else { return nil }
        var value: Int64 = 0
        for index in element.start..<element.end { value = value << 8 | Int64(base[index]) }
        return value
    }

    /// The element inside an attribute value. Where this returns nil the generic reader's `try?` gives nil too:
    /// its header fails, or it is constructed (an indefinite length), which no string, date or integer accepts.
    @inline(__always)
    private func inner(_ value: Element) -> Element? { element(at: value.start, limit: value.end) }

    private func innerInteger(_ value: Element) -> Int64? { inner(value).flatMap(integer) }

    /// A string of any ASN.1 string type (UTF8String, IA5String, …), or nil.
    private func string(_ value: Element) -> String? {
        guard let inner = inner(value), inner.identifier & 0x20 == 0, inner.identifier >= 0x0C,
            inner.identifier <= 0x1E
        else { return nil }
        return String(decoding: contents(inner), as: UTF8.self)
    }

    /// An RFC 3339 date in any primitive element; empty means absent.
    private func date(_ value: Element) -> Date? {
        guard let inner = inner(value), inner.identifier & 0x20 == 0, inner.end > inner.start else { return nil }
        return RFC3339.parse(contents(inner))
    }
}
