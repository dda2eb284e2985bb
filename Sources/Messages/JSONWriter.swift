import Foundation

/// Writes JSON by hand, straight into bytes: the messages (jobs and verdicts, ``MessageCodec``) and the entitlement
/// store's stored documents (history entries, lifecycle events, PostgreSQL row sets).
///
/// `JSONEncoder` builds a value tree, sorts its keys and escapes each string scalar by scalar: it was the largest
/// single cost of locally decided traffic (`bench pipeline` (b)) and a quarter of the projection's CPU
/// (`bench entitlements`). Strings are escaped as `JSONEncoder` with `.withoutEscapingSlashes` escapes them, so a
/// writer that writes keys in sorted order writes its bytes exactly.
package struct JSONWriter {
    package private(set) var bytes: [UInt8] = []
    private var needsComma = false

    package init(capacity: Int = 512) { bytes.reserveCapacity(capacity) }

    package var text: String { String(decoding: bytes, as: UTF8.self) }

    package mutating func beginObject() { open(UInt8(ascii: "{")) }
    package mutating func endObject() { close(UInt8(ascii: "}")) }
    package mutating func beginArray() { open(UInt8(ascii: "[")) }
    package mutating func endArray() { close(UInt8(ascii: "]")) }

    private mutating func open(_ bracket: UInt8) {
        separate()
        bytes.append(bracket)
        needsComma = false
    }

    private mutating func close(_ bracket: UInt8) {
        bytes.append(bracket)
        needsComma = true
    }

    /// A key known to need no escaping (the writer's own field names). The value follows.
    package mutating func key(_ name: StaticString) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
        needsComma = false
    }

    /// `null` when nil.
    package mutating func field(_ name: StaticString, _ value: String?) {
        key(name)
        if let value { string(value) } else { null() }
    }

    /// RFC 3339 with milliseconds; `null` when nil.
    package mutating func field(_ name: StaticString, _ value: Date?) {
        field(name, value.map(RFC3339.format))
    }

    package mutating func field(_ name: StaticString, _ value: Int) { literal(name, String(value)) }
    package mutating func field(_ name: StaticString, _ value: Int64) { literal(name, String(value)) }
    package mutating func field(_ name: StaticString, _ value: Bool) { literal(name, value ? "true" : "false") }

    /// A number or a boolean, written as is.
    private mutating func literal(_ name: StaticString, _ text: String) {
        key(name)
        separate()
        bytes.append(contentsOf: text.utf8)
    }

    /// Left out when nil.
    package mutating func optionalField(_ name: StaticString, _ value: String?) {
        guard let value else { return }
        field(name, value)
    }

    /// An already-written JSON value (a nested document).
    package mutating func raw(_ name: StaticString, _ json: [UInt8]) {
        key(name)
        separate()
        bytes.append(contentsOf: json)
    }

    package mutating func null() {
        separate()
        bytes.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C])
    }

    private mutating func separate() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
        needsComma = true
    }

    /// A JSON string: `"` and `\` escaped, control characters as `\b \t \n \f \r` or `\u00XX`, the rest (`/` and
    /// non-ASCII included) as is, as `JSONEncoder` with `.withoutEscapingSlashes` writes them.
    package mutating func string(_ value: String) {
        separate()
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
