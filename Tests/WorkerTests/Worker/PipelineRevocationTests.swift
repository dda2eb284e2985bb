import Foundation
import Messages
import Testing
import Worker

@testable import AppleSimulator

/// Revocation detail and Family Sharing through the worker, on what the Apple simulator mints and signs: a family
/// member's purchase is granted to the member, a family revocation ends only the member's, a prorated refund is
/// recorded with its percentage.
@Suite("Pipeline: revocation detail and family sharing", .timeLimit(.minutes(2)))
struct PipelineRevocationTests {
    typealias N = PipelineNotificationTests
    static let premium = "com.example.verifyworker.premium"

    static func notification(
        _ type: String, _ transaction: SimulatedTransaction, harness: PipelineHarness
    ) throws -> ReceiptJob {
        let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
        let signed = try SimulatedJWS.signTransaction(transaction, pki: harness.simulator.pki, nowMs: nowMs)
        let payload = try SimulatedJWS.sign(
            N.NotificationPayload(
                notificationType: type, notificationUUID: UUID().uuidString.lowercased(), signedDate: nowMs,
                data: N.NotificationData(bundleId: PipelineHarness.bundleID, signedTransactionInfo: signed)),
            pki: harness.simulator.pki)
        return ReceiptJob(
            jobID: "job-notification-" + UUID().uuidString.lowercased(), accountID: "apple-notification",
            proof: .notification(payload))
    }

    static func decide(_ job: ReceiptJob, harness: PipelineHarness) async throws -> Verdict {
        try await harness.submit([job])
        try await harness.verdicts.waitForVerdicts(of: [job.jobID])
        return try #require(harness.verdicts.byJob[job.jobID]?.first)
    }

    static func job(_ jws: String, account: String) -> ReceiptJob {
        ReceiptJob(
            jobID: "job-" + UUID().uuidString.lowercased(), accountID: account, proof: .signedTransaction(jws),
            bundleID: PipelineHarness.bundleID, submittedAt: Date())
    }

    @Test("a family member's purchase is granted to the member; REVOKE ends the member's access, not the purchaser's")
    func familyMember() async throws {
        try await PipelineHarness.with { harness in
            try harness.startWorker(0)
            try await harness.waitUntilAssigned()
            let minted = try harness.simulator.mint(
                MintRequest(
                    bundleId: PipelineHarness.bundleID, productId: Self.premium, format: .signedTransaction,
                    environment: .production))
            let purchase = Self.job(minted.receipt, account: "acct-purchaser")
            #expect(try await Self.decide(purchase, harness: harness).outcome == .granted)

            let member = try harness.simulator.shareWithFamily(transactionId: minted.transaction.transactionId)
            let memberJWS = try SimulatedJWS.signTransaction(
                member, pki: harness.simulator.pki, nowMs: Int64(Date().timeIntervalSince1970 * 1000))
            let granted = try await Self.decide(Self.job(memberJWS, account: "acct-member"), harness: harness)
            #expect(granted.outcome == .granted && granted.accountID == "acct-member")
            #expect(granted.transactions.first?.ownershipType == .familyShared)
            // Sent again by another account: a replay of the member's.
            let replay = try await Self.decide(Self.job(memberJWS, account: "acct-other"), harness: harness)
            #expect(replay.reason == .replayed)

            let revoked = try harness.simulator.revoke(transactionId: member.transactionId)
            let verdict = try await Self.decide(
                try Self.notification("REVOKE", revoked, harness: harness), harness: harness)
            #expect(verdict.accountID == "acct-member")
            #expect(verdict.reason == .revoked)
            #expect(verdict.transactions.first?.revocation?.type == .familyRevoke)

            let again = try await Self.decide(
                ReceiptJob(
                    jobID: "job-purchaser-again", accountID: "acct-purchaser", proof: purchase.proof,
                    bundleID: PipelineHarness.bundleID),
                harness: harness)
            #expect(again.outcome == .alreadyGranted, "the purchaser keeps access")
        }
    }

    @Test("a prorated refund: the owner's verdict is revoked, with REFUND_PRORATED and the percentage")
    func proratedRefund() async throws {
        try await PipelineHarness.with { harness in
            try harness.startWorker(0)
            try await harness.waitUntilAssigned()
            let (purchase, transactionID) = try harness.genuineJob(account: "acct-refund", format: .signedTransaction)
            #expect(try await Self.decide(purchase, harness: harness).outcome == .granted)
            let refunded = try #require(
                try harness.simulator.refund(transactionId: transactionID, percentage: 40_000))
            let verdict = try await Self.decide(
                try Self.notification("REFUND", refunded, harness: harness), harness: harness)
            #expect(verdict.accountID == "acct-refund" && verdict.reason == .revoked)
            let stated = try #require(verdict.transactions.first)
            #expect(stated.revocation == Revocation(type: .refundProrated, percentage: 40_000, reason: 0))
            #expect(stated.ownershipType == .purchased)
        }
    }
}
