import Foundation
import Messages

/// An iOS 6 style transaction receipt: OpenStep text `{ "signature" = "…"; "purchase-info" = "…"; … }` whose
/// `purchase-info` is base64 of another such dictionary. Both the spaced form Apple emits and the compact form
/// (`{"a"="b";}`) are read.
///
/// Parsed at the byte level: keys are compared as bytes, values stay slices of the input, and only the fields a
/// transaction needs become strings. The `signature` value is decoded only when the signature is checked.
struct TransactionReceipt {
    /// The outer dictionary's `environment` (absent means production; not covered by the signature).
    var environment: String
    var bundleID: String?
    var transaction: ReceiptTransaction
    var purchaseInfo: [UInt8]
    /// The outer `signature` value, still base64.
    var signatureText: ArraySlice<UInt8>?
    var purchaseDate: Date?

    /// The decoded `signature` value: version byte, RSA signature, certificate length, certificate.
    var signatureBlob: [UInt8]? { signatureText.flatMap { Base64.decode($0) } }

    /// Why text is not a transaction receipt.
    struct FormatError: Error {
        var reason: String
    }

    /// True when the bytes start (after whitespace) with `{` and contain a quote: cheap detection.
    static func looksLikeTransactionReceipt(_ bytes: [UInt8]) -> Bool {
        guard let first = bytes.first(where: { !ReceiptInput.isWhitespace($0) }) else { return false }
        return first == UInt8(ascii: "{") && bytes.prefix(64).contains(UInt8(ascii: "\""))
    }

    /// The keys read. Static strings: comparing against them touches no reference count.
    private enum Key {
        static let purchaseInfo: StaticString = "purchase-info"
        static let signature: StaticString = "signature"
        static let environment: StaticString = "environment"
        static let bundleID: StaticString = "bid"
        static let transactionID: StaticString = "transaction-id"
        static let originalTransactionID: StaticString = "original-transaction-id"
        static let productID: StaticString = "product-id"
        static let purchaseDate: StaticString = "purchase-date-ms"
        static let originalPurchaseDate: StaticString = "original-purchase-date-ms"
        static let expiresDate: StaticString = "expires-date"
        static let cancellationDateMilliseconds: StaticString = "cancellation-date-ms"
        static let cancellationDate: StaticString = "cancellation-date"
        static let quantity: StaticString = "quantity"
        static let webOrderLineItemID: StaticString = "web-order-line-item-id"
    }

    init(bytes: [UInt8]) throws(FormatError) {
        let outer = bytes[...]
        var info: OpenStepValue?
        var environmentText: OpenStepValue?
        var signature: OpenStepValue?
        // Later duplicates win, as they would in a dictionary.
        try Self.forEachEntry(outer) { key, value in
            if Self.equal(key, Key.purchaseInfo) {
                info = value
            } else if Self.equal(key, Key.signature) {
                signature = value
            } else if Self.equal(key, Key.environment) {
                environmentText = value
            }
        }
        guard let info else { throw FormatError(reason: "no purchase-info") }
        guard let decoded = Base64.decode(info.bytes(in: outer)) else {
            throw FormatError(reason: "purchase-info is not base64")
        }
        let inner = decoded[...]
        var fields = PurchaseInfoFields()
        try Self.forEachEntry(inner) { key, value in fields.read(key: key, value: value) }
        func text(_ value: OpenStepValue) -> String { String(decoding: value.bytes(in: inner), as: UTF8.self) }
        func milliseconds(_ value: OpenStepValue?) -> Date? {
            value.flatMap { Self.milliseconds(value: $0.bytes(in: inner)) }
        }

        purchaseInfo = decoded
        environment =
            environmentText.map {
                ReceiptEnvironmentName.normalized(String(decoding: $0.bytes(in: outer), as: UTF8.self))
            } ?? AppleEnvironment.production.rawValue
        signatureText = signature?.bytes(in: outer)
        bundleID = fields.bundleID.map(text)
        guard let transactionID = fields.transactionID else {
            throw FormatError(reason: "purchase-info has no transaction-id")
        }
        purchaseDate = milliseconds(fields.purchaseDate)
        transaction = ReceiptTransaction(
            transactionID: text(transactionID),
            originalTransactionID: fields.originalTransactionID.map(text),
            productID: fields.productID.map(text),
            purchaseDate: purchaseDate,
            originalPurchaseDate: milliseconds(fields.originalPurchaseDate),
            // In iOS 6 subscription receipts `expires-date` holds milliseconds.
            expiresDate: milliseconds(fields.expiresDate),
            cancellationDate: milliseconds(fields.cancellationDateMilliseconds ?? fields.cancellationDate),
            quantity: fields.quantity.flatMap { Self.integer($0.bytes(in: inner)) }.flatMap { Int(exactly: $0) },
            webOrderLineItemID: fields.webOrderLineItemID.map(text))
    }

    /// The purchase-info values a transaction needs, as positions in the decoded purchase-info.
    private struct PurchaseInfoFields {
        var bundleID: OpenStepValue?
        var transactionID: OpenStepValue?
        var originalTransactionID: OpenStepValue?
        var productID: OpenStepValue?
        var purchaseDate: OpenStepValue?
        var originalPurchaseDate: OpenStepValue?
        var expiresDate: OpenStepValue?
        var cancellationDateMilliseconds: OpenStepValue?
        var cancellationDate: OpenStepValue?
        var quantity: OpenStepValue?
        var webOrderLineItemID: OpenStepValue?

        mutating func read(key: UnsafeBufferPointer<UInt8>, value: OpenStepValue) {
            // Dispatch on the length first: most keys (`item-id`, `bvrs`, `unique-identifier`, …) match none.
            switch key.count {
            case 3: if TransactionReceipt.equal(key, Key.bundleID) { bundleID = value }
            case 8: if TransactionReceipt.equal(key, Key.quantity) { quantity = value }
            case 10: if TransactionReceipt.equal(key, Key.productID) { productID = value }
            case 12: if TransactionReceipt.equal(key, Key.expiresDate) { expiresDate = value }
            case 14: if TransactionReceipt.equal(key, Key.transactionID) { transactionID = value }
            case 16: if TransactionReceipt.equal(key, Key.purchaseDate) { purchaseDate = value }
            case 17: if TransactionReceipt.equal(key, Key.cancellationDate) { cancellationDate = value }
            case 20:
                if TransactionReceipt.equal(key, Key.cancellationDateMilliseconds) {
                    cancellationDateMilliseconds = value
                }
            case 22: if TransactionReceipt.equal(key, Key.webOrderLineItemID) { webOrderLineItemID = value }
            case 23: if TransactionReceipt.equal(key, Key.originalTransactionID) { originalTransactionID = value }
            case 25: if TransactionReceipt.equal(key, Key.originalPurchaseDate) { originalPurchaseDate = value }
            default: break
            }
        }
    }

    @inline(__always)
    private static func equal(_ key: UnsafeBufferPointer<UInt8>, _ expected: StaticString) -> Bool {
        guard key.count == expected.utf8CodeUnitCount else { return false }
        guard let base = key.baseAddress else { return true }
        return memcmp(base, expected.utf8Start, key.count) == 0
    }

    private static func milliseconds(value text: ArraySlice<UInt8>) -> Date? {
        guard let value = integer(text) else { return nil }
        return Date(epochMilliseconds: Int64(value))
    }

    /// A decimal integer with an optional sign, as `Int64(String)` reads it; nil on anything else or overflow.
    static func integer(_ text: ArraySlice<UInt8>) -> Int64? {
        var index = text.startIndex
        guard index < text.endIndex else { return nil }
        var negative = false
        if text[index] == UInt8(ascii: "-") || text[index] == UInt8(ascii: "+") {
            negative = text[index] == UInt8(ascii: "-")
            index += 1
            guard index < text.endIndex else { return nil }
        }
        var value: Int64 = 0
        while index < text.endIndex {
            let digit = text[index] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            let (shifted, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (next, overflow2) =
                negative
                ? shifted.subtractingReportingOverflow(Int64(digit)) : shifted.addingReportingOverflow(Int64(digit))
            guard !overflow1 && !overflow2 else { return nil }
            value = next
            index += 1
        }
        return value
    }

    /// The largest number of entries a receipt dictionary may hold; real ones have about 20.
    static let maximumEntries = 256

    /// Reads one OpenStep dictionary of string keys and string values, iteratively and with bounds, calling `body`
    /// with each key (its bytes, valid during the call) and value (its position in `text`, or its unescaped copy).
    static func forEachEntry(
        _ text: ArraySlice<UInt8>, _ body: (UnsafeBufferPointer<UInt8>, OpenStepValue) -> Void
    ) throws(FormatError) {
        let failure = text.withUnsafeBufferPointer { buffer -> FormatError? in
            // A non-empty buffer always has a base address.
            guard let base = buffer.baseAddress, !buffer.isEmpty else { return FormatError(reason: "expected \"{\"") }
            var scanner = OpenStepScanner(base: base, count: buffer.count)
            do throws(FormatError) {
                try scanner.expect(UInt8(ascii: "{"))
                var entries = 0
                while true {
                    scanner.skipWhitespace()
                    guard scanner.position < scanner.count else { throw FormatError(reason: "unterminated dictionary") }
                    if scanner.byte(at: scanner.position) == UInt8(ascii: "}") { break }
                    guard entries < maximumEntries else { throw FormatError(reason: "too many entries") }
                    let key = try scanner.token()
                    try scanner.expect(UInt8(ascii: "="))
                    let value = try scanner.token()
                    try scanner.expect(UInt8(ascii: ";"))
                    switch key {
                    case .range(let range):
                        body(UnsafeBufferPointer(start: base + range.lowerBound, count: range.count), value)
                    case .unescaped(let bytes):
                        bytes.withUnsafeBufferPointer { body($0, value) }
                    }
                    entries += 1
                }
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure }
    }
}

/// A value in OpenStep text: where it is, or (when it held escapes) its unescaped bytes.
enum OpenStepValue {
    /// Offsets from the start of the text.
    case range(Range<Int>)
    case unescaped([UInt8])

    /// The value's bytes, given the text it was read from.
    func bytes(in text: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        switch self {
        case .range(let range): text[(text.startIndex + range.lowerBound)..<(text.startIndex + range.upperBound)]
        case .unescaped(let bytes): bytes[...]
        }
    }
}

/// Walks OpenStep text in a buffer: quoted strings are found with `memchr`, so the long base64 values of a
/// receipt (the signature, the purchase-info) cost a vector scan, not a loop over their bytes.
private struct OpenStepScanner {
    typealias Token = OpenStepValue

    typealias FormatError = TransactionReceipt.FormatError

    let base: UnsafePointer<UInt8>
    let count: Int
    var position = 0

    /// The byte at `index`; callers check `index < count`.
    @inline(__always)
    func byte(at index: Int) -> UInt8 { base[index] }

    /// The offset of the first `byte` in `start..<end`, or nil.
    func find(_ byte: UInt8, from start: Int, to end: Int) -> Int? {
        guard start < end, let found = memchr(base + start, Int32(byte), end - start) else { return nil }
        return UnsafeRawPointer(found) - UnsafeRawPointer(base)
    }

    mutating func skipWhitespace() {
        while position < count, ReceiptInput.isWhitespace(byte(at: position)) { position += 1 }
    }

    mutating func expect(_ character: UInt8) throws(FormatError) {
        skipWhitespace()
        guard position < count, byte(at: position) == character else {
            throw FormatError(reason: "expected \"\(Character(Unicode.Scalar(character)))\"")
        }
        position += 1
    }

    mutating func token() throws(FormatError) -> Token {
        skipWhitespace()
        guard position < count else { throw FormatError(reason: "unexpected end of text") }
        if byte(at: position) == UInt8(ascii: "\"") {
            let start = position + 1
            guard let close = find(UInt8(ascii: "\""), from: start, to: count) else {
                throw FormatError(reason: "unterminated string")
            }
            guard find(UInt8(ascii: "\\"), from: start, to: close) != nil else {
                position = close + 1
                return .range(start..<close)
            }
            // An escape (rare): unescape byte by byte, since the quote found may itself be escaped.
            var value: [UInt8] = []
            position = start
            while position < count, byte(at: position) != UInt8(ascii: "\"") {
                if byte(at: position) == UInt8(ascii: "\\"), position + 1 < count { position += 1 }
                value.append(byte(at: position))
                position += 1
            }
            guard position < count else { throw FormatError(reason: "unterminated string") }
            position += 1
            return .unescaped(value)
        }
        let start = position
        while position < count {
            let byte = byte(at: position)
            if ReceiptInput.isWhitespace(byte) || byte == UInt8(ascii: "=") || byte == UInt8(ascii: ";")
                || byte == UInt8(ascii: "}")
            {
                break
            }
            position += 1
        }
        guard position > start else { throw FormatError(reason: "expected a key or value") }
        return .range(start..<position)
    }
}
