import Foundation

/// A parsed JSON value that tolerates Apple's loose typing: numbers sent as strings and the reverse,
/// booleans as `"true"`, `"1"` or `1`. Integers keep full 64-bit precision (transaction ids exceed 2^53).
enum LenientJSON: Sendable, Decodable {
    case null
    case bool(Bool)
    case integer(Int64)
    case double(Double)
    case string(String)
    case array([LenientJSON])
    case object([String: LenientJSON])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([LenientJSON].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: LenientJSON].self))
        }
    }

    /// Parses `bytes`, or returns nil for anything that is not JSON.
    static func parse(_ bytes: [UInt8]) -> LenientJSON? {
        try? JSONDecoder().decode(LenientJSON.self, from: Data(bytes))
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
        return Date(timeIntervalSince1970: Double(millis) / 1000)
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
