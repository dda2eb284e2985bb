import Foundation
import Messages
import Testing

/// The JSON Schemas in docs/schemas are the contract other languages code against: what the Swift codec writes
/// must validate, and what the schema forbids the codec must refuse. Checked with Python's `jsonschema`.
@Suite("JSON Schemas match the codec", .timeLimit(.minutes(2)))
struct SchemaConformanceTests {
    let codec = MessageCodec()

    func validate(_ documents: [[UInt8]], schema: String) async throws -> [String] {
        try await SchemaValidator.validate(documents, schema: schema)
    }

    @Test("every job the codec writes validates against receipt-job.v1")
    func jobs() async throws {
        let jobs: [ReceiptJob] = [
            .init(jobID: "j1", accountID: "a", proof: .receipt("MIIT")),
            .init(
                jobID: "j2", accountID: "a", proof: .signedTransaction("a.b.c"), deviceID: "d", bundleID: "b",
                expectedProductID: "p", submittedAt: Date(timeIntervalSince1970: 1_700_000_000)),
            .init(jobID: "j3", accountID: "a", proof: .transactionID("2000000001")),
            .init(jobID: "j4", accountID: "a", proof: .notification("x.y.z")),
        ]
        let results = try await validate(jobs.map(codec.encode), schema: "receipt-job.v1.schema.json")
        #expect(results == Array(repeating: "ok", count: jobs.count))
    }

    @Test("what the schema forbids, the codec refuses too")
    func refusalsAgree() async throws {
        let invalid = [
            #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a"}"#,
            #"{"schema":"receipt-job/v1","job_id":"j","account_id":"a","receipt":"r","notification":"n"}"#,
            #"{"schema":"receipt-job/v1","job_id":"","account_id":"a","receipt":"r"}"#,
            #"{"schema":"receipt-job/v1","job_id":7,"account_id":"a","receipt":"r"}"#,
            #"{"schema":"receipt-job/v2","job_id":"j","account_id":"a","receipt":"r"}"#,
        ].map { Array($0.utf8) }
        let results = try await validate(invalid, schema: "receipt-job.v1.schema.json")
        #expect(results.count == invalid.count)
        #expect(results.allSatisfy { $0.hasPrefix("invalid") }, "\(results)")
        for document in invalid {
            #expect(throws: MessageError.self) { try codec.decodeJob(document) }
        }
    }

    @Test("every verdict outcome the codec writes validates against receipt-verdict.v1")
    func verdicts() async throws {
        let at = Date(timeIntervalSince1970: 1_700_000_000)
        let transaction = Verdict.Transaction(
            transactionID: "1", originalTransactionID: "1", productID: "p", purchaseDate: at, expiresDate: at,
            quantity: 1)
        let verdicts: [Verdict] = [
            .init(
                verdictID: "0f8c3bd2-7f6e-5a7d-9c1b-2e4d6f8a0b1c", jobID: "j", accountID: "a", outcome: .granted,
                decidedBy: .apple, environment: "Production",
                transactions: [transaction], appleStatus: 0, decidedAt: at),
            .init(
                verdictID: "0f8c3bd2-7f6e-5a7d-9c1b-2e4d6f8a0b1c", jobID: "j", accountID: "a", outcome: .alreadyGranted,
                reason: .alreadyOwned, decidedBy: .ledger,
                transactions: [transaction], decidedAt: at),
            .init(
                verdictID: "0f8c3bd2-7f6e-5a7d-9c1b-2e4d6f8a0b1c", jobID: "j", accountID: "a", outcome: .alreadyGranted,
                reason: .alreadyOwned, decidedBy: .signature,
                transactions: [
                    transaction,
                    .init(
                        transactionID: "2", originalTransactionID: "1", productID: "p", expiresDate: at,
                        inBillingRetry: true, gracePeriodExpiresDate: at),
                ], decidedAt: at),
            .init(
                verdictID: "0f8c3bd2-7f6e-5a7d-9c1b-2e4d6f8a0b1c", jobID: "j", accountID: "a", outcome: .rejected,
                reason: .malformed, decidedBy: .prefilter, decidedAt: at
            ),
            .init(
                verdictID: "0f8c3bd2-7f6e-5a7d-9c1b-2e4d6f8a0b1c", jobID: "j", accountID: "m", outcome: .rejected,
                reason: .revoked, decidedBy: .signature,
                transactions: [
                    .init(
                        transactionID: "3", originalTransactionID: "1", productID: "p", revokedAt: at,
                        revocation: Revocation(type: .familyRevoke, reason: 0), ownershipType: .familyShared),
                    .init(
                        transactionID: "1", originalTransactionID: "1", productID: "p", revokedAt: at,
                        revocation: Revocation(type: .refundProrated, percentage: 67_932, reason: 1),
                        ownershipType: .purchased),
                ], decidedAt: at),
            .init(
                verdictID: "0f8c3bd2-7f6e-5a7d-9c1b-2e4d6f8a0b1c", jobID: "j", accountID: "a", outcome: .unverifiable,
                reason: .appleUnavailable, decidedBy: .apple,
                decidedAt: at),
        ]
        let results = try await validate(verdicts.map(codec.encode), schema: "receipt-verdict.v1.schema.json")
        #expect(results == Array(repeating: "ok", count: verdicts.count))
    }
}
