import Foundation
import Messages
import Testing
import Worker

/// A Google Play notification job reaches the Google Play store and, until notifications are decided there, is
/// answered unverifiable: nothing granted or taken from a notification that was not read.
@Suite("Pipeline: Google Play notification jobs routed to Google Play", .timeLimit(.minutes(2)))
struct GooglePlayNotificationRoutingTests {
    @Test("a google_play_notification job goes to Google Play and is answered unverifiable")
    func routedAndUnverifiable() async throws {
        try await GooglePlayStoreTests.withProcessor { processor, _ in
            let packageName = try #require(GooglePlayStoreTests.catalog.playApps.first?.packageName)
            let job = GooglePlayNotificationJob.job(
                packageName: packageName, purchaseToken: "tok-1",
                notification:
                    #"{"version":"1.0","packageName":"\#(packageName)","subscriptionNotification":{"notificationType":2,"purchaseToken":"tok-1"}}"#,
                messageID: "1", submittedAt: Date(timeIntervalSince1970: 1_790_000_000))
            let stores = try #require(processor.store as? PurchaseStores)
            #expect(stores.store(of: job) is GooglePlayStore)
            let decided = try await processor.decide(job, recordedAt: Date(timeIntervalSince1970: 1_790_000_000))
            #expect(decided.verdict.outcome == .unverifiable)
            #expect(decided.verdict.store == .googlePlay)
        }
    }
}
