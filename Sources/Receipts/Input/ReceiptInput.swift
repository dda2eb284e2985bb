/// Turns what a client sent into the bytes of a receipt: raw bytes pass through, base64 text (standard or
/// URL-safe, padded or not, wrapped over lines, or with the `+` turned into spaces by form encoding) is decoded,
/// and JWS compact text is kept as text because its signature covers the text itself.
public enum ReceiptInput {
    /// The default bound on decoded input: 1 MiB. The largest real receipts are a few hundred KiB.
    public static let defaultMaximumDecodedSize = 1 << 20

    /// Why input could not be turned into receipt bytes.
    public enum Rejection: Error, Sendable, Equatable, CustomStringConvertible {
        /// The input decodes (or would decode) to more than the limit; it was rejected before decoding.
        case tooLarge(decodedSize: Int, limit: Int)
        /// The input is empty or only whitespace.
        case empty

        public var description: String {
            switch self {
            case .tooLarge(let size, let limit): "input too large: about \(size) bytes decoded, limit \(limit)"
            case .empty: "input is empty"
            }
        }
    }

    /// The bytes to analyze: base64 text is decoded, anything else (binary DER, JWS compact text, OpenStep text)
    /// is returned unchanged. The size limit applies to the decoded size, estimated before decoding.
    public static func normalize(
        _ input: [UInt8], maximumDecodedSize: Int = defaultMaximumDecodedSize
    ) throws(Rejection)
        -> [UInt8]
    {
        let trimmed = trimWhitespace(input)
        guard !trimmed.isEmpty else { throw .empty }
        // Checked before any decoding work: base64 shrinks by 3/4, anything else is taken as it is. Text more
        // than twice the limit cannot fit even with line breaks, so it is refused without being scanned.
        guard trimmed.count / 2 <= maximumDecodedSize else {
            throw .tooLarge(decodedSize: trimmed.count / 4 * 3, limit: maximumDecodedSize)
        }
        if isJWSText(trimmed) {
            guard trimmed.count <= maximumDecodedSize else {
                throw .tooLarge(decodedSize: trimmed.count, limit: maximumDecodedSize)
            }
            return Array(trimmed)
        }
        // The common case in one pass: text that is base64 (as `looksLikeBase64` defines it) and decodes. The
        // estimate bounds the output before any byte is decoded.
        if trimmed.count / 4 * 3 <= maximumDecodedSize, let decoded = Base64.decodeIfBase64(trimmed),
            decoded.significant >= 4
        {
            guard decoded.bytes.count <= maximumDecodedSize else {
                throw .tooLarge(decodedSize: decoded.bytes.count, limit: maximumDecodedSize)
            }
            return decoded.bytes
        }
        let isBase64 = looksLikeBase64(trimmed)
        let estimate = isBase64 ? trimmed.count / 4 * 3 : trimmed.count
        guard estimate <= maximumDecodedSize else {
            throw .tooLarge(decodedSize: estimate, limit: maximumDecodedSize)
        }
        if isBase64, let decoded = Base64.decode(trimmed) {
            guard decoded.count <= maximumDecodedSize else {
                throw .tooLarge(decodedSize: decoded.count, limit: maximumDecodedSize)
            }
            return decoded
        }
        // Binary DER (a SEQUENCE) keeps its trailing bytes: they are signature bits and may well be 0x00, 0x20 or a
        // line feed. Only text is trimmed.
        if trimmed.first == 0x30 { return Array(input[trimmed.startIndex...]) }
        return Array(trimmed)
    }

    /// True for `header.payload.signature` text made of base64url characters, the header starting with `eyJ`
    /// (`{"`), which is how every JWS Apple produces begins.
    static func isJWSText(_ bytes: ArraySlice<UInt8>) -> Bool {
        guard bytes.count > 8, bytes.starts(with: [0x65, 0x79, 0x4A]) else { return false }
        var dots = 0
        for byte in bytes {
            if byte == UInt8(ascii: ".") {
                dots += 1
            } else if Base64.value(of: byte) == nil {
                return false
            }
        }
        return dots == 2
    }

    /// True when every byte is a base64 character (either alphabet), `=`, whitespace, or a space standing for `+`.
    static func looksLikeBase64(_ bytes: ArraySlice<UInt8>) -> Bool {
        var significant = 0
        for byte in bytes {
            if Base64.value(of: byte) != nil {
                significant += 1
            } else if byte == UInt8(ascii: "=") || isWhitespace(byte) {
                continue
            } else {
                return false
            }
        }
        return significant >= 4
    }

    static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09
    }

    static func trimWhitespace(_ input: [UInt8]) -> ArraySlice<UInt8> {
        var start = input.startIndex
        var end = input.endIndex
        while start < end, isWhitespace(input[start]) || input[start] == 0 { start += 1 }
        while end > start, isWhitespace(input[end - 1]) || input[end - 1] == 0 { end -= 1 }
        return input[start..<end]
    }
}
