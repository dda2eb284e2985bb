import Foundation
import Testing

@testable import Messages

/// The contract's Google Play additions: the job's fifth proof field (`google_play`), the verdict's `store` and its
/// transactions' Play identifiers. Additive: App Store jobs, their verdict ids and older verdicts read as before.
@Suite("Google Play in the message contract")
struct GooglePlayMessageTests {
    let codec = MessageCodec()

    static let purchase = GooglePlayPurchase(
        packageName: "com.example.app", productID: "pro", purchaseToken: "tok.en-1_x")
    static let signedPurchase = GooglePlayPurchase(
        packageName: "com.example.app", productID: "pro", purchaseToken: "tok.en-1_x",
        purchaseData: "{\"orderId\":\"GPA.1\",\"purchaseToken\":\"tok.en-1_x\"}\n", signature: "c2ln")

    static func job(_ purchase: GooglePlayPurchase = purchase) -> ReceiptJob {
        ReceiptJob(jobID: "play-1", accountID: "acct-1", proof: .googlePlay(purchase))
    }

    static func refusal(_ json: String) -> MessageError? {
        do {
            _ = try MessageCodec().decodeJob(Array(json.utf8))
            return nil
        } catch {
            return error
        }
    }

    @Test("a Play job is written as JSONEncoder writes it, read back equal by the fast reader and by JSONDecoder")
    func roundTrip() throws {
        for purchase in [Self.purchase, Self.signedPurchase] {
            let job = Self.job(purchase)
            let bytes = codec.encode(job)
            #expect(bytes == MessageCodec.encodeValue(job))
            #expect(try codec.decodeJob(bytes) == job)
            #expect(try codec.decode(ReceiptJob.self, from: bytes) == job)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
            let play = try #require(object["google_play"] as? [String: Any])
            #expect(play["package_name"] as? String == "com.example.app")
            #expect(play["purchase_token"] as? String == "tok.en-1_x")
            #expect(play["purchase_data"] as? String == purchase.purchaseData)
        }
        // Without escapes the fast reader takes it; signed data (quotes, a line end) goes to JSONDecoder unchanged.
        #expect(MessageJSONReader.job(from: codec.encode(Self.job())) == Self.job())
        #expect(MessageJSONReader.job(from: codec.encode(Self.job(Self.signedPurchase))) == nil)
    }

    @Test(
        "bad Play shapes are dead letters with the existing codes, naming the field",
        arguments: [
            (
                #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","receipt":"r","google_play":{"package_name":"p","product_id":"x","purchase_token":"t"}}"#,
                MessageError.Code.invalidValue,
                "receipt|signed_transaction|transaction_id|notification|google_play|google_play_notification"
            ),
            (
                #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","google_play":"token"}"#, .wrongType,
                "google_play"
            ),
            (
                #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","google_play":{"package_name":"p","product_id":"x"}}"#,
                .missingField, "google_play.purchase_token"
            ),
            (
                #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","google_play":{"package_name":"p","product_id":7,"purchase_token":"t"}}"#,
                .wrongType, "google_play.product_id"
            ),
            (
                #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","google_play":{"package_name":"","product_id":"x","purchase_token":"t"}}"#,
                .invalidValue, "google_play.package_name"
            ),
            (
                #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","google_play":{"package_name":"p","product_id":"x","purchase_token":""}}"#,
                .invalidValue, "google_play.purchase_token"
            ),
            (
                #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","google_play":{"package_name":"p","product_id":"x","purchase_token":"t","signature":"s"}}"#,
                .missingField, "google_play.purchase_data"
            ),
            (
                #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","google_play":{"package_name":"p","product_id":"x","purchase_token":"t","purchase_data":"{}"}}"#,
                .missingField, "google_play.signature"
            ),
            (
                #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","google_play":{"package_name":"p","product_id":"x","purchase_token":"t","purchase_data":"","signature":"s"}}"#,
                .invalidValue, "google_play.purchase_data"
            ),
        ])
    func refusals(json: String, code: MessageError.Code, field: String) throws {
        let error = try #require(Self.refusal(json))
        #expect(error.code == code)
        #expect(error.field == field)
        // The fast reader never takes what JSONDecoder refuses.
        #expect(MessageJSONReader.job(from: Array(json.utf8)) == nil)
    }

    @Test(
        "the fast reader returns what JSONDecoder returns for Play jobs, or leaves them to it",
        arguments: [
            #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","google_play":{"package_name":"p","product_id":"x","purchase_token":"t"}}"#,
            #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","google_play":{"package_name":"p","product_id":"x","purchase_token":"t","purchase_data":null,"signature":null,"future":1}}"#,
            #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","google_play":{"package_name":"p","product_id":"x","purchase_token":"t","extra":{"k":[1]}}}"#,
            #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","google_play":{"package_name":"p","product_id":"x","purchase_token":"t","purchase_data":"{"a":1}","signature":"s"}}"#,
            #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","google_play":null,"receipt":"r"}"#,
            #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","google_play":[],"receipt":"r"}"#,
            #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","google_play":{}}"#,
        ])
    func fastReaderAgrees(input: String) {
        let bytes = Array(input.utf8)
        let foundation = try? codec.decode(ReceiptJob.self, from: bytes)
        let fast = MessageJSONReader.job(from: bytes)
        if let fast { #expect(fast == foundation) }
        if foundation == nil { #expect(fast == nil) }
        let viaCodec = Result { () throws(MessageError) in try codec.decodeJob(bytes) }
        let viaFoundation = Result { () throws(MessageError) in try codec.decode(ReceiptJob.self, from: bytes) }
        #expect(String(describing: viaCodec) == String(describing: viaFoundation))
    }

    @Test("a Play job is keyed by its account, like every job but a notification")
    func messageKey() {
        #expect(Self.job().messageKey == Array("acct-1".utf8))
    }

    @Test("the content digest covers every field of the Play purchase; App Store verdict ids are what they were")
    func contentDigest() {
        // Python: uuid5(NAMESPACE_URL, job_id + "\n" + sha256 of the fields as docs/messages.md describes them).
        #expect(Verdict.verdictID(for: Self.job()) == "c4ebf76c-9379-541a-b711-56d4b9216a78")
        #expect(
            Verdict.verdictID(
                for: ReceiptJob(
                    jobID: "job-1", accountID: "acct-1", proof: .receipt("MIIT"), bundleID: "com.example.app"))
                == "cd28af2c-7a36-50e5-b83c-7c6beb87a652")
        #expect(
            Verdict.verdictID(for: ReceiptJob(jobID: "job-1", accountID: "acct-1", proof: .transactionID("2000000001")))
                == "93c015d3-0867-5876-a7ad-f293b79cd7a6")
        let base = Self.signedPurchase
        let changes: [(inout GooglePlayPurchase) -> Void] = [
            { $0.packageName = "com.example.other" }, { $0.productID = "pro2" }, { $0.purchaseToken = "tok.en-2" },
            { $0.purchaseData = "{}" }, { $0.signature = "c2lo" },
            {
                $0.purchaseData = nil; $0.signature = nil
            },
            // Fields cannot run into each other: the package's end moved into the product id.
            {
                $0.packageName = "com.example.apppro"; $0.productID = ""
            },
        ]
        var digests: Set<String> = [Self.job(base).contentDigest]
        for change in changes {
            var changed = base
            change(&changed)
            digests.insert(Self.job(changed).contentDigest)
        }
        #expect(digests.count == changes.count + 1)
        // Not the receipt of the same text.
        #expect(
            Self.job().contentDigest
                != ReceiptJob(jobID: "play-1", accountID: "acct-1", proof: .receipt("tok.en-1_x")).contentDigest)
    }

    @Test("every verdict names its store: the proof's; a verdict without the field reads as the App Store's")
    func verdictStore() throws {
        let at = Date(timeIntervalSince1970: 1_700_000_000)
        let play = Verdict(
            job: Self.job(), outcome: .rejected, reason: .malformed, decidedBy: .prefilter, decidedAt: at)
        let apple = Verdict(
            job: ReceiptJob(jobID: "j", accountID: "a", proof: .receipt("MIIT")), outcome: .rejected,
            reason: .malformed, decidedBy: .prefilter, decidedAt: at)
        #expect(play.store == .googlePlay)
        #expect(apple.store == .appStore)
        for verdict in [play, apple] {
            let bytes = codec.encode(verdict)
            #expect(bytes == MessageCodec.encodeValue(verdict))
            let object = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
            #expect(object["store"] as? String == verdict.store.rawValue)
            #expect(try codec.decodeVerdict(bytes) == verdict)
            #expect(MessageJSONReader.verdict(from: bytes) == verdict)
        }
        let older = Array(
            #"{"schema":"receipt-verdict/v1","verdict_id":"v","job_id":"j","account_id":"a","outcome":"rejected","reason":"malformed","decided_by":"prefilter","transactions":[],"decided_at":"2026-11-22T05:17:53.000Z"}"#
                .utf8)
        #expect(try codec.decodeVerdict(older).store == .appStore)
        #expect(try codec.decode(Verdict.self, from: older).store == .appStore)
        let unknown = Array(
            #"{"schema":"receipt-verdict/v1","verdict_id":"v","job_id":"j","account_id":"a","outcome":"rejected","reason":"malformed","decided_by":"prefilter","store":"mall","transactions":[],"decided_at":"2026-11-22T05:17:53.000Z"}"#
                .utf8)
        #expect(throws: MessageError.self) { try codec.decodeVerdict(unknown) }
    }

    @Test("a Play transaction carries its order id and, for a subscription, its purchase token")
    func playTransactions() throws {
        let verdict = Verdict(
            job: Self.job(), outcome: .granted, decidedBy: .apple,
            transactions: [
                .init(transactionID: "GPA.1", productID: "coins", orderID: "GPA.1"),
                .init(
                    transactionID: "tok.en-1_x", productID: "pro", expiresDate: Date(timeIntervalSince1970: 86_400),
                    orderID: "GPA.2..0", purchaseToken: "tok.en-1_x"),
            ], decidedAt: Date(timeIntervalSince1970: 1))
        let bytes = codec.encode(verdict)
        #expect(bytes == MessageCodec.encodeValue(verdict))
        #expect(try codec.decodeVerdict(bytes) == verdict)
        #expect(MessageJSONReader.verdict(from: bytes) == verdict)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
        let transactions = try #require(object["transactions"] as? [[String: Any]])
        #expect(transactions[0]["order_id"] as? String == "GPA.1")
        #expect(transactions[0]["purchase_token"] == nil)
        #expect(transactions[1]["purchase_token"] as? String == "tok.en-1_x")
        // App Store transactions carry neither.
        let apple = Verdict.Transaction(transactionID: "1", productID: "p")
        let appleObject = try #require(
            try JSONSerialization.jsonObject(with: Data(MessageCodec.encodeValue(apple))) as? [String: Any])
        #expect(appleObject["order_id"] == nil && appleObject["purchase_token"] == nil)
    }
}
