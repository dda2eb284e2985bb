import Foundation

/// An iOS 6 style transaction receipt: OpenStep text `{ "signature" = "…"; "purchase-info" = "…"; … }` whose
/// `purchase-info` is base64 of another such dictionary. Both the spaced form Apple emits and the compact form
/// (`{"a"="b";}`) are read.
struct TransactionReceipt {
    /// The outer dictionary's `environment` (absent means production; not covered by the signature).
    var environment: ReceiptEnvironment
    var bundleID: String?
    var transaction: ReceiptTransaction
    var purchaseInfo: [UInt8]
    /// The decoded `signature` value: version byte, RSA signature, certificate length, certificate.
    var signatureBlob: [UInt8]?
    var purchaseDate: Date?

    /// Why text is not a transaction receipt.
    struct FormatError: Error {
        var reason: String
    }

    /// True when the bytes start (after whitespace) with `{` and contain a quote: cheap detection.
    static func looksLikeTransactionReceipt(_ bytes: [UInt8]) -> Bool {
        guard let first = bytes.first(where: { !ReceiptInput.isWhitespace($0) }) else { return false }
        return first == UInt8(ascii: "{") && bytes.prefix(64).contains(UInt8(ascii: "\""))
    }

    init(bytes: [UInt8]) throws(FormatError) {
        let outer = try Self.dictionary(bytes[...])
        guard let info = outer["purchase-info"] else { throw FormatError(reason: "no purchase-info") }
        guard let decoded = Base64.decode(info.utf8) else { throw FormatError(reason: "purchase-info is not base64") }
        let fields = try Self.dictionary(decoded[...])
        purchaseInfo = decoded
        environment = outer["environment"].map { ReceiptEnvironment.normalized($0) } ?? .production
        signatureBlob = outer["signature"].flatMap { Base64.decode($0.utf8) }
        bundleID = fields["bid"]
        guard let transactionID = fields["transaction-id"] else {
            throw FormatError(reason: "purchase-info has no transaction-id")
        }
        purchaseDate = Self.milliseconds(fields["purchase-date-ms"])
        transaction = ReceiptTransaction(
            transactionID: transactionID,
            originalTransactionID: fields["original-transaction-id"],
            productID: fields["product-id"],
            purchaseDate: purchaseDate,
            originalPurchaseDate: Self.milliseconds(fields["original-purchase-date-ms"]),
            // In iOS 6 subscription receipts `expires-date` holds milliseconds.
            expiresDate: Self.milliseconds(fields["expires-date"]),
            cancellationDate: Self.milliseconds(fields["cancellation-date-ms"] ?? fields["cancellation-date"]),
            quantity: fields["quantity"].flatMap { Int($0) },
            webOrderLineItemID: fields["web-order-line-item-id"])
    }

    private static func milliseconds(_ text: String?) -> Date? {
        guard let text, let value = Int64(text) else { return nil }
        return Date(timeIntervalSince1970: Double(value) / 1000)
    }

    /// The largest number of entries a receipt dictionary may hold; real ones have about 20.
    static let maximumEntries = 256

    /// Parses one OpenStep dictionary of string keys and string values, iteratively and with bounds.
    static func dictionary(_ text: ArraySlice<UInt8>) throws(FormatError) -> [String: String] {
        var position = text.startIndex
        let end = text.endIndex
        func skipWhitespace() {
            while position < end, ReceiptInput.isWhitespace(text[position]) { position += 1 }
        }
        func token() throws(FormatError) -> String {
            skipWhitespace()
            guard position < end else { throw FormatError(reason: "unexpected end of text") }
            if text[position] == UInt8(ascii: "\"") {
                position += 1
                var value: [UInt8] = []
                while position < end, text[position] != UInt8(ascii: "\"") {
                    if text[position] == UInt8(ascii: "\\"), position + 1 < end { position += 1 }
                    value.append(text[position])
                    position += 1
                }
                guard position < end else { throw FormatError(reason: "unterminated string") }
                position += 1
                return String(decoding: value, as: UTF8.self)
            }
            let start = position
            while position < end {
                let byte = text[position]
                if ReceiptInput.isWhitespace(byte) || byte == UInt8(ascii: "=") || byte == UInt8(ascii: ";")
                    || byte == UInt8(ascii: "}")
                {
                    break
                }
                position += 1
            }
            guard position > start else { throw FormatError(reason: "expected a key or value") }
            return String(decoding: text[start..<position], as: UTF8.self)
        }
        func expect(_ character: Character) throws(FormatError) {
            skipWhitespace()
            guard position < end, text[position] == UInt8(ascii: character.unicodeScalars.first!) else {
                throw FormatError(reason: "expected \"\(character)\"")
            }
            position += 1
        }
        try expect("{")
        var result: [String: String] = [:]
        while true {
            skipWhitespace()
            guard position < end else { throw FormatError(reason: "unterminated dictionary") }
            if text[position] == UInt8(ascii: "}") { break }
            guard result.count < maximumEntries else { throw FormatError(reason: "too many entries") }
            let key = try token()
            try expect("=")
            let value = try token()
            try expect(";")
            result[key] = value
        }
        return result
    }
}
