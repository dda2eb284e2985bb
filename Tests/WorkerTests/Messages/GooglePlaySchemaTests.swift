import Foundation
import Testing

@testable import Messages

/// The Google Play fields in the JSON Schemas and in docs/messages.md: what the codec writes validates, what the
/// schema forbids the codec refuses, and every field the codec reads or writes is named in the schema and the doc.
@Suite("Google Play fields in the schemas and docs", .timeLimit(.minutes(2)))
struct GooglePlaySchemaTests {
    let codec = MessageCodec()

    static func text(_ path: String) throws -> String {
        try String(contentsOf: TestEnvironment.packageRoot.appendingPathComponent(path), encoding: .utf8)
    }

    @Test("Play jobs and verdicts the codec writes validate against the schemas")
    func playValidates() async throws {
        let jobs: [ReceiptJob] = [
            GooglePlayMessageTests.job(), GooglePlayMessageTests.job(GooglePlayMessageTests.signedPurchase),
            GooglePlayNotificationMessageTests.job(),
            GooglePlayNotificationMessageTests.job(GooglePlayNotificationMessageTests.notification(token: nil)),
            GooglePlayNotificationMessageTests.job(
                GooglePlayNotificationMessageTests.notification(text: nil, messageID: nil, publishedAt: nil)),
        ]
        #expect(
            try await SchemaValidator.validate(jobs.map(codec.encode), schema: "receipt-job.v1.schema.json")
                == ["ok", "ok", "ok", "ok", "ok"])
        let at = Date(timeIntervalSince1970: 1_700_000_000)
        let verdicts = [
            Verdict(
                job: GooglePlayMessageTests.job(), outcome: .granted, decidedBy: .apple,
                transactions: [
                    .init(transactionID: "GPA.1", productID: "coins", purchaseDate: at, orderID: "GPA.1"),
                    .init(
                        transactionID: "tok", productID: "pro", expiresDate: at, orderID: "GPA.2..0",
                        purchaseToken: "tok"),
                ], decidedAt: at),
            Verdict(
                job: GooglePlayMessageTests.job(), outcome: .rejected, reason: .productMismatch,
                decidedBy: .prefilter, decidedAt: at),
        ]
        #expect(
            try await SchemaValidator.validate(verdicts.map(codec.encode), schema: "receipt-verdict.v1.schema.json")
                == ["ok", "ok"])
    }

    @Test("what the job schema forbids of a Play purchase, the codec refuses too")
    func playRefusalsAgree() async throws {
        let prefix = #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","#
        let invalid = [
            #""receipt":"r","google_play":{"package_name":"p","product_id":"x","purchase_token":"t"}}"#,
            #""google_play":"t"}"#,
            #""google_play":{"package_name":"p","product_id":"x"}}"#,
            #""google_play":{"package_name":"","product_id":"x","purchase_token":"t"}}"#,
            #""google_play":{"package_name":"p","product_id":"x","purchase_token":""}}"#,
            #""google_play":{"package_name":"p","product_id":"x","purchase_token":"t","signature":"s"}}"#,
            #""google_play":{"package_name":"p","product_id":"x","purchase_token":"t","purchase_data":"{}"}}"#,
            #""google_play":{"package_name":"p","product_id":"x","purchase_token":"t"},"google_play_notification":{"package_name":"p","purchase_token":"t"}}"#,
            #""google_play_notification":{"package_name":"p"}}"#,
            #""google_play_notification":{"purchase_token":"t"}}"#,
            #""google_play_notification":{"package_name":"p","purchase_token":""}}"#,
            #""google_play_notification":{"package_name":"p","notification":""}}"#,
            #""google_play_notification":{"package_name":"p","purchase_token":"t","message_id":"a b"}}"#,
            #""google_play_notification":{"package_name":"p","purchase_token":"t","message_id":""}}"#,
        ].map { Array((prefix + $0).utf8) }
        let results = try await SchemaValidator.validate(invalid, schema: "receipt-job.v1.schema.json")
        #expect(results.count == invalid.count)
        #expect(results.allSatisfy { $0.hasPrefix("invalid") }, "\(results)")
        for document in invalid {
            #expect(throws: MessageError.self) { try codec.decodeJob(document) }
        }
    }

    @Test("every job and verdict field the codec knows is in the schemas and in docs/messages.md")
    func fieldsDocumented() throws {
        let jobSchema = try Self.text("docs/schemas/receipt-job.v1.schema.json")
        let verdictSchema = try Self.text("docs/schemas/receipt-verdict.v1.schema.json")
        let doc = try Self.text("docs/messages.md")
        let jobFields =
            ReceiptJob.CodingKeys.allCases.map(\.rawValue) + GooglePlayPurchase.CodingKeys.allCases.map(\.rawValue)
            + GooglePlayNotification.CodingKeys.allCases.map(\.rawValue)
        for field in jobFields {
            #expect(jobSchema.contains("\"\(field)\""), "receipt-job.v1.schema.json lacks \(field)")
            #expect(doc.contains("`\(field)`"), "docs/messages.md lacks \(field)")
        }
        for field in ["store", "order_id", "purchase_token"] + Store.allCases.map(\.rawValue) {
            #expect(verdictSchema.contains("\"\(field)\""), "receipt-verdict.v1.schema.json lacks \(field)")
            #expect(doc.contains("`\(field)`"), "docs/messages.md lacks \(field)")
        }
    }
}
