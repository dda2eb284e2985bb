import Decision
import Foundation
import Ledger
import Logging
import Messages
import Testing
import Worker

/// The job flow hands a Play purchase to Google Play, never to the App Store; a Play purchase given to the App Store
/// directly is read as no proof of its own: rejected from the proof alone, never granted, never sent to Apple.
@Suite("App Store: another store's proof", .timeLimit(.minutes(2)))
struct AppStoreOtherStoreProofTests {
    @Test(
        "a Google Play job given to the App Store is rejected malformed by the prefilter, without Apple or the ledger")
    func playProofRejected() async throws {
        try await JobProcessorTests.withProcessor { routed, ledger in
            // The App Store alone behind the boundary, as if the flow had handed it the job.
            let stores = try #require(routed.store as? PurchaseStores)
            let processor = JobProcessor(
                store: stores.appStore, ledger: ledger, configuration: routed.configuration, health: WorkerHealth(),
                logger: Logger(label: "other-store"))
            let purchases = [
                GooglePlayPurchase(
                    packageName: "com.example.verifyworker", productID: "com.example.coins", purchaseToken: "tok.en-1"),
                GooglePlayPurchase(
                    packageName: "com.example.verifyworker", productID: "com.example.coins", purchaseToken: "tok.en-2",
                    purchaseData: "{\"purchaseToken\":\"tok.en-2\"}", signature: "c2ln"),
            ]
            for (index, purchase) in purchases.enumerated() {
                let job = ReceiptJob(jobID: "play-\(index)", accountID: "acct-1", proof: .googlePlay(purchase))
                let recordedAt = Date(timeIntervalSince1970: 1_790_000_000)
                let decided = try await processor.decide(job, recordedAt: recordedAt)
                #expect(decided.verdict.outcome == .rejected)
                #expect(decided.verdict.reason == .malformed)
                #expect(decided.verdict.decidedBy == .prefilter)
                #expect(decided.verdict.store == .googlePlay)
                #expect(decided.verdict.verdictID == Verdict.verdictID(for: job))
                #expect(!decided.askedStore)
                let snapshot = try await ledger.snapshot(
                    jobID: job.jobID, transactionIDs: [], originalTransactionIDs: [])
                #expect(snapshot.priorVerdict == nil)
            }
        }
    }
}
