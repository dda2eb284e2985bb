import AppleSimulator
import Foundation
import Messages
import Testing

/// App account tokens through a worker: purchases the app tagged with an `appAccountToken` (a StoreKit 2 JWS checked
/// locally, an app receipt checked through verifyReceipt) are granted only to the job with that token.
@Suite("Pipeline: app account tokens", .timeLimit(.minutes(2)))
struct PipelineAccountTokenTests {
    static let token = "3f2a9c4e-1b7d-4e8f-a0b1-c2d3e4f5a6b7"
    static let other = "00000000-0000-4000-8000-000000000000"

    @Test("a tagged purchase: another token is account_token_mismatch, nothing claimed; the right token is granted")
    func tokens() async throws {
        try await PipelineHarness.with { harness in
            try harness.startWorker(0)
            try await harness.waitUntilAssigned()
            var jobs: [(mismatch: ReceiptJob, match: ReceiptJob, by: Verdict.DecidedBy)] = []
            for (index, format) in [SimulatedReceiptFormat.signedTransaction, .appReceipt].enumerated() {
                let minted = try harness.simulator.mint(
                    MintRequest(
                        bundleId: PipelineHarness.bundleID, productId: PipelineHarness.consumable, format: format,
                        environment: .production, appAccountToken: Self.token.uppercased()))
                let proof: ReceiptJob.Proof =
                    format == .signedTransaction ? .signedTransaction(minted.receipt) : .receipt(minted.receipt)
                let mismatch = ReceiptJob(
                    jobID: "job-token-wrong-\(index)", accountID: "acct-token-\(index)", proof: proof,
                    appAccountToken: Self.other)
                let match = ReceiptJob(
                    jobID: "job-token-right-\(index)", accountID: "acct-token-\(index)", proof: proof,
                    appAccountToken: Self.token)
                jobs.append((mismatch, match, format == .signedTransaction ? .signature : .apple))
            }
            try await harness.submit(jobs.map(\.mismatch))
            try await harness.verdicts.waitForVerdicts(of: jobs.map(\.mismatch.jobID))
            for (mismatch, _, by) in jobs {
                let verdict = try #require(harness.verdicts.byJob[mismatch.jobID]?.first)
                #expect(verdict.outcome == .rejected, "\(mismatch.jobID)")
                #expect(verdict.reason == .accountTokenMismatch, "\(mismatch.jobID)")
                #expect(verdict.decidedBy == by, "\(mismatch.jobID)")
            }
            // Nothing was claimed: the owner's job with the right token is granted, not replayed.
            try await harness.submit(jobs.map(\.match))
            try await harness.verdicts.waitForVerdicts(of: jobs.map(\.match.jobID))
            for (_, match, _) in jobs {
                #expect(harness.verdicts.byJob[match.jobID]?.first?.outcome == .granted, "\(match.jobID)")
            }
        }
    }
}
