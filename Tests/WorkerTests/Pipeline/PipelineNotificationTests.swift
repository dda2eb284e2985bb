import Foundation
import Messages
import Pipeline
import Testing

@testable import AppleSimulator

/// App Store Server Notifications V2 through the worker: verified locally, applied to the owner's entitlement.
@Suite("Pipeline notifications", .timeLimit(.minutes(2)))
struct PipelineNotificationTests {
    struct NotificationData: Encodable {
        var bundleId: String
        var environment = "Production"
        var signedTransactionInfo: String
    }

    struct NotificationPayload: Encodable {
        var notificationType: String
        var notificationUUID: String
        var signedDate: Int64
        var data: NotificationData
    }

    @Test("a REFUND notification revokes the owner's purchase, and the purchase is no longer granted")
    func refund() async throws {
        try await PipelineHarness.with { harness in
            try harness.startWorker(0)
            try await harness.waitUntilAssigned()
            let (purchase, transactionID) = try harness.genuineJob(account: "acct-refund", format: .signedTransaction)
            try await harness.submit([purchase])
            try await harness.verdicts.waitForVerdicts(of: [purchase.jobID])
            #expect(harness.verdicts.byJob[purchase.jobID]?.first?.outcome == .granted)

            // Apple refunds it and tells the backend, which forwards the notification as a job.
            let refunded = try #require(try harness.simulator.refund(transactionId: transactionID))
            let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
            let signedTransaction = try SimulatedJWS.signTransaction(refunded, pki: harness.simulator.pki, nowMs: nowMs)
            let notification = try SimulatedJWS.sign(
                NotificationPayload(
                    notificationType: "REFUND", notificationUUID: UUID().uuidString.lowercased(), signedDate: nowMs,
                    data: NotificationData(
                        bundleId: PipelineHarness.bundleID, signedTransactionInfo: signedTransaction)),
                pki: harness.simulator.pki)
            let job = ReceiptJob(
                jobID: "job-notification-refund", accountID: "apple-notification", proof: .notification(notification))
            try await harness.submit([job])
            try await harness.verdicts.waitForVerdicts(of: [job.jobID])
            let verdict = try #require(harness.verdicts.byJob[job.jobID]?.first)
            #expect(verdict.accountID == "acct-refund", "the verdict is for the owner of the transaction")
            #expect(verdict.outcome == .rejected)
            #expect(verdict.reason == .revoked)

            // The owner sending the purchase again is no longer "already granted".
            let again = ReceiptJob(jobID: "job-refund-again", accountID: "acct-refund", proof: purchase.proof)
            try await harness.submit([again])
            try await harness.verdicts.waitForVerdicts(of: [again.jobID])
            #expect(harness.verdicts.byJob[again.jobID]?.first?.outcome == .rejected)
            #expect(Harness.noAppleCalls(harness))
        }
    }

    @Test("REFUND then REFUND_REVERSED: the owner is revoked, then entitled again; a late REFUND changes nothing")
    func refundThenReversed() async throws {
        try await PipelineHarness.with { harness in
            try harness.startWorker(0)
            try await harness.waitUntilAssigned()
            let (purchase, transactionID) = try harness.genuineJob(account: "acct-reverse", format: .signedTransaction)
            try await harness.submit([purchase])
            try await harness.verdicts.waitForVerdicts(of: [purchase.jobID])
            #expect(harness.verdicts.byJob[purchase.jobID]?.first?.outcome == .granted)

            let refunded = try #require(try harness.simulator.refund(transactionId: transactionID))
            var reinstated = refunded
            reinstated.revocationDateMs = nil
            reinstated.revocationReason = nil
            let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
            func notification(_ type: String, _ transaction: SimulatedTransaction, signedMs: Int64) throws -> String {
                try SimulatedJWS.sign(
                    NotificationPayload(
                        notificationType: type, notificationUUID: UUID().uuidString.lowercased(), signedDate: signedMs,
                        data: NotificationData(
                            bundleId: PipelineHarness.bundleID,
                            signedTransactionInfo: try SimulatedJWS.signTransaction(
                                transaction, pki: harness.simulator.pki, nowMs: signedMs))),
                    pki: harness.simulator.pki)
            }
            let refundJob = ReceiptJob(
                jobID: "job-n-refund", accountID: "apple-notification",
                proof: .notification(try notification("REFUND", refunded, signedMs: nowMs)))
            try await harness.submit([refundJob])
            try await harness.verdicts.waitForVerdicts(of: [refundJob.jobID])
            #expect(harness.verdicts.byJob[refundJob.jobID]?.first?.reason == .revoked)

            let reverseJob = ReceiptJob(
                jobID: "job-n-reverse", accountID: "apple-notification",
                proof: .notification(try notification("REFUND_REVERSED", reinstated, signedMs: nowMs + 1000)))
            try await harness.submit([reverseJob])
            try await harness.verdicts.waitForVerdicts(of: [reverseJob.jobID])
            let reversed = try #require(harness.verdicts.byJob[reverseJob.jobID]?.first)
            #expect(reversed.accountID == "acct-reverse")
            #expect(reversed.outcome == .alreadyGranted)
            #expect(reversed.transactions.first?.revokedAt == nil)

            // Apple's retry of the REFUND, signed before the reversal, arrives last: answered from the ledger.
            let lateJob = ReceiptJob(
                jobID: "job-n-refund-retry", accountID: "apple-notification",
                proof: .notification(try notification("REFUND", refunded, signedMs: nowMs)))
            try await harness.submit([lateJob])
            try await harness.verdicts.waitForVerdicts(of: [lateJob.jobID])
            #expect(harness.verdicts.byJob[lateJob.jobID]?.first?.outcome == .alreadyGranted)

            // The owner's purchase is granted again: already_granted, not revoked.
            let again = ReceiptJob(jobID: "job-reverse-again", accountID: "acct-reverse", proof: purchase.proof)
            try await harness.submit([again])
            try await harness.verdicts.waitForVerdicts(of: [again.jobID])
            #expect(harness.verdicts.byJob[again.jobID]?.first?.outcome == .alreadyGranted)
            #expect(Harness.noAppleCalls(harness))
        }
    }

    enum Harness {
        /// JWS jobs and notifications never reach Apple.
        static func noAppleCalls(_ harness: PipelineHarness) -> Bool {
            harness.simulator.stats.snapshot().requests.filter { !$0.key.hasPrefix("sim/") }.isEmpty
        }
    }
}
