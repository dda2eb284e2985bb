import Foundation
import Messages
import Testing

/// `app_account_token`, an optional field of `receipt-job/v1`: read by both decoding paths, written
/// by the codec, lower-cased, checked to be a UUID, part of the job's content only when present.
@Suite("Messages: app_account_token")
struct AppAccountTokenMessageTests {
    static let token = "8A2C1F5E-3B4D-4C6E-9F70-1A2B3C4D5E6F"

    static func json(token: String?) -> String {
        let member = token.map { #""app_account_token":"\#($0)","# } ?? ""
        return #"{"schema":"receipt-job/v1",\#(member)"job_id":"j1","account_id":"a1","transaction_id":"2000000001"}"#
    }

    @Test("read (fast path and with whitespace, the Codable path) lower-cased, and written back")
    func roundTrip() throws {
        let codec = MessageCodec()
        let fast = try codec.decodeJob(Array(Self.json(token: Self.token).utf8))
        #expect(fast.appAccountToken == Self.token.lowercased())
        let spaced = Self.json(token: Self.token).replacingOccurrences(of: ",", with: " , ")
        #expect(try codec.decodeJob(Array(spaced.utf8)).appAccountToken == Self.token.lowercased())
        let again = try codec.decodeJob(codec.encode(fast))
        #expect(again == fast)
        #expect(String(decoding: codec.encode(fast), as: UTF8.self).contains(#""app_account_token":"8a2c1f5e"#))
    }

    @Test(
        "anything but a UUID is refused naming the field",
        arguments: [
            "", "not-a-uuid", "8a2c1f5e3b4d4c6e9f701a2b3c4d5e6f", "8a2c1f5e-3b4d-4c6e-9f70-1a2b3c4d5e6g",
            "8a2c1f5e-3b4d-4c6e-9f70-1a2b3c4d5e6f0",
        ])
    func refused(token: String) {
        do {
            _ = try MessageCodec().decodeJob(Array(Self.json(token: token).utf8))
            Issue.record("\(token) accepted")
        } catch {
            #expect(error.field == "app_account_token", "\(error)")
        }
    }

    @Test("the token is part of the content (a reuse with another token is another content); absent, digests stay")
    func content() throws {
        let codec = MessageCodec()
        let without = try codec.decodeJob(Array(Self.json(token: nil).utf8))
        let with = try codec.decodeJob(Array(Self.json(token: Self.token).utf8))
        #expect(without.contentDigest != with.contentDigest)
        var other = with
        other.appAccountToken = "0f1e2d3c-4b5a-4968-8776-655443322110"
        #expect(other.contentDigest != with.contentDigest)
        // The digest of a job without a token is computed as before the field existed.
        let plain = ReceiptJob(jobID: "j1", accountID: "a1", proof: .transactionID("2000000001"))
        #expect(plain.contentDigest == without.contentDigest)
    }
}
