import Foundation
import Testing

@testable import Messages

/// The one hand-written JSON writer: its strings are `JSONEncoder`'s, for the messages, the stored documents and
/// the log lines alike.
@Suite("Messages: one JSON writer")
struct JSONWriterTests {
    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// Every control character, quotes, backslashes, slashes and non-ASCII text.
    static let samples: [String] =
        (0..<0x20).map { String(UnicodeScalar(UInt8($0))) } + ["\"", "\\", "a/b", "é ✓ 🙂", "x\ny\u{0}z", ""]

    @Test("a string is escaped byte for byte as JSONEncoder escapes it")
    func strings() throws {
        for sample in Self.samples {
            var writer = JSONWriter()
            writer.string(sample)
            #expect(writer.bytes == Array(try Self.encoder.encode(sample)), "\(Array(sample.utf8))")
        }
    }

    @Test("JSONQuoting, the log lines' escaping, is the writer's")
    func quoting() throws {
        for sample in Self.samples {
            var line = ""
            JSONQuoting.appendEscaped(sample, to: &line)
            #expect(Array(("\"" + line + "\"").utf8) == Array(try Self.encoder.encode(sample)), "\(Array(sample.utf8))")
        }
    }

    @Test("fields: null for a nil value, left out for a nil optional one; nested objects and arrays")
    func fields() throws {
        var writer = JSONWriter()
        writer.beginObject()
        writer.field("a", nil as String?)
        writer.optionalField("b", nil)
        writer.optionalField("c", "x")
        writer.field("d", 3)
        writer.field("e", true)
        writer.key("f")
        writer.beginArray()
        writer.beginObject()
        writer.field("g", Int64(-1))
        writer.endObject()
        writer.string("h")
        writer.null()
        writer.endArray()
        writer.raw("i", Array(#"{"j":1}"#.utf8))
        writer.endObject()
        #expect(writer.text == #"{"a":null,"c":"x","d":3,"e":true,"f":[{"g":-1},"h",null],"i":{"j":1}}"#)
    }
}
