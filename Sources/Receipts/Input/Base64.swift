/// A forgiving base64 decoder: both alphabets, optional padding, ignores line breaks, and reads a space between
/// base64 characters as the `+` that form encoding turned into a space.
///
/// Receipts arrive as base64 (a 187-purchase app receipt is 105 KB of it), so decoding is on the hot path: whole
/// groups of four plain characters go through a table-driven fast path; spaces, line breaks, padding and anything
/// invalid drop to a careful path one byte at a time, after which the fast path resumes.
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

    /// The fast path's tables, four of 256 entries: a character's value already shifted to its place in a group of
    /// four (18, 12, 6, 0 bits), so a group decodes with four loads and three ORs. Anything but a plain base64
    /// character (a space included, so that spaces are counted) sets `slowPathBit`.
    private static let groupTables: [UInt32] = {
        var tables = [UInt32](repeating: slowPathBit, count: 4 * 256)
        for byte in 0..<256 {
            guard let value = value(of: UInt8(byte)) else { continue }
            for position in 0..<4 {
                tables[position * 256 + byte] = UInt32(value) << UInt32(18 - 6 * position)
            }
        }
        return tables
    }()
    private static let slowPathBit: UInt32 = 1 << 24

    /// Decodes base64 text; nil when a character is not base64 or the length cannot be valid.
    /// Spaces are read as `+`, line breaks and tabs are skipped, and decoding stops at the first `=`.
    public static func decode<Bytes: Collection<UInt8>>(_ text: Bytes) -> [UInt8]? {
        let result = text.withContiguousStorageIfAvailable { scan($0, checkAfterPadding: false) }
        if let result { return result?.bytes }
        return Array(text).withUnsafeBufferPointer { scan($0, checkAfterPadding: false) }?.bytes
    }

    /// Decodes base64 text in one pass and tells whether it was base64 as `ReceiptInput.looksLikeBase64` defines it:
    /// nil when `decode` would fail or a byte after the first `=` is neither base64, `=` nor whitespace.
    /// `significant` counts the base64 characters, spaces excluded, padding tail included.
    static func decodeIfBase64(_ text: ArraySlice<UInt8>) -> (bytes: [UInt8], significant: Int)? {
        text.withUnsafeBufferPointer { scan($0, checkAfterPadding: true) }
    }

    private static func scan(
        _ buffer: UnsafeBufferPointer<UInt8>, checkAfterPadding: Bool
    ) -> (bytes: [UInt8], significant: Int)? {
        guard let input = buffer.baseAddress, !buffer.isEmpty else { return ([], 0) }
        let count = buffer.count
        var position = 0
        var accumulator: UInt32 = 0
        var pending = 0  // characters in `accumulator`
        var spaces = 0
        var sawPadding = false
        var failed = false
        var written = 0
        let output = [UInt8](unsafeUninitializedCapacity: count / 4 * 3 + 3) { out, initialized in
            guard let out = out.baseAddress else { return }
            groupTables.withUnsafeBufferPointer { groups in
                table.withUnsafeBufferPointer { table in
                    guard let groups = groups.baseAddress, let table = table.baseAddress else { return }
                    while position < count {
                        if pending == 0 {
                            // Two groups per step: eight characters in, six bytes out. Each group is stored as four
                            // bytes, the fourth overwritten by the next group; `out` has room for it (capacity is
                            // 3 bytes per 4 input characters plus 3, and output never runs ahead of input).
                            while position + 8 <= count {
                                let first = Self.group(input + position, groups)
                                let second = Self.group(input + position + 4, groups)
                                if (first | second) & slowPathBit != 0 { break }
                                Self.store(first, at: out + written)
                                Self.store(second, at: out + written + 3)
                                written += 6
                                position += 8
                            }
                            while position + 4 <= count {
                                let word = Self.group(input + position, groups)
                                if word & slowPathBit != 0 { break }
                                Self.store(word, at: out + written)
                                written += 3
                                position += 4
                            }
                            guard position < count else { break }
                        }
                        let byte = input[position]
                        position += 1
                        let sextet = table[Int(byte)]
                        if sextet < 64 {
                            if byte == 0x20 { spaces += 1 }
                            accumulator = accumulator << 6 | UInt32(sextet)
                            pending += 1
                            if pending == 4 {
                                out[written] = UInt8(truncatingIfNeeded: accumulator >> 16)
                                out[written + 1] = UInt8(truncatingIfNeeded: accumulator >> 8)
                                out[written + 2] = UInt8(truncatingIfNeeded: accumulator)
                                written += 3
                                accumulator = 0
                                pending = 0
                            }
                        } else if sextet == skip {
                            continue
                        } else if sextet == pad {
                            sawPadding = true
                            break
                        } else {
                            failed = true
                            break
                        }
                    }
                }
            }
            switch pending {
            case 0: break
            case 2:
                out[written] = UInt8(truncatingIfNeeded: accumulator >> 4)
                written += 1
            case 3:
                out[written] = UInt8(truncatingIfNeeded: accumulator >> 10)
                out[written + 1] = UInt8(truncatingIfNeeded: accumulator >> 2)
                written += 2
            default: failed = true
            }
            initialized = written
        }
        guard !failed else { return nil }
        // Characters consumed: three output bytes per complete group, plus the 2 or 3 of a final partial group.
        var significant = written / 3 * 4 + (written % 3 == 0 ? 0 : written % 3 + 1) - spaces
        if checkAfterPadding && sawPadding {
            for index in position..<count {
                let byte = input[index]
                if value(of: byte) != nil {
                    significant += 1
                } else if byte != UInt8(ascii: "=") && !ReceiptInput.isWhitespace(byte) {
                    return nil
                }
            }
        }
        return (output, significant)
    }

    /// The 24 bits of four characters (or `slowPathBit` set).
    @inline(__always)
    private static func group(_ input: UnsafePointer<UInt8>, _ groups: UnsafePointer<UInt32>) -> UInt32 {
        groups[Int(input[0])] | groups[256 + Int(input[1])] | groups[512 + Int(input[2])] | groups[768 + Int(input[3])]
    }

    /// Writes a group's three bytes, and one byte of scratch after them, with a single store.
    @inline(__always)
    private static func store(_ word: UInt32, at output: UnsafeMutablePointer<UInt8>) {
        UnsafeMutableRawPointer(output).storeBytes(of: (word << 8).bigEndian, as: UInt32.self)
    }

    /// Decodes base64url without padding (JWS segments); nil on any other character.
    static func decodeURL(_ text: ArraySlice<UInt8>) -> [UInt8]? {
        for byte in text where value(of: byte) == nil && byte != UInt8(ascii: "=") { return nil }
        return decode(text)
    }
}
