import Foundation
import Messages
import Testing

@Suite("Message contract")
struct MessageCodecTests {
    let codec = MessageCodec()

    func json(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test("a job round-trips with every optional field and each kind of proof")
    func jobRoundTrip() throws {
        let proofs: [ReceiptJob.Proof] = [
            .receipt("MIIT…"), .signedTransaction("a.b.c"), .transactionID("2000000123"), .notification("x.y.z"),
        ]
        for proof in proofs {
            let job = ReceiptJob(
                jobID: "job-1", accountID: "acct-1", proof: proof, deviceID: "dev", bundleID: "com.example.app",
                expectedProductID: "gems.100", submittedAt: Date(timeIntervalSince1970: 1_700_000_000.123))
            let bytes = codec.encode(job)
            let decoded = try codec.decodeJob(bytes)
            #expect(decoded == job)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
            #expect(object["schema"] as? String == "receipt-job/v1")
            #expect(object[proof.fieldName] as? String == proof.value)
            #expect(object["submitted_at"] as? String == "2023-11-14T22:13:20.123Z")
        }
    }

    @Test("a verdict round-trips and lists every transaction field, null when absent")
    func verdictRoundTrip() throws {
        let verdict = Verdict(
            verdictID: "0f8c3bd2-7f6e-5a7d-9c1b-2e4d6f8a0b1c", jobID: "job-1", accountID: "acct-1", outcome: .rejected,
            reason: .replayed, decidedBy: .ledger,
            environment: "Production",
            transactions: [
                .init(
                    transactionID: "1", originalTransactionID: "1", productID: "p",
                    purchaseDate: Date(timeIntervalSince1970: 0))
            ],
            appleStatus: nil, decidedAt: Date(timeIntervalSince1970: 1_700_000_000))
        let bytes = codec.encode(verdict)
        #expect(try codec.decodeVerdict(bytes) == verdict)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
        let transaction = try #require((object["transactions"] as? [[String: Any]])?.first)
        #expect(transaction["expires_date"] is NSNull)
        #expect(transaction["revoked_at"] is NSNull)
        #expect(object["outcome"] as? String == "rejected")
        #expect(object["reason"] as? String == "replayed")
        #expect(object["decided_by"] as? String == "ledger")
    }

    @Test("verdict ids are deterministic name-based UUIDs of the job id and the job's content")
    func verdictIDs() {
        let job = ReceiptJob(jobID: "job-1", accountID: "acct-1", proof: .receipt("MIIT"))
        let a = Verdict.verdictID(for: job)
        #expect(a == Verdict.verdictID(for: job))
        var other = job
        other.jobID = "job-2"
        #expect(a != Verdict.verdictID(for: other))
        #expect(a.count == 36)
        let parts = a.split(separator: "-")
        #expect(parts.map(\.count) == [8, 4, 4, 4, 12])
        #expect(parts[2].first == "5")  // version 5
        #expect("89ab".contains(parts[3].first!))  // RFC 9562 variant
        // RFC 9562 version 5 in the URL namespace, as Python's uuid.uuid5(uuid.NAMESPACE_URL, name) gives them.
        #expect(Verdict.legacyVerdictID(jobID: "job-1") == "719a23fe-c9b6-5b6f-8d9f-c36da885d0d6")
        #expect(Verdict.legacyVerdictID(jobID: "") == "1b4db7eb-4057-5ddf-91e0-36dec72071f5")
        #expect(
            Verdict.legacyVerdictID(jobID: String(repeating: "ü", count: 40)) == "99b437e7-ef63-5f12-bc91-a5c21fa8a370")
        // The job id, then a line feed, then the content digest: the same UUID as Python's uuid5 of that name.
        #expect(
            Verdict.verdictID(jobID: "job-1", contentDigest: String(repeating: "0", count: 64))
                == "aafdf348-d76a-5248-9f12-f740a77719c9")
    }

    @Test("the content digest covers the account, bundle, expected product and proof, not device or time")
    func contentDigest() {
        let job = ReceiptJob(
            jobID: "job-1", accountID: "acct-1", proof: .receipt("MIIT"), deviceID: "d1", bundleID: "com.example.app",
            expectedProductID: "p1", submittedAt: Date(timeIntervalSince1970: 1))
        let digest = job.contentDigest
        #expect(digest.count == 64)
        #expect(digest.allSatisfy { "0123456789abcdef".contains($0) })
        var same = job
        same.deviceID = "d2"
        same.submittedAt = Date(timeIntervalSince1970: 2)
        same.jobID = "job-2"
        #expect(same.contentDigest == digest)
        let changes: [(inout ReceiptJob) -> Void] = [
            { $0.accountID = "acct-2" }, { $0.bundleID = nil }, { $0.bundleID = "com.example.other" },
            { $0.expectedProductID = nil }, { $0.expectedProductID = "p2" }, { $0.proof = .receipt("MIIU") },
            { $0.proof = .signedTransaction("MIIT") }, { $0.proof = .transactionID("MIIT") },
            // Fields cannot run into each other: the account's end moved into the bundle id.
            {
                $0.accountID = "acct-1com"; $0.bundleID = ".example.app"
            },
        ]
        var digests: Set<String> = [digest]
        for change in changes {
            var changed = job
            change(&changed)
            digests.insert(changed.contentDigest)
        }
        #expect(digests.count == changes.count + 1)
    }

    @Test("unknown fields are ignored")
    func unknownFields() throws {
        let job = try codec.decodeJob(
            json(#"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","receipt":"r","future":{"x":[1,2]}}"#))
        #expect(job.proof == .receipt("r"))
    }

    @Test(
        "malformed, wrong-typed and incomplete jobs are refused with a precise code",
        arguments: [
            (#"not json"#, MessageError.Code.notJSON, nil),
            (#"[1,2,3]"#, .wrongType, nil),
            (#"{"job_id":"j","account_id":"a","receipt":"r"}"#, .missingField, "schema"),
            (#"{"schema":"receipt-job/v2","job_id":"j","account_id":"a","receipt":"r"}"#, .unsupportedSchema, "schema"),
            (#"{"schema":"receipt-job/v1","account_id":"a","receipt":"r"}"#, .missingField, "job_id"),
            (#"{"schema":"receipt-job/v1","job_id":"j","receipt":"r"}"#, .missingField, "account_id"),
            (#"{"schema":"receipt-job/v1","job_id":7,"account_id":"a","receipt":"r"}"#, .wrongType, "job_id"),
            (#"{"schema":"receipt-job/v1","job_id":"j","account_id":null,"receipt":"r"}"#, .missingField, "account_id"),
            (#"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","receipt":["r"]}"#, .wrongType, "receipt"),
            (#"{"schema":"receipt-job/v1","job_id":"j","account_id":"a"}"#, .invalidValue, nil),
            (
                #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","receipt":"r","signed_transaction":"s"}"#,
                .invalidValue, nil
            ),
            (#"{"schema":"receipt-job/v1","job_id":"","account_id":"a","receipt":"r"}"#, .invalidValue, "job_id"),
            (#"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","receipt":""}"#, .invalidValue, "receipt"),
            (
                #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","receipt":"r","submitted_at":"yesterday"}"#,
                .invalidValue, "submitted_at"
            ),
            (
                #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","receipt":"r","submitted_at":12}"#,
                .wrongType, "submitted_at"
            ),
        ] as [(String, MessageError.Code, String?)])
    func refusals(input: String, code: MessageError.Code, field: String?) {
        do {
            _ = try codec.decodeJob(json(input))
            Issue.record("accepted \(input)")
        } catch {
            #expect(error.code == code, "\(input): \(error)")
            if let field { #expect(error.field == field, "\(input): \(error)") }
        }
    }

    @Test("identifiers longer than the limit are refused")
    func longIdentifier() {
        let long = String(repeating: "a", count: ReceiptJob.maximumIdentifierLength + 1)
        #expect(throws: MessageError.self) {
            try codec.decodeJob(
                json(#"{"schema":"receipt-job/v1","job_id":"\#(long)","account_id":"a","receipt":"r"}"#))
        }
    }

    @Test("oversized messages are refused before parsing, at the configured limit")
    func oversized() throws {
        let small = MessageCodec(maximumMessageBytes: 64)
        let body = json(
            #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","receipt":"\#(String(repeating: "A", count: 100))"}"#
        )
        #expect(throws: MessageError(.oversized, "\(body.count) bytes, limit 64")) { try small.decodeJob(body) }
        // The default limit is 1 MiB.
        let big = [UInt8](repeating: 0x20, count: (1 << 20) + 1)
        do {
            _ = try codec.decodeJob(big)
            Issue.record("accepted 1 MiB + 1")
        } catch { #expect(error.code == .oversized) }
    }

    @Test("invalid UTF-8 and deeply nested JSON are refused without crashing")
    func hostileInput() {
        let invalidUTF8: [UInt8] =
            Array(#"{"schema":"receipt-job/v1","job_id":""#.utf8) + [0xC3, 0x28]
            + Array(#"","account_id":"a","receipt":"r"}"#.utf8)
        #expect(throws: MessageError.self) { try codec.decodeJob(invalidUTF8) }
        let deep =
            Array(String(repeating: "[", count: 100_000).utf8) + Array(String(repeating: "]", count: 100_000).utf8)
        #expect(throws: MessageError.self) { try codec.decodeJob(deep) }
        let deepObject = json(
            #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","receipt":"r","x":"#
                + String(repeating: #"{"a":"#, count: 50_000) + "1" + String(repeating: "}", count: 50_000) + "}")
        _ = try? codec.decodeJob(deepObject)  // accepted or refused, but never a crash
    }

    @Test("error texts name the field but never quote a value from the message")
    func errorsDoNotLeakValues() {
        let secretish = "MIITsecretreceiptbytes"
        for input in [
            #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","receipt":"\#(secretish)","submitted_at":"\#(secretish)"}"#,
            #"{"schema":"\#(secretish)","job_id":"j","account_id":"a","receipt":"r"}"#,
        ] {
            do {
                _ = try codec.decodeJob(json(input))
                Issue.record("accepted")
            } catch { #expect(!error.description.contains(secretish)) }
        }
    }

    @Test("a dead letter keeps the original bytes untouched and its reason in headers")
    func deadLetter() throws {
        let original: [UInt8] = [0xFF, 0x00, 0x7B, 0x22]
        let error = MessageError(.notJSON, "not a JSON object in UTF-8")
        let letter = DeadLetter(
            rejecting: original, key: Array("acct".utf8), error: error, topic: "receipt-jobs", partition: 3, offset: 42)
        let back = try #require(DeadLetter(key: letter.key, value: letter.original, headers: letter.headers))
        #expect(back == letter)
        #expect(back.original == original)
        #expect(back.reason == "not_json")
        #expect(DeadLetter(key: nil, value: original, headers: []) == nil)
    }

    @Test("dates are read with or without fractional seconds and with offsets")
    func dates() throws {
        for (text, seconds) in [
            ("2023-11-14T22:13:20Z", 1_700_000_000.0), ("2023-11-14T22:13:20.5Z", 1_700_000_000.5),
            ("2023-11-14T23:13:20+01:00", 1_700_000_000.0),
        ] {
            let job = try codec.decodeJob(
                json(
                    #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","receipt":"r","submitted_at":"\#(text)"}"#
                ))
            #expect(job.submittedAt == Date(timeIntervalSince1970: seconds), "\(text)")
        }
    }
}

@Suite("RFC 3339 dates")
struct RFC3339Tests {
    @Test("formatting rounds to the millisecond and parsing gives the same date back")
    func roundTrip() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let millis = Int64.random(in: -2_000_000_000_000...8_000_000_000_000, using: &generator)
            let date = Date(timeIntervalSince1970: Double(millis) / 1000)
            let text = RFC3339.format(date)
            let back = try #require(RFC3339.parse(text), "\(text)")
            #expect(RFC3339.format(back) == text)
            #expect(abs(back.timeIntervalSince1970 - date.timeIntervalSince1970) < 0.0005, "\(text)")
        }
        #expect(RFC3339.format(Date(timeIntervalSince1970: 1_700_000_000.123)) == "2023-11-14T22:13:20.123Z")
        #expect(RFC3339.format(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00.000Z")
        #expect(RFC3339.format(Date(timeIntervalSince1970: 951_782_400)) == "2000-02-29T00:00:00.000Z")
    }

    @Test(
        "invalid date-times are refused",
        arguments: [
            "", "2023-11-14", "2023-13-01T00:00:00Z", "2023-02-29T00:00:00Z", "2023-11-14T24:00:00Z",
            "2023-11-14T22:13:20", "2023-11-14T22:13:20.Z", "2023-11-14T22:13:20+1", "2023-11-14T22:13:20Zjunk",
            "yesterday",
        ])
    func refused(text: String) {
        #expect(RFC3339.parse(text) == nil)
    }
}
