import AppleSimulator
import Crypto
import Foundation
import Messages
import Testing

/// Optionally, with `set_app_account_tokens`, a purchase granted to a job without a token is
/// tagged once, through Set App Account Token at the simulator, with the owner's derived token; afterwards Apple's
/// answers carry it, the owner's jobs still match, and another account's job is `account_token_mismatch`.
@Suite("Pipeline: Set App Account Token after a grant", .timeLimit(.minutes(2)))
struct SetAppAccountTokenTests {
    @Test("a new grant without a token is tagged once with the owner's derived token; another account then mismatches")
    func tagsNewGrants() async throws {
        try await PipelineHarness.with { harness in
            try harness.startWorker(
                0,
                extra: [
                    "set_app_account_tokens": "true", "server_api_production_url": "http://127.0.0.1:\(harness.port)",
                    "server_api_sandbox_url": "http://127.0.0.1:\(harness.port)/sandbox",
                    "server_api_key_id": "KEY123", "server_api_issuer_id": "issuer",
                ],
                environment: ["VERIFY_SERVER_API_KEY": P256.Signing.PrivateKey().pemRepresentation])
            try await harness.waitUntilAssigned()
            let (grant, transactionID) = try harness.genuineJob(account: "acct-tag", format: .signedTransaction)
            try await harness.submit([grant])
            try await harness.verdicts.waitForVerdicts(of: [grant.jobID])
            #expect(harness.verdicts.byJob[grant.jobID]?.first?.outcome == .granted)
            let derived = AppAccountToken.derived(fromAccountID: "acct-tag")
            try await PipelineHarness.poll("the simulator's transaction tagged") {
                harness.simulator.transaction(transactionID)?.appAccountToken == derived
            }

            // Now Apple answers with the token: the owner's job (no token) matches, another account's does not.
            let owner = ReceiptJob(jobID: "job-tag-owner", accountID: "acct-tag", proof: .transactionID(transactionID))
            let other = ReceiptJob(
                jobID: "job-tag-other", accountID: "acct-other", proof: .transactionID(transactionID))
            try await harness.submit([owner, other])
            try await harness.verdicts.waitForVerdicts(of: [owner.jobID, other.jobID])
            #expect(harness.verdicts.byJob[owner.jobID]?.first?.outcome == .alreadyGranted)
            #expect(harness.verdicts.byJob[other.jobID]?.first?.reason == .accountTokenMismatch)
            // Only the new grant was tagged, once.
            let calls = harness.simulator.stats.snapshot().requests["inApps/v1/transactions/appAccountToken"] ?? 0
            #expect(calls == 1)
        }
    }
}
