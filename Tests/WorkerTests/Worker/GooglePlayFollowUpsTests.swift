import Foundation
import Ledger
import Logging
import Messages
import RateLimiter
import StoreHTTP
import Synchronization
import Testing

@testable import GooglePlayClients
@testable import Worker

/// A Developer API that records each call and answers each purchase token from its script (accepted once the
/// script is spent).
final class ScriptedPlayCalls: GooglePlayPurchaseCalls {
    struct Made: Hashable {
        var action: GooglePlayFollowUpTarget.Action
        var packageName: String
        var productID: String
        var token: String
    }

    private let state:
        Mutex<
            (
                made: [Made], scripts: [String: [GooglePlayOutcome<GooglePlayAccepted>]],
                reviews: [GooglePlayRefundReview]
            )
        >

    init(_ scripts: [String: [GooglePlayOutcome<GooglePlayAccepted>]] = [:]) {
        state = Mutex(([], scripts, []))
    }

    var made: [Made] { state.withLock { $0.made } }

    private func answer(_ made: Made) -> GooglePlayOutcome<GooglePlayAccepted> {
        state.withLock {
            $0.made.append(made)
            guard var script = $0.scripts[made.token], !script.isEmpty else { return .answered(GooglePlayAccepted()) }
            let next = script.removeFirst()
            $0.scripts[made.token] = script
            return next
        }
    }

    func acknowledge(
        packageName: String, productID: String, token: String, subscription: Bool, deadline: ContinuousClock.Instant
    ) async -> GooglePlayOutcome<GooglePlayAccepted> {
        answer(
            Made(
                action: subscription ? .acknowledgeSubscription : .acknowledgeProduct, packageName: packageName,
                productID: productID, token: token))
    }

    func consume(
        packageName: String, productID: String, token: String, deadline: ContinuousClock.Instant
    ) async -> GooglePlayOutcome<GooglePlayAccepted> {
        answer(Made(action: .consume, packageName: packageName, productID: productID, token: token))
    }

    /// Tokens Google reads as done (acknowledged or consumed), and how often it was asked.
    private let done = Mutex<(tokens: Set<String>, asked: Int)>(([], 0))
    func markDone(_ token: String) { done.withLock { _ = $0.tokens.insert(token) } }
    var doneAsked: Int { done.withLock { $0.asked } }

    func isDone(
        packageName: String, token: String, subscription: Bool, consumed: Bool, deadline: ContinuousClock.Instant
    ) async -> Bool {
        done.withLock {
            $0.asked += 1
            return $0.tokens.contains(token)
        }
    }

    /// The refund reviews answered, with their bodies.
    var reviews: [GooglePlayRefundReview] { state.withLock { $0.reviews } }

    func reviewRefund(
        packageName: String, orderID: String, review: GooglePlayRefundReview, deadline: ContinuousClock.Instant
    ) async -> GooglePlayOutcome<GooglePlayAccepted> {
        state.withLock { $0.reviews.append(review) }
        return answer(
            Made(action: .reviewRefund, packageName: packageName, productID: orderID, token: review.pendingRefundToken))
    }
}

/// The ledger's "now", moved by the test.
final class TestNow: Sendable {
    private let value: Mutex<Date>
    init(_ start: Date) { value = Mutex(start) }
    var now: Date { value.withLock { $0 } }
    func advance(by seconds: TimeInterval) { value.withLock { $0 = $0.addingTimeInterval(seconds) } }
}

/// After a durable Google Play grant the purchase is acknowledged (or, a consumable, consumed) exactly once across
/// redeliveries and workers, retried until Google accepts, and never lost to a crash: Google refunds a purchase not
/// acknowledged within three days.
@Suite("Google Play follow-ups: one acknowledge or consume per granted purchase", .timeLimit(.minutes(2)))
struct GooglePlayFollowUpsTests {
    static let package = "com.example.app"
    static let start = Date(timeIntervalSince1970: 1_800_000_000)
    static let catalog = Catalog(playProducts: [
        .init(id: "com.example.app.coins", type: .consumable),
        .init(id: "com.example.app.unlock", type: .nonConsumable),
        .init(id: "com.example.app.premium", type: .autoRenewable, basePlans: ["monthly"]),
    ])

    static func followUps(
        _ ledger: any Ledger, _ calls: any GooglePlayPurchaseCalls, holder: String, now: TestNow,
        catalog: Catalog = catalog
    ) -> GooglePlayFollowUps {
        GooglePlayFollowUps(
            calls: calls, store: ledger,
            configuration: GooglePlayFollowUpsConfiguration(
                catalog: catalog, holder: holder, claimLease: .seconds(300), retryDelay: .seconds(60),
                sweepInterval: .seconds(3600), claimRetryBackoff: .milliseconds(1) ... .milliseconds(5)),
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }), now: { now.now })
    }

    static func job(_ id: String, product: String, token: String) -> ReceiptJob {
        ReceiptJob(
            jobID: id, accountID: "acct-\(id)",
            proof: .googlePlay(GooglePlayPurchase(packageName: package, productID: product, purchaseToken: token)))
    }

    static func verdict(
        _ job: ReceiptJob, _ outcome: Verdict.Outcome = .granted, reason: Verdict.Reason? = nil,
        subscriptionToken: String? = nil
    ) -> Verdict {
        guard case .googlePlay(let purchase) = job.proof else {
            return Verdict(job: job, outcome: outcome, reason: reason, decidedBy: .apple, decidedAt: start)
        }
        return Verdict(
            job: job, outcome: outcome, reason: reason, decidedBy: .apple,
            transactions: [
                .init(
                    transactionID: subscriptionToken ?? "GPA.1234-5678-9012-34567", productID: purchase.productID,
                    orderID: "GPA.1234-5678-9012-34567", purchaseToken: subscriptionToken)
            ], decidedAt: start)
    }

    /// Lets `followUps` make what it queued: its queue ends, and ``GooglePlayFollowUps/run()`` returns once the
    /// queued calls are made.
    static func drain(_ followUps: GooglePlayFollowUps...) async {
        for followUp in followUps { followUp.finish() }
        await withDiscardingTaskGroup { group in
            for followUp in followUps { group.addTask { await followUp.run() } }
        }
    }

    @Test(
        "one acknowledge per purchase token across redeliveries, two workers and a subscription's renewal",
        arguments: LedgerBackend.allCases)
    func oncePerToken(backend: LedgerBackend) async throws {
        try await LedgerTestSupport.withLedger(backend) { ledger, _ in
            let calls = ScriptedPlayCalls()
            let now = TestNow(Self.start)
            let first = Self.followUps(ledger, calls, holder: "worker-a", now: now)
            let second = Self.followUps(ledger, calls, holder: "worker-b", now: now)
            let unlock = Self.job("unlock-1", product: "com.example.app.unlock", token: "token-unlock")
            let subscription = Self.job("premium-1", product: "com.example.app.premium", token: "token-premium")
            // The renewal is another job for the same purchase token: no second acknowledge.
            let renewal = Self.job("premium-2", product: "com.example.app.premium", token: "token-premium")
            let deliveries: [(GooglePlayFollowUps, Verdict, ReceiptJob)] = [
                (first, Self.verdict(unlock), unlock), (second, Self.verdict(unlock), unlock),
                (first, Self.verdict(unlock), unlock),
                (first, Self.verdict(subscription, subscriptionToken: "token-premium"), subscription),
                (second, Self.verdict(subscription, subscriptionToken: "token-premium"), subscription),
                (second, Self.verdict(renewal, subscriptionToken: "token-premium"), renewal),
            ]
            let recorded = await withTaskGroup(of: Bool.self) { group in
                for (followUps, verdict, job) in deliveries {
                    group.addTask { await followUps.verdictDelivered(verdict, job: job) }
                }
                return await group.reduce(into: [Bool]()) { $0.append($1) }
            }
            #expect(recorded == Array(repeating: true, count: deliveries.count))
            await Self.drain(first, second)

            #expect(
                calls.made.sorted { $0.token < $1.token } == [
                    .init(
                        action: .acknowledgeSubscription, packageName: Self.package,
                        productID: "com.example.app.premium", token: "token-premium"),
                    .init(
                        action: .acknowledgeProduct, packageName: Self.package, productID: "com.example.app.unlock",
                        token: "token-unlock"),
                ])
            for token in ["token-unlock", "token-premium"] {
                let record = try #require(try await ledger.followUpRecord(kind: .playAcknowledge, key: token))
                #expect(record.state == .sent)
                #expect(record.call.attempts == 1)
            }
            #expect(try await ledger.followUpRecord(kind: .playConsume, key: "token-unlock") == nil)
        }
    }

    /// Google takes the call, and the worker is told to stop as the answer comes back.
    final class StoppedAsAnswered: GooglePlayPurchaseCalls {
        func acknowledge(
            packageName: String, productID: String, token: String, subscription: Bool,
            deadline: ContinuousClock.Instant
        ) async -> GooglePlayOutcome<GooglePlayAccepted> {
            withUnsafeCurrentTask { $0?.cancel() }
            return .answered(GooglePlayAccepted())
        }

        func consume(
            packageName: String, productID: String, token: String, deadline: ContinuousClock.Instant
        ) async -> GooglePlayOutcome<GooglePlayAccepted> {
            await acknowledge(
                packageName: packageName, productID: productID, token: token, subscription: false,
                deadline: deadline)
        }

        func reviewRefund(
            packageName: String, orderID: String, review: GooglePlayRefundReview, deadline: ContinuousClock.Instant
        ) async -> GooglePlayOutcome<GooglePlayAccepted> {
            await consume(
                packageName: packageName, productID: orderID, token: review.pendingRefundToken, deadline: deadline)
        }
    }

    @Test("a call Google took is recorded sent even when the worker stops as its answer comes: no second call")
    func acceptedWhileStopping() async throws {
        try await LedgerTestSupport.withLedger(.sqlite) { ledger, _ in
            let followUps = Self.followUps(ledger, StoppedAsAnswered(), holder: "worker-a", now: TestNow(Self.start))
            let unlock = Self.job("unlock-1", product: "com.example.app.unlock", token: "token-unlock")
            #expect(await followUps.verdictDelivered(Self.verdict(unlock), job: unlock))
            await Self.drain(followUps)
            let record = try await ledger.followUpRecord(kind: .playAcknowledge, key: "token-unlock")
            #expect(record?.state == .sent)
        }
    }

    @Test("a consumable is consumed, which acknowledges it: no separate acknowledge")
    func consumable() async throws {
        try await LedgerTestSupport.withLedger(.sqlite) { ledger, _ in
            let calls = ScriptedPlayCalls()
            let followUps = Self.followUps(ledger, calls, holder: "worker-a", now: TestNow(Self.start))
            let coins = Self.job("coins-1", product: "com.example.app.coins", token: "token-coins")
            #expect(await followUps.verdictDelivered(Self.verdict(coins), job: coins))
            #expect(await followUps.verdictDelivered(Self.verdict(coins), job: coins))
            await Self.drain(followUps)
            #expect(
                calls.made == [
                    .init(
                        action: .consume, packageName: Self.package, productID: "com.example.app.coins",
                        token: "token-coins")
                ])
            let consumed = try await ledger.followUpRecord(kind: .playConsume, key: "token-coins")
            #expect(consumed?.state == .sent)
            #expect(try await ledger.followUpRecord(kind: .playAcknowledge, key: "token-coins") == nil)
        }
    }

    @Test("a retryable failure and a refused service account are put back and retried by a sweep until accepted")
    func retriedUntilAccepted() async throws {
        try await LedgerTestSupport.withLedger(.sqlite) { ledger, _ in
            let calls = ScriptedPlayCalls([
                "token-unlock": [
                    .retryable(GooglePlayRetryAdvice(reason: .httpStatus(503))),
                    .configurationRefused(
                        GooglePlayAPIError(code: .accessDenied, httpStatus: 403, detail: "the account may not act")),
                    .retryable(GooglePlayRetryAdvice(reason: .httpStatus(429), retryAfter: .seconds(600))),
                ]
            ])
            let now = TestNow(Self.start)
            let followUps = Self.followUps(ledger, calls, holder: "worker-a", now: now)
            let unlock = Self.job("unlock-1", product: "com.example.app.unlock", token: "token-unlock")
            #expect(await followUps.verdictDelivered(Self.verdict(unlock), job: unlock))
            await Self.drain(followUps)
            var record = try #require(try await ledger.followUpRecord(kind: .playAcknowledge, key: "token-unlock"))
            #expect(record.state == .pending && record.holder == nil)
            #expect(record.dueAt == Self.start.addingTimeInterval(60))
            #expect(record.detail?.contains("503") == true)

            // Not due yet: nothing is called.
            now.advance(by: 30)
            await followUps.sweep()
            #expect(calls.made.count == 1)
            // Due: the refused service account puts it back again, never marks it failed.
            now.advance(by: 30)
            await followUps.sweep()
            record = try #require(try await ledger.followUpRecord(kind: .playAcknowledge, key: "token-unlock"))
            #expect(calls.made.count == 2)
            #expect(record.state == .pending)
            #expect(record.detail?.contains("403") == true)
            // Google's Retry-After, longer than the retry delay, is honoured.
            now.advance(by: 60)
            await followUps.sweep()
            record = try #require(try await ledger.followUpRecord(kind: .playAcknowledge, key: "token-unlock"))
            #expect(record.dueAt == now.now.addingTimeInterval(600))
            now.advance(by: 600)
            await followUps.sweep()
            record = try #require(try await ledger.followUpRecord(kind: .playAcknowledge, key: "token-unlock"))
            #expect(calls.made.count == 4)
            #expect(record.state == .sent && record.call.attempts == 4)
            #expect(Set(calls.made.map(\.token)) == ["token-unlock"])
        }
    }

    @Test("a purchase Google no longer knows (404, 410) or refuses (400) is marked failed with the reason")
    func definitiveAnswersFail() async throws {
        try await LedgerTestSupport.withLedger(.sqlite) { ledger, _ in
            let calls = ScriptedPlayCalls([
                "token-gone": [.purchaseNotFound(status: 404)], "token-expired": [.purchaseNotFound(status: 410)],
                "token-refunded": [
                    .rejected(
                        GooglePlayAPIError(
                            code: .badRequest, httpStatus: 400, googleStatus: "FAILED_PRECONDITION",
                            detail: "The purchase is not in a valid state"))
                ],
            ])
            let now = TestNow(Self.start)
            let followUps = Self.followUps(ledger, calls, holder: "worker-a", now: now)
            let tokens = ["token-gone", "token-expired", "token-refunded"]
            for (index, token) in tokens.enumerated() {
                let job = Self.job("unlock-\(index)", product: "com.example.app.unlock", token: token)
                #expect(await followUps.verdictDelivered(Self.verdict(job), job: job))
            }
            await Self.drain(followUps)
            let details = try await tokens.asyncMap { token in
                let record = try #require(try await ledger.followUpRecord(kind: .playAcknowledge, key: token))
                #expect(record.state == .failed)
                return record.detail ?? ""
            }
            #expect(details[0] == "no such purchase (HTTP 404)")
            #expect(details[1] == "no such purchase (HTTP 410)")
            #expect(details[2] == "bad request (HTTP 400) (FAILED_PRECONDITION)")
            // Failed records are final: a later sweep calls nothing more.
            now.advance(by: 3600)
            await followUps.sweep()
            #expect(calls.made.count == 3)
        }
    }

    @Test("a holder that crashed after its claim is swept by another worker once the lease has passed")
    func crashedHolderSwept() async throws {
        try await LedgerTestSupport.withLedger(.sqlite) { ledger, _ in
            let now = TestNow(Self.start)
            let deadCalls = ScriptedPlayCalls()
            let dying = Self.followUps(ledger, deadCalls, holder: "worker-a", now: now)
            let subscription = Self.job("premium-1", product: "com.example.app.premium", token: "token-premium")
            let verdict = Self.verdict(subscription, subscriptionToken: "token-premium")
            // Claimed on the job's path; the worker dies before its background part makes the call.
            #expect(await dying.verdictDelivered(verdict, job: subscription))
            let claimed = try #require(try await ledger.followUpRecord(kind: .playAcknowledge, key: "token-premium"))
            #expect(claimed.state == .pending && claimed.holder == "worker-a")

            let calls = ScriptedPlayCalls()
            let survivor = Self.followUps(ledger, calls, holder: "worker-b", now: now)
            // The redelivered job finds the claim and leaves it to its holder.
            #expect(await survivor.verdictDelivered(verdict, job: subscription))
            now.advance(by: 299)
            await survivor.sweep()
            #expect(calls.made.isEmpty)
            now.advance(by: 2)
            await survivor.sweep()
            #expect(
                calls.made == [
                    .init(
                        action: .acknowledgeSubscription, packageName: Self.package,
                        productID: "com.example.app.premium", token: "token-premium")
                ])
            #expect(try await ledger.followUpRecord(kind: .playAcknowledge, key: "token-premium")?.state == .sent)
            #expect(deadCalls.made.isEmpty)
            await Self.drain(survivor)
            #expect(calls.made.count == 1)
        }
    }

    @Test("a holder that reached Google and died before recording it: the sweep reads Google's state, no second call")
    func diedAfterGoogleAnswered() async throws {
        try await LedgerTestSupport.withLedger(.sqlite) { ledger, _ in
            let now = TestNow(Self.start)
            let dying = Self.followUps(ledger, ScriptedPlayCalls(), holder: "worker-a", now: now)
            let coins = Self.job("coins-1", product: "com.example.app.coins", token: "token-coins")
            let unlock = Self.job("unlock-1", product: "com.example.app.unlock", token: "token-unlock")
            #expect(await dying.verdictDelivered(Self.verdict(coins), job: coins))
            #expect(await dying.verdictDelivered(Self.verdict(unlock), job: unlock))
            // Google took the consume (its state says consumed); the holder died before its record said so. The
            // acknowledge never reached Google.
            let calls = ScriptedPlayCalls()
            calls.markDone("token-coins")
            now.advance(by: 301)
            let survivor = Self.followUps(ledger, calls, holder: "worker-b", now: now)
            await survivor.sweep()
            #expect(calls.made.map(\.token) == ["token-unlock"])
            #expect(calls.doneAsked == 2)
            let consumed = try await ledger.followUpRecord(kind: .playConsume, key: "token-coins")
            #expect(consumed?.state == .sent)
            #expect(consumed?.detail == "already done at Google")
            let acknowledged = try await ledger.followUpRecord(kind: .playAcknowledge, key: "token-unlock")
            #expect(acknowledged?.state == .sent)
            // A first claim asks Google nothing before calling.
            let fresh = ScriptedPlayCalls()
            let other = Self.followUps(ledger, fresh, holder: "worker-c", now: now)
            let premium = Self.job("premium-9", product: "com.example.app.premium", token: "token-premium-9")
            #expect(
                await other.verdictDelivered(Self.verdict(premium, subscriptionToken: "token-premium-9"), job: premium))
            await Self.drain(other)
            #expect(fresh.doneAsked == 0)
            #expect(fresh.made.count == 1)
        }
    }

    @Test("a call is neither made nor retried past the end of its claim, when another worker's sweep may take it")
    func callEndsWithItsClaim() async throws {
        try await LedgerTestSupport.withLedger(.sqlite) { ledger, _ in
            let calls = ScriptedPlayCalls()
            let followUps = GooglePlayFollowUps(
                calls: calls, store: ledger,
                configuration: GooglePlayFollowUpsConfiguration(
                    catalog: Self.catalog, holder: "worker-a", claimLease: .seconds(15), retryDelay: .seconds(60),
                    sweepInterval: .seconds(3600), claimRetryBackoff: .milliseconds(1) ... .milliseconds(5)),
                logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }), now: { Self.start })
            var target = GooglePlayFollowUpTarget(
                packageName: Self.package, productID: "com.example.app.unlock", token: "token-late",
                action: .acknowledgeProduct)
            // Unclaimed (a test's own call): the call's own deadline, 60 s.
            let before = ContinuousClock.now
            let free = try #require(followUps.callDeadline(for: target))
            #expect(free >= before.advanced(by: .seconds(60)))
            // A claim of 15 s: the call ends 3 s (a fifth of the lease) before the claim does.
            target.claimEnds = ContinuousClock.now.advanced(by: .seconds(15))
            let bounded = try #require(followUps.callDeadline(for: target))
            #expect(bounded == target.claimEnds!.advanced(by: .seconds(-3)))
            // Less than that left: no call at all; the record is left to the next sweep.
            target.claimEnds = ContinuousClock.now.advanced(by: .seconds(3))
            #expect(followUps.callDeadline(for: target) == nil)
            await followUps.make(target)
            #expect(calls.made.isEmpty)
        }
    }

    @Test("the gauge: the age of the oldest purchase not yet acknowledged, from the ledger; 0 when none")
    func oldestUnacknowledged() async throws {
        try await LedgerTestSupport.withLedger(.sqlite) { ledger, _ in
            let now = TestNow(Self.start)
            let calls = ScriptedPlayCalls([
                "token-older": [.retryable(GooglePlayRetryAdvice(reason: .httpStatus(503)))]
            ])
            let followUps = Self.followUps(ledger, calls, holder: "worker-a", now: now)
            #expect(await followUps.refreshOldestUnacknowledged() == 0)
            let older = Self.job("unlock-1", product: "com.example.app.unlock", token: "token-older")
            #expect(await followUps.verdictDelivered(Self.verdict(older), job: older))
            now.advance(by: 600)
            let newer = Self.job("coins-1", product: "com.example.app.coins", token: "token-newer")
            #expect(await followUps.verdictDelivered(Self.verdict(newer), job: newer))
            // Another worker, restarted an hour later, reads the same age from the ledger.
            now.advance(by: 3000)
            let restarted = Self.followUps(ledger, ScriptedPlayCalls(), holder: "worker-b", now: now)
            #expect(await restarted.refreshOldestUnacknowledged() == 3600)
            // The older is put back (503), the newer consumed: the older still counts.
            await Self.drain(followUps)
            #expect(await restarted.refreshOldestUnacknowledged() == 3600)
            now.advance(by: 60)
            await restarted.sweep()
            let acknowledged = try await ledger.followUpRecord(kind: .playAcknowledge, key: "token-older")
            #expect(acknowledged?.state == .sent)
            #expect(await restarted.refreshOldestUnacknowledged() == 0)
        }
    }

    @Test("verdicts that grant nothing, and the App Store's, ask Google for nothing")
    func otherVerdictsIgnored() async throws {
        try await LedgerTestSupport.withLedger(.sqlite) { ledger, _ in
            let calls = ScriptedPlayCalls()
            let followUps = Self.followUps(ledger, calls, holder: "worker-a", now: TestNow(Self.start))
            let play = Self.job("unlock-1", product: "com.example.app.unlock", token: "token-unlock")
            let appStore = ReceiptJob(jobID: "apple-1", accountID: "acct", proof: .transactionID("2000000000000001"))
            let ignored: [(Verdict, ReceiptJob)] = [
                (Self.verdict(play, .rejected, reason: .revoked), play),
                (Self.verdict(play, .unverifiable, reason: Verdict.Reason("store_unavailable")), play),
                (Self.verdict(appStore), appStore),
            ]
            for (verdict, job) in ignored {
                #expect(await followUps.verdictDelivered(verdict, job: job))
            }
            // Through the worker loop's one closure too: an App Store verdict with no App Store follow-ups.
            let afterDelivery = try #require(VerdictFollowUps.afterDelivery(appStore: nil, googlePlay: followUps))
            #expect(await afterDelivery(Self.verdict(appStore), appStore))
            #expect(VerdictFollowUps.afterDelivery(appStore: nil, googlePlay: nil) == nil)
            await Self.drain(followUps)
            #expect(calls.made.isEmpty)
            #expect(try await ledger.followUpRecord(kind: .playAcknowledge, key: "token-unlock") == nil)
            #expect(try await ledger.oldestPendingFollowUp(kinds: [.playAcknowledge, .playConsume]) == nil)
        }
    }

    @Test(
        "the worker loop's one closure hands a Play job's verdict to Google Play's follow-ups only, others to Apple's")
    func routedByStore() async throws {
        try await LedgerTestSupport.withLedger(.sqlite) { ledger, _ in
            let calls = ScriptedPlayCalls()
            let play = Self.followUps(ledger, calls, holder: "worker-a", now: TestNow(Self.start))
            // Finish Transaction on: Apple's part claims a call for each granted transaction it is handed.
            let apple = try FollowUpDurabilityTests.followUps(
                base: "http://127.0.0.1:9", ledger: ledger, holder: "worker-a", now: { Self.start })
            let afterDelivery = try #require(VerdictFollowUps.afterDelivery(appStore: apple, googlePlay: play))
            let unlock = Self.job("unlock-1", product: "com.example.app.unlock", token: "token-unlock")
            let appStore = ReceiptJob(jobID: "apple-1", accountID: "acct", proof: .transactionID("2000000000000001"))
            let appStoreVerdict = Verdict(
                job: appStore, outcome: .granted, decidedBy: .apple,
                transactions: [.init(transactionID: "2000000000000001", productID: "com.example.premium")],
                decidedAt: Self.start)
            #expect(await afterDelivery(Self.verdict(unlock), unlock))
            #expect(await afterDelivery(appStoreVerdict, appStore))
            let acknowledge = try await ledger.followUpRecord(kind: .playAcknowledge, key: "token-unlock")
            #expect(acknowledge?.state == .pending)
            let finish = try await ledger.followUpRecord(kind: .finishTransaction, key: "2000000000000001")
            #expect(finish?.state == .pending)
            // Apple's part never saw the Play grant: no Finish Transaction for Google's order id.
            let playFinish = try await ledger.followUpRecord(kind: .finishTransaction, key: "GPA.1234-5678-9012-34567")
            #expect(playFinish == nil)
            #expect(try await ledger.followUpRecord(kind: .playAcknowledge, key: "2000000000000001") == nil)
            await Self.drain(play)
            #expect(calls.made.map(\.token) == ["token-unlock"])
        }
    }

    @Test("a record's call reads back as written; a record of another shape is not a call")
    func recordRoundTrip() {
        for action in [GooglePlayFollowUpTarget.Action.consume, .acknowledgeProduct, .acknowledgeSubscription] {
            let target = GooglePlayFollowUpTarget(
                packageName: Self.package, productID: "com.example.app.x", token: "a.b_c-d", action: action)
            let read = GooglePlayFollowUpTarget(call: target.call)
            #expect(read?.call == target.call)
            #expect(read?.action == action && read?.productID == target.productID && read?.token == target.token)
            // Read back from the ledger: claimed before, so Google's state is asked before calling again.
            #expect(read?.claimedBefore == true)
        }
        let finish = FollowUpRecord.Call(
            kind: .finishTransaction, key: "1", transactionID: "1", environment: "Production")
        #expect(GooglePlayFollowUpTarget(call: finish) == nil)
        let consumeSubscription = FollowUpRecord.Call(
            kind: .playConsume, key: "t", transactionID: "t", environment: "com.example.app/subscriptions/p")
        #expect(GooglePlayFollowUpTarget(call: consumeSubscription) == nil)
    }
}

extension Array {
    fileprivate func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}
