import Foundation
import Testing

@testable import Messages

/// The Kafka key of notification jobs: one per purchase (original transaction), so a burst spreads over lanes while
/// the notifications of one subscription keep their order.
@Suite("Messages: notification message keys")
struct NotificationMessageKeyTests {
    /// A compact JWS of `payload` with a junk signature: the key is read without verifying.
    static func jws(_ payload: [String: Any]) throws -> String {
        func base64URL(_ data: Data) -> String {
            data.base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        }
        let header = base64URL(Data(#"{"alg":"ES256","x5c":["AAAA"]}"#.utf8))
        return "\(header).\(base64URL(try JSONSerialization.data(withJSONObject: payload))).\(base64URL(Data([1, 2])))"
    }

    static func notification(
        _ type: String, uuid: String = UUID().uuidString, data: [String: Any]? = nil, summary: [String: Any]? = nil
    ) throws -> String {
        var payload: [String: Any] = ["notificationType": type, "notificationUUID": uuid, "signedDate": 1_700_000_000]
        if let data { payload["data"] = data }
        if let summary { payload["summary"] = summary }
        return try jws(payload)
    }

    static func transaction(original: Any, id: String = "2000000000000999") throws -> String {
        try jws(["transactionId": id, "originalTransactionId": original, "bundleId": "com.example.app"])
    }

    @Test("notifications about one original transaction share one key, whatever their type and transaction")
    func samePurchaseSameKey() throws {
        let original = "2000000000000001"
        let keys = try [
            Self.notification(
                "DID_RENEW", data: ["signedTransactionInfo": try Self.transaction(original: original, id: "20000002")]),
            Self.notification(
                "REFUND", data: ["signedTransactionInfo": try Self.transaction(original: original, id: "20000003")]),
            // Only renewal info (a DID_CHANGE_RENEWAL_PREF without transaction info still names the subscription).
            Self.notification(
                "DID_CHANGE_RENEWAL_PREF",
                data: ["signedRenewalInfo": try Self.jws(["originalTransactionId": original, "autoRenewStatus": 1])]),
        ].map { NotificationJob.messageKey(ofSignedPayload: $0, accountID: "apple-notification") }
        #expect(keys == Array(repeating: "apple-notification/" + original, count: 3))

        let other = try Self.notification(
            "DID_RENEW", data: ["signedTransactionInfo": try Self.transaction(original: "2000000000000002")])
        #expect(NotificationJob.messageKey(ofSignedPayload: other) == "apple-notification/2000000000000002")
    }

    @Test("a notification about no transaction is keyed by its uuid, in lower case")
    func noTransactionFallsBackToUUID() throws {
        let uuid = "0F3A2B1C-1111-4222-8333-444455556666"
        let payloads = try [
            Self.notification("TEST", uuid: uuid),
            Self.notification(
                "RENEWAL_EXTENSION", uuid: uuid, summary: ["requestIdentifier": "r-1", "succeededCount": 3]),
            Self.notification("EXTERNAL_PURCHASE_TOKEN", uuid: uuid, data: ["externalPurchaseToken": ["token": "x"]]),
            // Transaction info that is not a JWS, or whose original transaction id is not an id: no purchase to key by.
            Self.notification("REFUND", uuid: uuid, data: ["signedTransactionInfo": "not-a-jws"]),
            Self.notification(
                "REFUND", uuid: uuid, data: ["signedTransactionInfo": try Self.transaction(original: "a/b\nc")]),
            Self.notification(
                "REFUND", uuid: uuid, data: ["signedTransactionInfo": try Self.transaction(original: 42)]),
        ]
        for payload in payloads {
            #expect(
                NotificationJob.messageKey(ofSignedPayload: payload, accountID: "notes") == "notes/" + uuid.lowercased()
            )
        }
    }

    @Test("a payload that is not a notification is keyed by the notification account, and nothing crashes")
    func notANotification() throws {
        for payload in [
            "", "...", "a.b", "a.b.c.d", "header.%%%.sig", "x." + String(repeating: "A", count: 10_001) + ".y",
            try Self.jws(["notificationType": "TEST"]), try Self.jws(["notificationUUID": "bad uuid!"]),
        ] {
            #expect(NotificationJob.messageKey(ofSignedPayload: payload, accountID: "notes") == "notes")
        }
    }

    @Test("the payload reader decodes base64url as Foundation decodes base64, and refuses what it refuses")
    func base64URL() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<70 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let standard = Data(bytes).base64EncodedString()
            let url = standard.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            let unpadded = url.replacingOccurrences(of: "=", with: "")
            for text in [standard, url, unpadded] {
                #expect(Base64URL.decode(ArraySlice(text.utf8)) == Data(bytes), "\(text)")
            }
        }
        for bad in ["A", "AAAAA", "AA AA", "AA=A", "AA*A", "é"] {
            #expect(Base64URL.decode(ArraySlice(bad.utf8)) == nil, "\(bad)")
        }
        #expect(CompactJWS.payloadSegment(of: "a.bc.d").map { Array($0) } == Array("bc".utf8))
        for bad in ["abc", "a.b", "a.b.c.d", "é"] { #expect(CompactJWS.payloadSegment(of: bad) == nil) }
    }

    @Test("a job's message key: the account for client jobs, the purchase for notification jobs")
    func jobMessageKey() throws {
        let client = ReceiptJob(jobID: "job-1", accountID: "acct-1", proof: .signedTransaction("a.b.c"))
        #expect(client.messageKey == Array("acct-1".utf8))

        let payload = try Self.notification(
            "DID_RENEW", data: ["signedTransactionInfo": try Self.transaction(original: "2000000000000007")])
        let job = try NotificationJob.job(signedPayload: payload, accountID: "notes", submittedAt: Date())
        #expect(job.accountID == "notes", "the account_id stays the notification account")
        #expect(job.messageKey == Array("notes/2000000000000007".utf8))
    }
}
