import Foundation
import Messages
import Testing

/// The contract's identifier rule at the codec, every entrance's first check: 1 to 256 bytes, no control character,
/// and a notification lane's account only on a notification job.
@Suite("Message contract: identifiers")
struct IdentifierRuleTests {
    /// The string fields of a job that hold an identifier, each with a job that is valid but for that field.
    static let identifierFields = ["job_id", "account_id", "device_id", "bundle_id", "expected_product_id"]

    static func job(_ field: String, _ value: String, proof: (String, String) = ("receipt", "TUlJQQ==")) -> [UInt8] {
        var object: [String: Any] = ["schema": "receipt-job/v1", "job_id": "job-1", "account_id": "acct-1"]
        object[proof.0] = proof.1
        object[field] = value
        return Array(try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
    }

    static func refusal(_ bytes: [UInt8]) -> MessageError? {
        do {
            _ = try MessageCodec().decodeJob(bytes)
            return nil
        } catch {
            return error
        }
    }

    @Test(
        "a control character in any identifier is a dead letter invalid_value naming the field",
        arguments: identifierFields + ["transaction_id"])
    func controlCharacters(field: String) throws {
        for scalar in ["\u{0}", "\u{1}", "\u{9}", "\u{A}", "\u{1F}", "\u{7F}", "\u{80}", "\u{85}", "\u{9F}"] {
            let bytes =
                field == "transaction_id"
                ? Self.job("device_id", "d", proof: ("transaction_id", "2000\(scalar)1"))
                : Self.job(field, "id\(scalar)x")
            let error = try #require(Self.refusal(bytes), "U+\(String(scalar.unicodeScalars.first!.value, radix: 16))")
            #expect(error.code == .invalidValue)
            #expect(error.field == field)
            #expect(error.detail.contains("control"))
        }
        // Characters beside the control ranges pass: a space, U+00A0 and an emoji.
        for fine in [" ", "\u{A0}", "é", "🎮"] {
            #expect(Self.refusal(Self.job(field == "transaction_id" ? "device_id" : field, "id\(fine)x")) == nil)
        }
    }

    @Test("identifiers at 256 bytes pass, at 257 are refused, also when the 257th byte ends a multi-byte character")
    func lengthEdges() throws {
        for field in Self.identifierFields {
            #expect(Self.refusal(Self.job(field, String(repeating: "a", count: 256))) == nil)
            #expect(Self.refusal(Self.job(field, String(repeating: "a", count: 255) + "é")) != nil)
            let over = try #require(Self.refusal(Self.job(field, String(repeating: "a", count: 257))))
            #expect(over.code == .invalidValue && over.field == field)
        }
    }

    @Test("escaped control characters and lone surrogates are refused whichever decoder reads them")
    func escapes() throws {
        for escape in ["\\u0000", "\\u001b", "\\u007f", "\\u0085", "\\ud800", "\\udc00", "\\ud800\\u0041"] {
            let text =
                #"{"schema":"receipt-job/v1","job_id":"job-1","account_id":"acct\#(escape)","receipt":"TUlJQQ=="}"#
            let error = try #require(Self.refusal(Array(text.utf8)), "\(escape)")
            #expect([.invalidValue, .notJSON].contains(error.code), "\(escape): \(error)")
        }
        // Raw bytes that are not UTF-8 inside an id.
        var raw = Array(#"{"schema":"receipt-job/v1","job_id":"job-1","account_id":"acct"#.utf8)
        raw += [0xC3, 0x28]
        raw += Array(#"","receipt":"TUlJQQ=="}"#.utf8)
        #expect(Self.refusal(raw) != nil)
    }

    @Test("a notification lane's account is refused on every job but a notification")
    func reservedAccount() throws {
        for account in ["apple-notification", "apple-notification/2000000123", "apple-notification/"] {
            let error = try #require(Self.refusal(Self.job("account_id", account)))
            #expect(error.code == .invalidValue && error.field == "account_id")
            #expect(
                Self.refusal(Self.job("account_id", account, proof: ("transaction_id", "2000000123"))) != nil)
            #expect(Self.refusal(Self.job("account_id", account, proof: ("notification", "a.b.c"))) == nil)
        }
        for account in ["apple-notifications", "apple-notification-1", "x/apple-notification", "Apple-Notification"] {
            #expect(Self.refusal(Self.job("account_id", account)) == nil, "\(account)")
        }
    }
}
