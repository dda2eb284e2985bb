import Crypto
import Foundation
import Testing

@testable import Messages

@Suite("Message contract: dead letters too large for one record")
struct DeadLetterTruncationTests {
    static let letter = DeadLetter(
        rejecting: Array(repeating: UInt8(ascii: "z"), count: 5_000), key: Array("acct-1".utf8),
        error: MessageError(.notJSON, "not a JSON object in UTF-8"), topic: "receipt-jobs", partition: 3, offset: 42)

    @Test("a cut dead letter keeps the start of the value and names the whole value's size and SHA-256")
    func truncated() throws {
        let whole = Self.letter.original
        let cut = Self.letter.truncated(valueBytes: 100)
        #expect(cut.original == Array(whole.prefix(100)))
        #expect(cut.key == Self.letter.key)
        #expect(cut.truncation?.originalBytes == 5_000)
        #expect(
            cut.truncation?.originalSHA256
                == Data(Crypto.SHA256.hash(data: whole)).map { String(format: "%02x", $0) }.joined())
        #expect(cut.truncation?.originalKeyBytes == nil)
        let headers = Dictionary(cut.headers.map { ($0.name, String(decoding: $0.value, as: UTF8.self)) }) { $1 }
        #expect(headers[DeadLetter.Header.truncated] == "true")
        #expect(headers[DeadLetter.Header.originalBytes] == "5000")
        #expect(headers[DeadLetter.Header.originalSHA256]?.count == 64)
        #expect(headers[DeadLetter.Header.originalKeyBytes] == nil)
        // Read back from a record: the same dead letter, standing for the whole value and no other.
        let back = try #require(DeadLetter(key: cut.key, value: cut.original, headers: cut.headers))
        #expect(back == cut)
        #expect(back.standsFor(whole))
        #expect(!back.standsFor(cut.original))
        #expect(!back.standsFor(Array(whole.dropLast()) + [UInt8(ascii: "y")]))
        // A whole one stands for exactly its value and has no truncation headers.
        #expect(Self.letter.standsFor(whole) && !Self.letter.standsFor(cut.original))
        #expect(
            !Self.letter.headers.contains {
                $0.name.hasPrefix("dlq.original") || $0.name == DeadLetter.Header.truncated
            })
    }

    @Test("cutting again keeps naming the original; a key is cut only when asked and longer, and then named too")
    func truncatedTwiceAndKeys() {
        let once = Self.letter.truncated(valueBytes: 100)
        let twice = once.truncated(valueBytes: 0, keyBytes: 256)
        #expect(twice.original.isEmpty)
        #expect(twice.truncation?.originalBytes == 5_000)
        #expect(twice.truncation?.originalSHA256 == once.truncation?.originalSHA256)
        #expect(twice.key == Self.letter.key, "a key shorter than the limit stays whole")
        #expect(twice.truncation?.originalKeyBytes == nil)
        var longKey = Self.letter
        longKey.key = Array(repeating: UInt8(ascii: "k"), count: 1_000)
        let keyCut = longKey.truncated(valueBytes: 0, keyBytes: 256)
        #expect(keyCut.key?.count == 256)
        #expect(keyCut.truncation?.originalKeyBytes == 1_000)
        #expect(
            keyCut.headers.contains { $0.name == DeadLetter.Header.originalKeyBytes && $0.value == Array("1000".utf8) })
    }
}
