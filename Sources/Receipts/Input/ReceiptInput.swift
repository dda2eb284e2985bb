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

    /// Per byte: its 6-bit value, `skip` for line breaks and tabs, `pad` for `=`, `invalid` otherwise.
    /// A space decodes as 62 (`+`), because form encoding turns `+` into a space.
    private static let table: [UInt8] = {
        var table = [UInt8](repeating: invalid, count: 256)
        for byte in 0..<256 {
            if let value = value(of: UInt8(byte)) { table[byte] = value }
        }
        table[0x20] = 62
        for byte: UInt8 in [0x0A, 0x0D, 0x09] { table[Int(byte)] = skip }
        table[Int(UInt8(ascii: "="))] = pad
        return table
    }()
    private static let invalid: UInt8 = 0xFF
    private static let skip: UInt8 = 0xFE
    private static let pad: UInt8 = 0xFD

    /// Decodes base64 text; nil when a character is not base64 or the length cannot be valid.
    /// Spaces are read as `+`, line breaks and tabs are skipped, and decoding stops at the first `=`.
    public static func decode<Bytes: Collection<UInt8>>(_ text: Bytes) -> [UInt8]? {
        let result = text.withContiguousStorageIfAvailable { decode(buffer: $0) }
        if let result { return result }
        return Array(text).withUnsafeBufferPointer { decode(buffer: $0) }
    }

    private static func decode(buffer: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        var output = [UInt8](repeating: 0, count: buffer.count / 4 * 3 + 3)
        var written = 0
        let ok = table.withUnsafeBufferPointer { table -> Bool in
            output.withUnsafeMutableBufferPointer { out -> Bool in
                var accumulator: UInt32 = 0
                var count = 0
                for byte in buffer {
                    let sextet = table[Int(byte)]
                    if sextet < 64 {
                        accumulator = accumulator << 6 | UInt32(sextet)
                        count += 1
                        if count == 4 {
                            out[written] = UInt8(truncatingIfNeeded: accumulator >> 16)
                            out[written + 1] = UInt8(truncatingIfNeeded: accumulator >> 8)
                            out[written + 2] = UInt8(truncatingIfNeeded: accumulator)
                            written += 3
                            accumulator = 0
                            count = 0
                        }
                    } else if sextet == skip {
                        continue
                    } else if sextet == pad {
                        break
                    } else {
                        return false
                    }
                }
                switch count {
                case 0: break
                case 2:
                    out[written] = UInt8(truncatingIfNeeded: accumulator >> 4)
                    written += 1
                case 3:
                    out[written] = UInt8(truncatingIfNeeded: accumulator >> 10)
                    out[written + 1] = UInt8(truncatingIfNeeded: accumulator >> 2)
                    written += 2
                default: return false
                }
                return true
            }
        }
        guard ok else { return nil }
        output.removeSubrange(written...)
        return output
    }

    /// Decodes base64url without padding (JWS segments); nil on any other character.
    static func decodeURL(_ text: ArraySlice<UInt8>) -> [UInt8]? {
        for byte in text where value(of: byte) == nil && byte != UInt8(ascii: "=") { return nil }
        return decode(text)
    }
}
