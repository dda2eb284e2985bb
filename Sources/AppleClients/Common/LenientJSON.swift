import Foundation
import Messages

/// A parsed JSON value that tolerates Apple's loose typing: numbers sent as strings and the reverse,
/// booleans as `"true"`, `"1"` or `1`. Integers keep full 64-bit precision (transaction ids exceed 2^53).
enum LenientJSON: Sendable {
    case null
    case bool(Bool)
    case integer(Int64)
    case double(Double)
    case string(String)
    case array([LenientJSON])
    case object([String: LenientJSON])

    /// Parses `bytes`, or returns nil for anything that is not JSON (or nested deeper than `maximumDepth`).
    ///
    /// Members whose key `skipping` accepts are checked for well-formedness but not kept: their values are never
    /// built (no string copied, nothing allocated for them).
    static func parse(
        _ bytes: [UInt8], maximumDepth: Int = 64, skipping: (@Sendable (String) -> Bool)? = nil
    ) -> LenientJSON? {
        var parser = LenientJSONParser(bytes: bytes, maximumDepth: maximumDepth, skipping: skipping)
        return parser.parseDocument()
    }

    subscript(key: String) -> LenientJSON? {
        if case .object(let members) = self, let value = members[key], value.isPresent { return value }
        return nil
    }

    /// False for JSON `null` and for the empty string Apple sends for absent dates.
    var isPresent: Bool {
        switch self {
        case .null: false
        case .string(let text): !text.isEmpty
        default: true
        }
    }

    var objectValue: [String: LenientJSON]? {
        if case .object(let members) = self { return members }
        return nil
    }

    /// A string, also from a number (ids are sometimes numbers).
    var stringValue: String? {
        switch self {
        case .string(let text): text
        case .integer(let number): String(number)
        case .double(let number) where number == number.rounded() && abs(number) < 1e15: String(Int64(number))
        case .double(let number): String(number)
        case .bool(let flag): String(flag)
        default: nil
        }
    }

    /// An integer, also from a string of digits or a whole double.
    var int64Value: Int64? {
        switch self {
        case .integer(let number): number
        case .double(let number) where number == number.rounded() && abs(number) < 9e18: Int64(number)
        case .string(let text): Int64(text.trimmingCharacters(in: .whitespaces))
        case .bool(let flag): flag ? 1 : 0
        default: nil
        }
    }

    var intValue: Int? { int64Value.flatMap { Int(exactly: $0) } }

    /// A flag from `true`, `"true"`, `1` or `"1"` (and their opposites).
    var boolValue: Bool? {
        switch self {
        case .bool(let flag): flag
        case .integer(let number): number != 0
        case .double(let number): number != 0
        case .string(let text):
            switch text.lowercased() {
            case "true", "1", "yes": true
            case "false", "0", "no": false
            default: nil
            }
        default: nil
        }
    }

    /// Milliseconds since 1970 (number or string) as a date.
    var millisecondsDate: Date? {
        guard let millis = int64Value else { return nil }
        return Date(epochMilliseconds: millis)
    }

    /// A date in Apple's verifyReceipt text form (`2015-08-10 06:54:32 Etc/GMT`), or an RFC 3339 date.
    var textDate: Date? {
        guard case .string(let text) = self else { return nil }
        if let date = try? Date(text, strategy: .iso8601) { return date }
        let parts = text.split(separator: " ")
        guard parts.count >= 2, parts.count <= 3 else { return nil }
        // Apple writes the time zone as `Etc/GMT`; the `_pst` twins are skipped by callers.
        if parts.count == 3, parts[2] != "Etc/GMT", parts[2] != "GMT", parts[2] != "UTC" { return nil }
        return try? Date("\(parts[0])T\(parts[1])Z", strategy: .iso8601)
    }
}

/// A small JSON parser for Apple's answers: one pass over the bytes, no exceptions for control flow, and a
/// depth limit so hostile nesting cannot exhaust the stack.
private struct LenientJSONParser {
    let bytes: [UInt8]
    let maximumDepth: Int
    let skipping: (@Sendable (String) -> Bool)?
    var index = 0

    init(bytes: [UInt8], maximumDepth: Int, skipping: (@Sendable (String) -> Bool)?) {
        self.bytes = bytes
        self.maximumDepth = maximumDepth
        self.skipping = skipping
    }

    mutating func parseDocument() -> LenientJSON? {
        guard let value = parseValue(depth: 0) else { return nil }
        skipWhitespace()
        return index == bytes.count ? value : nil
    }

    private mutating func skipWhitespace() {
        while index < bytes.count,
            bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D
                || bytes[index] == 0x09
        {
            index += 1
        }
    }

    private mutating func parseValue(depth: Int) -> LenientJSON? {
        skipWhitespace()
        guard index < bytes.count, depth <= maximumDepth else { return nil }
        switch bytes[index] {
        case UInt8(ascii: "{"): return parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return parseString().map(LenientJSON.string)
        case UInt8(ascii: "t"): return literal("true", .bool(true))
        case UInt8(ascii: "f"): return literal("false", .bool(false))
        case UInt8(ascii: "n"): return literal("null", .null)
        default: return parseNumber()
        }
    }

    private mutating func literal(_ word: StaticString, _ value: LenientJSON) -> LenientJSON? {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { return nil }
        for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { return nil }
        index += count
        return value
    }

    private mutating func parseObject(depth: Int) -> LenientJSON? {
        index += 1
        var members: [String: LenientJSON] = [:]
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\""), let key = parseString() else { return nil }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
            index += 1
            if let skipping, skipping(key) {
                guard skipValue(depth: depth) else { return nil }
            } else {
                guard let value = parseValue(depth: depth) else { return nil }
                members[key] = value
            }
            guard let closed = endOfElement(closing: UInt8(ascii: "}")) else { return nil }
            if closed { return .object(members) }
        }
    }

    /// After an object's member or an array's item: true at `closing`, false at a comma (either consumed), nil at
    /// anything else.
    private mutating func endOfElement(closing: UInt8) -> Bool? {
        skipWhitespace()
        guard index < bytes.count else { return nil }
        switch bytes[index] {
        case UInt8(ascii: ","):
            index += 1
            return false
        case closing:
            index += 1
            return true
        default:
            return nil
        }
    }

    private mutating func parseArray(depth: Int) -> LenientJSON? {
        index += 1
        var items: [LenientJSON] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(items)
        }
        while true {
            guard let value = parseValue(depth: depth) else { return nil }
            items.append(value)
            guard let closed = endOfElement(closing: UInt8(ascii: "]")) else { return nil }
            if closed { return .array(items) }
        }
    }

    /// Steps over one value without building it; false when it is not well-formed.
    private mutating func skipValue(depth: Int) -> Bool {
        skipWhitespace()
        guard index < bytes.count else { return false }
        guard bytes[index] == UInt8(ascii: "\"") else { return parseValue(depth: depth) != nil }
        index += 1  // opening quote
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                return true
            case UInt8(ascii: "\\"):
                guard index < bytes.count else { return false }
                let escape = bytes[index]
                index += 1
                if escape == UInt8(ascii: "u") {
                    guard hex4() != nil else { return false }
                } else if !"\"\\/bfnrt".utf8.contains(escape) {
                    return false
                }
            case 0..<0x20:
                return false
            default:
                continue
            }
        }
        return false
    }

    private mutating func parseString() -> String? {
        index += 1  // opening quote
        var runStart = index
        var text = ""
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                text += String(decoding: bytes[runStart..<index], as: UTF8.self)
                index += 1
                return text
            }
            if byte < 0x20 { return nil }
            if byte != UInt8(ascii: "\\") {
                index += 1
                continue
            }
            text += String(decoding: bytes[runStart..<index], as: UTF8.self)
            index += 1
            guard index < bytes.count else { return nil }
            let escape = bytes[index]
            index += 1
            switch escape {
            case UInt8(ascii: "\""): text += "\""
            case UInt8(ascii: "\\"): text += "\\"
            case UInt8(ascii: "/"): text += "/"
            case UInt8(ascii: "b"): text += "\u{08}"
            case UInt8(ascii: "f"): text += "\u{0C}"
            case UInt8(ascii: "n"): text += "\n"
            case UInt8(ascii: "r"): text += "\r"
            case UInt8(ascii: "t"): text += "\t"
            case UInt8(ascii: "u"):
                guard var code = hex4() else { return nil }
                if code >= 0xD800, code < 0xDC00 {
                    // A high surrogate must be followed by an escaped low surrogate.
                    guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                        bytes[index + 1] == UInt8(ascii: "u")
                    else { return nil }
                    index += 2
                    guard let low = hex4(), low >= 0xDC00, low < 0xE000 else { return nil }
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                }
                guard let scalar = Unicode.Scalar(code) else { return nil }
                text.unicodeScalars.append(scalar)
            default: return nil
            }
            runStart = index
        }
        return nil
    }

    private mutating func hex4() -> UInt32? {
        guard index + 4 <= bytes.count else { return nil }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }

    private mutating func parseNumber() -> LenientJSON? {
        let start = index
        var isInteger = true
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
        let digitsStart = index
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): index += 1
            case UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"), UInt8(ascii: "+"), UInt8(ascii: "-"):
                isInteger = false
                index += 1
            default:
                return number(from: start, digitsStart: digitsStart, isInteger: isInteger)
            }
        }
        return number(from: start, digitsStart: digitsStart, isInteger: isInteger)
    }

    private func number(from start: Int, digitsStart: Int, isInteger: Bool) -> LenientJSON? {
        guard index > digitsStart else { return nil }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        if isInteger, let integer = Int64(text) { return .integer(integer) }
        guard let double = Double(text), double.isFinite else { return nil }
        return .double(double)
    }
}
