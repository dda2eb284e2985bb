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
        // Checked before any decoding work: base64 shrinks by 3/4, anything else is taken as it is.
        let isBase64 = looksLikeBase64(trimmed)
        let estimate = isBase64 ? trimmed.count / 4 * 3 : trimmed.count
        guard estimate <= maximumDecodedSize else {
            throw .tooLarge(decodedSize: estimate, limit: maximumDecodedSize)
        }
        if isJWSText(trimmed) { return Array(trimmed) }
        if isBase64, let decoded = Base64.decode(trimmed) {
            guard decoded.count <= maximumDecodedSize else {
                throw .tooLarge(decodedSize: decoded.count, limit: maximumDecodedSize)
            }
            return decoded
        }
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

/// A forgiving base64 decoder: both alphabets, optional padding, ignores line breaks, and reads a space between
/// base64 characters as the `+` that form encoding turned into a space.
public enum Base64 {
    /// The 6-bit value of one base64 character of either alphabet, or nil.
    @inline(__always)
    static func value(of byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): byte - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): byte - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"), UInt8(ascii: "-"): 62
        case UInt8(ascii: "/"), UInt8(ascii: "_"): 63
        default: nil
        }
    }

    /// Decodes base64 text; nil when a character is not base64 or the length cannot be valid.
    /// Spaces are read as `+`, line breaks and tabs are skipped, and decoding stops at the first `=`.
    public static func decode<Bytes: Collection<UInt8>>(_ text: Bytes) -> [UInt8]? {
        var output: [UInt8] = []
        output.reserveCapacity(text.count * 3 / 4 + 3)
        var accumulator: UInt32 = 0
        var count = 0
        for byte in text {
            let sextet: UInt8
            if let value = value(of: byte) {
                sextet = value
            } else if byte == 0x20 {
                sextet = 62  // form encoding turned `+` into a space
            } else if byte == 0x0A || byte == 0x0D || byte == 0x09 {
                continue
            } else if byte == UInt8(ascii: "=") {
                break
            } else {
                return nil
            }
            accumulator = accumulator << 6 | UInt32(sextet)
            count += 1
            if count == 4 {
                output.append(UInt8(truncatingIfNeeded: accumulator >> 16))
                output.append(UInt8(truncatingIfNeeded: accumulator >> 8))
                output.append(UInt8(truncatingIfNeeded: accumulator))
                accumulator = 0
                count = 0
            }
        }
        switch count {
        case 0: break
        case 2: output.append(UInt8(truncatingIfNeeded: accumulator >> 4))
        case 3:
            output.append(UInt8(truncatingIfNeeded: accumulator >> 10))
            output.append(UInt8(truncatingIfNeeded: accumulator >> 2))
        default: return nil
        }
        return output
    }

    /// Decodes base64url without padding (JWS segments); nil on any other character.
    static func decodeURL(_ text: ArraySlice<UInt8>) -> [UInt8]? {
        for byte in text where value(of: byte) == nil && byte != UInt8(ascii: "=") { return nil }
        return decode(text)
    }
}
