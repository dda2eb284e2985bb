import AppleSimulator
import Foundation
import Messages
import Testing
import Worker

/// `expected_product_id` is checked before ownership on every path: a proof the account already owns, sent again
/// for another product, is `product_mismatch`, never `already_granted` (it was for app and iOS 6 receipts, whose
/// ownership the ledger answered before Apple was asked).
@Suite("Pipeline: expected product before ownership", .serialized, .timeLimit(.minutes(3)))
struct ExpectedProductTests {
    @Test("an owned proof sent again for another product is product_mismatch, in every format")
    func ownedProofForAnotherProduct() async throws {
        try await PipelineHarness.with { harness in
            try harness.startWorker(0)
            try await harness.waitUntilAssigned()
            for format in SimulatedReceiptFormat.allCases {
                let account = "acct-expected-\(format.rawValue)"
                let first = try harness.genuineJob(account: account, format: format).job
                try await harness.submit([first])
                try await harness.verdicts.waitForVerdicts(of: [first.jobID])
                #expect(harness.verdicts.byJob[first.jobID]?.first?.outcome == .granted, "\(format)")

                let again = ExpectedProductTests.job(first, id: "again-", expected: PipelineHarness.consumable)
                let other = ExpectedProductTests.job(first, id: "other-", expected: "com.example.verifyworker.other")
                try await harness.submit([again, other])
                try await harness.verdicts.waitForVerdicts(of: [again.jobID, other.jobID])
                let verdicts = harness.verdicts.byJob
                #expect(verdicts[again.jobID]?.first?.outcome == .alreadyGranted, "\(format)")
                #expect(verdicts[other.jobID]?.first?.outcome == .rejected, "\(format)")
                #expect(verdicts[other.jobID]?.first?.reason == .productMismatch, "\(format)")
                // The proof shows the product is not there: decided without asking Apple.
                #expect(verdicts[other.jobID]?.first?.decidedBy != .apple, "\(format)")
            }
        }
    }

    static func job(_ job: ReceiptJob, id prefix: String, expected: String) -> ReceiptJob {
        var job = job
        job.jobID = prefix + job.jobID
        job.expectedProductID = expected
        return job
    }
}
