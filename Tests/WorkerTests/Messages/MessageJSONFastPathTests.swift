import Foundation
import Testing

@testable import Messages

/// The hand-written writer and reader against `JSONEncoder`/`JSONDecoder`: the same bytes out, the same values in,
/// and every message the reader does not take goes to `JSONDecoder` unchanged.
@Suite("Message JSON fast path")
struct MessageJSONFastPathTests {
    let codec = MessageCodec()

    static let awkwardTexts = [
        "plain", "", "with/slash", "quote\"inside", "back\\slash", "tab\tnew\nline\rcr", "\u{8}\u{C}\u{0}\u{1F}\u{7F}",
        "ünïcødé ✓ 𝄞", "\u{2028}\u{2029}",
    ]

    @Test("jobs are written byte for byte as JSONEncoder writes them")
    func jobBytes() {
        for text in Self.awkwardTexts {
            let proofs: [ReceiptJob.Proof] = [
                .receipt(text + "MIIT"), .signedTransaction(text), .transactionID("2000" + text),
                .notification(text),
            ]
            for proof in proofs {
                let full = ReceiptJob(
                    jobID: "job-" + text, accountID: text + "acct", proof: proof, deviceID: text, bundleID: text,
                    expectedProductID: text, submittedAt: Date(timeIntervalSince1970: 1_700_000_000.1234))
                let bare = ReceiptJob(jobID: "j", accountID: "a", proof: proof)
                for job in [full, bare] {
                    #expect(MessageJSONWriter.encode(job) == MessageCodec.encodeValue(job))
                }
            }
        }
    }

    @Test("verdicts are written byte for byte as JSONEncoder writes them")
    func verdictBytes() {
        for text in Self.awkwardTexts {
            let transactions: [Verdict.Transaction] = [
                .init(transactionID: "1" + text, productID: text),
                .init(
                    transactionID: "2", originalTransactionID: text, productID: "p",
                    purchaseDate: Date(timeIntervalSince1970: 0), expiresDate: Date(timeIntervalSince1970: 86_400.5),
                    revokedAt: Date(timeIntervalSince1970: -1), quantity: -3),
                .init(
                    transactionID: "3", productID: "p", expiresDate: Date(timeIntervalSince1970: 86_400),
                    inBillingRetry: true, gracePeriodExpiresDate: Date(timeIntervalSince1970: 90_000)),
                .init(transactionID: "4", productID: "p", inBillingRetry: false),
                .init(transactionID: "5", productID: "p", inBillingRetry: false, purchaseToken: text, paused: true),
                .init(transactionID: "6", productID: "p", inBillingRetry: true, paused: false),
                .init(
                    transactionID: "5", productID: "p", revokedAt: Date(timeIntervalSince1970: 86_400),
                    revocation: Revocation(type: Revocation.Kind(text), percentage: 25_000, reason: 1),
                    ownershipType: OwnershipType(text)),
            ]
            let verdicts = [
                Verdict(
                    verdictID: "0f8c3bd2-7f6e-5a7d-9c1b-2e4d6f8a0b1c", jobID: text, accountID: text, outcome: .rejected,
                    reason: Verdict.Reason(text), decidedBy: .apple,
                    environment: text, transactions: transactions, appleStatus: 21_007,
                    decidedAt: Date(timeIntervalSince1970: 1_700_000_000)),
                Verdict(
                    verdictID: "0f8c3bd2-7f6e-5a7d-9c1b-2e4d6f8a0b1c", jobID: "j", accountID: "a", outcome: .granted,
                    decidedBy: .signature,
                    decidedAt: Date(timeIntervalSince1970: 1)),
            ]
            for verdict in verdicts {
                #expect(MessageJSONWriter.encode(verdict) == MessageCodec.encodeValue(verdict))
            }
        }
    }

    @Test(
        "the reader returns what JSONDecoder returns, or leaves the message to it",
        arguments: [
            #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","receipt":"r"}"#,
            #" { "schema" : "receipt-job/v1" , "job_id":"j","account_id":"a","receipt":"r","device_id":null } "#,
            #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","receipt":"r","submitted_at":"2026-11-22T05:17:53.5+01:00"}"#,
            #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","transaction_id":"1","future":7,"other":[{"x":"y"}]}"#,
            #"{"schema":"receipt-job/v1","job_id":"j\u0041","account_id":"a","receipt":"r"}"#,
            #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","receipt":"r","receipt":"s"}"#,
            #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","receipt":"r","notification":"n"}"#,
            #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a"}"#,
            #"{"schema":"receipt-job/v1","job_id":"","account_id":"a","receipt":"r"}"#,
            #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","receipt":""}"#,
            #"{"schema":"receipt-job/v1","job_id":"j","account_id":null,"receipt":"r"}"#,
            #"{"schema":"receipt-job/v1","job_id":7,"account_id":"a","receipt":"r"}"#,
            #"{"schema":"receipt-job/v2","job_id":"j","account_id":"a","receipt":"r"}"#,
            #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","receipt":"r","submitted_at":"yesterday"}"#,
            #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","receipt":"r"} x"#,
            #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","receipt":"r",}"#,
            #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","receipt":"r""#,
            #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","receipt":"r","n":-0,"m":01,"k":1.5,"b":true}"#,
            #"[]"#, "", "null",
        ])
    func jobReading(input: String) {
        let bytes = Array(input.utf8)
        let foundation = try? codec.decode(ReceiptJob.self, from: bytes)
        let fast = MessageJSONReader.job(from: bytes)
        if let fast { #expect(fast == foundation) }
        if foundation == nil { #expect(fast == nil) }
        // Through the codec: the same answer as Foundation's alone, and the same error when refused.
        let viaCodec = Result { () throws(MessageError) in try codec.decodeJob(bytes) }
        let viaFoundation = Result { () throws(MessageError) in try codec.decode(ReceiptJob.self, from: bytes) }
        #expect(String(describing: viaCodec) == String(describing: viaFoundation))
    }

    @Test("the plain shape is what the writer writes: jobs and verdicts it writes are read back by the reader")
    func plainShape() throws {
        let job = ReceiptJob(
            jobID: "job-1", accountID: "acct-1", proof: .receipt(String(repeating: "MIIT+/=", count: 600)),
            deviceID: "d", bundleID: "b", expectedProductID: "p", submittedAt: Date(timeIntervalSince1970: 1.5))
        #expect(MessageJSONReader.job(from: codec.encode(job)) == job)
        let verdict = Verdict(
            verdictID: "0f8c3bd2-7f6e-5a7d-9c1b-2e4d6f8a0b1c", jobID: "job-1", accountID: "acct-1",
            outcome: .alreadyGranted, reason: .alreadyOwned, decidedBy: .ledger,
            environment: "Sandbox",
            transactions: [
                .init(
                    transactionID: "1", originalTransactionID: nil, productID: "p",
                    purchaseDate: Date(timeIntervalSince1970: 2), quantity: 2),
                .init(
                    transactionID: "2", originalTransactionID: "1", productID: "p",
                    revokedAt: Date(timeIntervalSince1970: 2),
                    revocation: Revocation(type: .refundProrated, percentage: 25_000, reason: 0),
                    ownershipType: .familyShared),
            ],
            appleStatus: 0, decidedAt: Date(timeIntervalSince1970: 3))
        let read = try #require(MessageJSONReader.verdict(from: codec.encode(verdict)))
        #expect(read == verdict)
        #expect(try codec.decode(Verdict.self, from: codec.encode(verdict)) == read)
    }

    @Test(
        "verdicts the reader leaves alone get JSONDecoder's answer",
        arguments: [
            #"{"schema":"receipt-verdict/v1","verdict_id":"v","job_id":"j","account_id":"a","outcome":"rejected","decided_by":"prefilter","transactions":[],"decided_at":"2026-11-22T05:17:53.000Z"}"#,
            #"{"schema":"receipt-verdict/v1","verdict_id":"v","job_id":"j","account_id":"a","outcome":"granted","decided_by":"apple","transactions":[{"transaction_id":"1","product_id":"p","quantity":1.0}],"decided_at":"2026-11-22T05:17:53.000Z"}"#,
            #"{"schema":"receipt-verdict/v1","verdict_id":"v","job_id":"j","account_id":"a","outcome":"maybe","reason":"x","decided_by":"apple","transactions":[],"decided_at":"2026-11-22T05:17:53.000Z"}"#,
            #"{"schema":"receipt-verdict/v1","verdict_id":"v","job_id":"j","account_id":"a","outcome":"granted","decided_by":"apple","decided_at":"2026-11-22T05:17:53.000Z"}"#,
        ])
    func verdictReading(input: String) {
        let bytes = Array(input.utf8)
        let foundation = try? codec.decode(Verdict.self, from: bytes)
        let fast = MessageJSONReader.verdict(from: bytes)
        if let fast { #expect(fast == foundation) }
        if foundation == nil { #expect(fast == nil) }
        let viaCodec = Result { () throws(MessageError) in try codec.decodeVerdict(bytes) }
        let viaFoundation = Result { () throws(MessageError) in try codec.decode(Verdict.self, from: bytes) }
        #expect(String(describing: viaCodec) == String(describing: viaFoundation))
    }

    @Test(
        "a transaction's renewal info (in_billing_retry, grace_period_expires_date, paused) is read on the fast path")
    func renewalInfo() throws {
        let verdict = Verdict(
            verdictID: "0f8c3bd2-7f6e-5a7d-9c1b-2e4d6f8a0b1c", jobID: "j", accountID: "a", outcome: .rejected,
            reason: .expired, decidedBy: .apple,
            transactions: [
                .init(transactionID: "1", productID: "p"),
                .init(transactionID: "2", productID: "p", inBillingRetry: false),
                .init(
                    transactionID: "3", productID: "p", inBillingRetry: true,
                    gracePeriodExpiresDate: Date(timeIntervalSince1970: 90_000)),
                .init(transactionID: "4", productID: "p", inBillingRetry: false, paused: true),
            ], decidedAt: Date(timeIntervalSince1970: 1))
        let bytes = codec.encode(verdict)
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.contains("\"in_billing_retry\":true") && text.contains("\"in_billing_retry\":false"))
        #expect(text.components(separatedBy: "in_billing_retry").count == 4, "absent when not stated")
        #expect(text.components(separatedBy: "\"paused\":true").count == 2, "Google Play's pause, only where stated")
        let fast = try #require(MessageJSONReader.verdict(from: bytes))
        #expect(fast == verdict)
        #expect(try codec.decodeVerdict(bytes) == verdict)
        // A boolean where a string is due is not the plain shape: JSONDecoder refuses it with its precise error.
        #expect(
            MessageJSONReader.verdict(from: Array(text.replacingOccurrences(of: "\"j\"", with: "true").utf8)) == nil)
    }

    @Test("the word-at-a-time scan stops at every byte that ends a string or needs a look, and only there")
    func wordScan() {
        for position in 0..<8 {
            for byte in UInt8.min...UInt8.max {
                var bytes = [UInt8](repeating: UInt8(ascii: "A"), count: 8)
                bytes[position] = byte
                let word = bytes.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) }
                let plain = byte >= 0x20 && byte < 0x80 && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\")
                #expect(MessageJSONReader.isPlainASCII(word) == plain, "byte \(byte) at \(position)")
            }
        }
    }

    @Test(
        "long strings with an escape, a control character or non-ASCII anywhere are read as JSONDecoder reads them",
        arguments: [#"\""#, #"\\"#, #"\u0041"#, #"\/"#, "\u{1}", "\u{7F}", "é", "𝄞", "\t", "+/="])
    func longStrings(piece: String) {
        for position in 0..<20 {
            let receipt = String(repeating: "M", count: position) + piece + String(repeating: "Q", count: 23 - position)
            let input = #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","receipt":""# + receipt + #""}"#
            let bytes = Array(input.utf8)
            let foundation = try? codec.decode(ReceiptJob.self, from: bytes)
            let fast = MessageJSONReader.job(from: bytes)
            if let fast { #expect(fast == foundation, "\(input)") }
            if foundation == nil { #expect(fast == nil, "\(input)") }
            let viaCodec = Result { () throws(MessageError) in try codec.decodeJob(bytes) }
            let viaFoundation = Result { () throws(MessageError) in try codec.decode(ReceiptJob.self, from: bytes) }
            #expect(String(describing: viaCodec) == String(describing: viaFoundation))
        }
    }

    @Test(
        "strings long enough for the scan's four-word rounds stop at such a byte in any word of a round",
        arguments: [#"\""#, #"\\"#, "\u{1}", "\u{7F}", "é", "+/="])
    func longStringsInRounds(piece: String) {
        for position in 0..<100 {
            let receipt =
                String(repeating: "M", count: position) + piece + String(repeating: "Q", count: 120 - position)
            let input = #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","receipt":""# + receipt + #""}"#
            let bytes = Array(input.utf8)
            let foundation = try? codec.decode(ReceiptJob.self, from: bytes)
            let fast = MessageJSONReader.job(from: bytes)
            if let fast { #expect(fast == foundation, "\(input)") }
            if foundation == nil { #expect(fast == nil, "\(input)") }
            if case .receipt(let text)? = fast?.proof { #expect(text == receipt) }
        }
    }
}
