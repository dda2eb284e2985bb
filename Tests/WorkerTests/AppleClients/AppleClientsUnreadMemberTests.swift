import Foundation
import Messages
import Testing

@testable import AppleClients

@Suite("Apple clients: members the verifyReceipt parser skips")
struct AppleClientsUnreadMemberTests {
    private func parse(_ text: String) throws -> VerifyReceiptResponse {
        try VerifyReceiptResponse.parse(Array(text.utf8), answeredBy: .production)
    }

    @Test("`…_pst` twins and `latest_receipt` are stepped over; the fields read stay the same")
    func skippedMembersDoNotChangeTheAnswer() throws {
        let response = try parse(
            #"{"status":0,"latest_receipt":"TUlJVGJ3\/WUpLb1pJ\u0041aHZj","receipt":{"bundle_id":"com.example","#
                + #""receipt_creation_date_pst":"2026-11-22 03:00:00 America/Los_Angeles","#
                + #""receipt_creation_date_ms":"1795000000000","in_app":[{"product_id":"p","transaction_id":"1","#
                + #""purchase_date_pst":{"odd":["shape"]},"purchase_date_ms":"1795000000000"}]}}"#)
        #expect(response.status == .valid)
        let receipt = try #require(response.receipt)
        #expect(receipt.bundleID == "com.example")
        #expect(receipt.creationDate == Date(timeIntervalSince1970: 1_795_000_000))
        #expect(receipt.inApp.first?.purchaseDate == Date(timeIntervalSince1970: 1_795_000_000))
    }

    @Test("A broken value under a skipped key still makes the body malformed")
    func brokenSkippedValueIsMalformed() {
        for body in [
            #"{"status":0,"latest_receipt":"unterminated}"#,
            #"{"status":0,"latest_receipt":"bad \q escape","receipt":{}}"#,
            #"{"status":0,"latest_receipt":"bad \u12 escape","receipt":{}}"#,
            "{\"status\":0,\"latest_receipt\":\"control \u{01} byte\",\"receipt\":{}}",
            #"{"status":0,"x_pst":[1,,2],"receipt":{}}"#,
        ] {
            #expect(throws: AppleClientError.self, "\(body)") { try parse(body) }
        }
    }

    @Test("Keys that only look alike are read as usual")
    func similarKeysAreKept() throws {
        let json = try #require(
            LenientJSON.parse(Array(#"{"pst":"a","_pst":"b","latest_receipt_info":[]}"#.utf8)) { key in
                key.utf8.count > 4 && (key.hasSuffix("_pst") || key == "latest_receipt")
            })
        #expect(json["pst"]?.stringValue == "a")
        #expect(json["_pst"]?.stringValue == "b")
        #expect(json["latest_receipt_info"] != nil)
    }
}
