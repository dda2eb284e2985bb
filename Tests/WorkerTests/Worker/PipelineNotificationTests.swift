import Foundation
import Messages
import Testing
import Worker

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

    @Test("notifications about two purchases are decided in parallel lanes; those of one purchase keep their order")
    func lanesPerPurchase() async throws {
        try await PipelineHarness.with { harness in
            try harness.startWorker(0)
            try await harness.waitUntilAssigned()
            let (purchaseA, transactionA) = try harness.genuineJob(account: "acct-lane-a", format: .signedTransaction)
            let (purchaseB, transactionB) = try harness.genuineJob(account: "acct-lane-b", format: .signedTransaction)
            try await harness.submit([purchaseA, purchaseB])
            try await harness.verdicts.waitForVerdicts(of: [purchaseA.jobID, purchaseB.jobID])

            let refundedA = try #require(try harness.simulator.refund(transactionId: transactionA))
            var reinstatedA = refundedA
            reinstatedA.revocationDateMs = nil
            reinstatedA.revocationReason = nil
            let refundedB = try #require(try harness.simulator.refund(transactionId: transactionB))
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
            let refundA = try NotificationJob.job(
                signedPayload: try notification("REFUND", refundedA, signedMs: nowMs), submittedAt: Date())
            let reverseA = try NotificationJob.job(
                signedPayload: try notification("REFUND_REVERSED", reinstatedA, signedMs: nowMs + 1000),
                submittedAt: Date())
            let refundB = try NotificationJob.job(
                signedPayload: try notification("REFUND", refundedB, signedMs: nowMs), submittedAt: Date())
            #expect(refundA.messageKey == reverseA.messageKey, "one purchase, one key")
            #expect(refundA.messageKey != refundB.messageKey, "two purchases, two keys")

            // Purchase A's lane is held by a job that waits for Apple (every verifyReceipt answered 21005, retried)
            // until the faults are lifted; it is sent under A's key, so A's notifications queue behind it.
            var faults = FaultPlan()
            faults.status21005Ratio = 1
            harness.simulator.setFaults(faults)
            let blocker = try harness.genuineJob(account: "acct-lane-blocker").job
            try await harness.submitRaw(
                MessageCodec().encode(blocker), key: String(decoding: refundA.messageKey, as: UTF8.self))
            try await PipelineHarness.poll("the blocker asked Apple") {
                (harness.simulator.stats.snapshot().statuses["21005"] ?? 0) > 0
            }
            try await harness.submit([refundA, reverseA, refundB])

            // B's notification is decided while A's lane is still held: another lane.
            try await harness.verdicts.waitForVerdicts(of: [refundB.jobID])
            #expect(harness.verdicts.byJob[refundB.jobID]?.first?.reason == .revoked)
            let waiting = harness.verdicts.byJob
            #expect(waiting[blocker.jobID] == nil, "the blocker still waits for Apple")
            #expect(waiting[refundA.jobID] == nil, "A's notifications wait behind the job holding their lane")
            #expect(waiting[reverseA.jobID] == nil)

            harness.simulator.setFaults(FaultPlan())
            try await harness.verdicts.waitForVerdicts(
                of: [blocker.jobID, refundA.jobID, reverseA.jobID], timeout: .seconds(90))
            #expect(harness.verdicts.byJob[blocker.jobID]?.first?.outcome == .granted)
            // Both verdicts are the owner's (one verdict partition): read in the order they were decided.
            let order = harness.verdicts.verdicts.map(\.jobID)
            let refunded = try #require(order.firstIndex(of: refundA.jobID))
            let reversed = try #require(order.firstIndex(of: reverseA.jobID))
            #expect(refunded < reversed, "A's notifications are decided in the order they were sent")
            #expect(harness.verdicts.byJob[refundA.jobID]?.first?.reason == .revoked)
            #expect(harness.verdicts.byJob[reverseA.jobID]?.first?.outcome == .alreadyGranted)
            #expect(harness.verdicts.byJob[reverseA.jobID]?.first?.accountID == "acct-lane-a")
        }
    }

    enum Harness {
        /// JWS jobs and notifications never reach Apple.
        static func noAppleCalls(_ harness: PipelineHarness) -> Bool {
            harness.simulator.stats.snapshot().requests.filter { !$0.key.hasPrefix("sim/") }.isEmpty
        }
    }
}
