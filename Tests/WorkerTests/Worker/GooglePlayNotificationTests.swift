import AppleClients
import Decision
import Foundation
import GooglePlayClients
import Ledger
import Logging
import Messages
import RateLimiter
import Receipts
import StoreHTTP
import Synchronization
import Testing

@testable import Worker

/// Google Play notification jobs through the job flow (docs/LEDGER.md, "Google Play notifications"): each one reads
/// the purchase again (a scripted Developer API), through the verification's single flight, and the ledger (SQLite
/// and PostgreSQL) takes Google's answer for the token's owner, never going back to an older read.
@Suite("Google Play notifications: every notification acted on", .timeLimit(.minutes(3)))
struct GooglePlayNotificationTests {
    static let package = "com.example.play"
    static let gold = "gold_monthly"
    static let premium = "premium_unlock"
    static let catalog = Catalog(
        playApps: [.init(packageName: package, licensingKeyFile: "/dev/null", serviceAccountKeyFile: "/dev/null")],
        playProducts: [
            .init(id: gold, type: .autoRenewable, basePlans: ["monthly"]), .init(id: premium, type: .nonConsumable),
        ])

    /// Google's answers, scripted per token (the JSON of `subscriptionsv2.get` or `productsv2`), and the reads made.
    final class ScriptedGoogle: GooglePlayPurchaseReads, Sendable {
        private let state = Mutex<(answers: [String: String], reads: [String: Int])>(([:], [:]))
        /// While set, every read waits for it (the single-flight test holds the read open).
        let gate = Mutex<CheckedContinuation<Void, Never>?>(nil)
        let holding = Atomic<Bool>(false)

        func set(_ token: String, _ json: String) { state.withLock { $0.answers[token] = json } }
        func reads(_ token: String) -> Int { state.withLock { $0.reads[token, default: 0] } }

        private func answer<T: Decodable>(_ token: String) async -> GooglePlayOutcome<T> {
            if holding.load(ordering: .acquiring) {
                await withCheckedContinuation { continuation in gate.withLock { $0 = continuation } }
            }
            let json = state.withLock { state -> String? in
                state.reads[token, default: 0] += 1
                return state.answers[token]
            }
            // No answer scripted (or a fixture Google would never send): Google's 404.
            guard let json, let answer = try? JSONDecoder().decode(T.self, from: Data(json.utf8)) else {
                return .purchaseNotFound(status: 404)
            }
            return .answered(answer)
        }

        func release() {
            holding.store(false, ordering: .releasing)
            gate.withLock {
                $0?.resume(); $0 = nil
            }
        }

        func subscription(
            packageName: String, token: String, deadline: ContinuousClock.Instant?
        ) async -> GooglePlayOutcome<GooglePlaySubscriptionPurchase> { await answer(token) }

        func product(
            packageName: String, token: String, deadline: ContinuousClock.Instant?
        ) async -> GooglePlayOutcome<GooglePlayProductPurchase> { await answer(token) }
    }

    /// The time the store says it read Google at (the stale-read test moves it back).
    final class ReadClock: Sendable {
        let offset = Mutex<TimeInterval>(0)
        func now() -> Date { Date().addingTimeInterval(offset.withLock { $0 }) }
    }

    struct Harness: Sendable {
        let google: ScriptedGoogle
        let store: GooglePlayStore
        let processor: JobProcessor
        let ledger: any Ledger
        let clock: ReadClock

        func decide(_ job: ReceiptJob) async throws -> Verdict { try await processor.decide(job).verdict }

        /// A verification job (the app sending its purchase).
        func verify(_ id: String, account: String, product: String = gold, token: String) async throws -> Verdict {
            try await decide(
                ReceiptJob(
                    jobID: id, accountID: account,
                    proof: .googlePlay(
                        GooglePlayPurchase(packageName: package, productID: product, purchaseToken: token))))
        }

        /// A Pub/Sub notification job about `token`.
        func notify(_ messageID: String, token: String?, _ notification: String?) async throws -> Verdict {
            try await decide(
                GooglePlayNotificationJob.job(
                    packageName: package, purchaseToken: token, notification: notification, messageID: messageID,
                    submittedAt: Date()))
        }
    }

    static func withHarness(
        _ backend: LedgerBackend, _ body: @Sendable (Harness) async throws -> Void
    ) async throws {
        let engine = try CurlHTTPEngine()
        defer { engine.shutdown() }
        let logger = Logger(label: "google-play-notification-test")
        try await LedgerTestSupport.withLedger(backend) { ledger, _ in
            let google = ScriptedGoogle()
            let clock = ReadClock()
            // No test here is about the deadline: it is long enough that a machine stalled for a minute does not turn
            // a job unverifiable.
            let jobDeadline = Duration.seconds(600)
            let store = GooglePlayStore(
                clients: [package: google], subscriptionProducts: [gold], jobDeadline: jobDeadline, logger: logger,
                now: { clock.now() }, purchaseClaims: ledger)
            let processor = JobProcessor(
                analyzer: ReceiptAnalyzer(), ledger: ledger,
                apple: AppleCaller(
                    gate: AppleCallGate(clock: ContinuousClock()), retryPolicy: RetryPolicy(maximumAttempts: 1),
                    logger: logger),
                verifyReceipt: VerifyReceiptClient(
                    transport: engine, configuration: .endpoints(base: "http://127.0.0.1:9"), logger: logger),
                serverAPI: nil,
                configuration: JobProcessor.Configuration(
                    catalog: catalog, allowSandbox: false, jobDeadline: jobDeadline),
                health: WorkerHealth(), logger: logger, googlePlay: store)
            try await body(
                Harness(google: google, store: store, processor: processor, ledger: ledger, clock: clock))
        }
    }

    // MARK: Google's answers and notifications

    static func time(_ date: Date) -> String { RFC3339.format(date) }
    static func days(_ n: Double) -> Date { Date().addingTimeInterval(n * 86_400) }

    static func subscription(
        _ state: String, order: String, expires: Date, linked: String? = nil, autoRenew: Bool = true
    ) -> String {
        let link = linked.map { #","linkedPurchaseToken":"\#($0)""# } ?? ""
        return """
            {"subscriptionState":"SUBSCRIPTION_STATE_\(state)","startTime":"\(time(days(-40)))"\(link),\
            "lineItems":[{"productId":"\(gold)","expiryTime":"\(time(expires))","latestSuccessfulOrderId":"\(order)",\
            "autoRenewingPlan":{"autoRenewEnabled":\(autoRenew)}}]}
            """
    }

    static func product(_ state: String, order: String) -> String {
        """
        {"productLineItem":[{"productId":"\(premium)","productOfferDetails":{"quantity":1}}],\
        "purchaseStateContext":{"purchaseState":"\(state)"},"orderId":"\(order)",\
        "purchaseCompletionTime":"\(time(days(-1)))"}
        """
    }

    static func developerNotification(_ body: String, eventTime: Date = Date()) -> String {
        let millis = Int64(eventTime.timeIntervalSince1970 * 1000)
        return #"{"version":"1.0","packageName":"\#(package)","eventTimeMillis":"\#(millis)",\#(body)}"#
    }

    static func subscriptionNotification(_ type: Int, token: String, eventTime: Date = Date()) -> String {
        developerNotification(
            #""subscriptionNotification":{"version":"1.0","notificationType":\#(type),"purchaseToken":"\#(token)"}"#,
            eventTime: eventTime)
    }

    static func oneTimeNotification(_ type: Int, token: String) -> String {
        developerNotification(
            #""oneTimeProductNotification":{"version":"1.0","notificationType":\#(type),"purchaseToken":"\#(token)","sku":"\#(premium)"}"#
        )
    }

    // MARK: Transitions

    @Test(
        "renewed, grace period, on hold, paused, recovered, cancelled and revoked: each re-reads Google and moves the owner's entitlement",
        arguments: LedgerBackend.allCases)
    func subscriptionLifecycle(backend: LedgerBackend) async throws {
        try await Self.withHarness(backend) { play in
            let token = "tok-life"
            play.google.set(token, Self.subscription("ACTIVE", order: "GPA.1", expires: Self.days(5)))
            #expect(try await play.verify("buy", account: "acct-A", token: token).outcome == .granted)

            // RENEWED: a new order, claimed for the owner; the verdict is the owner's.
            play.google.set(token, Self.subscription("ACTIVE", order: "GPA.1..0", expires: Self.days(35)))
            let renewed = try await play.notify("m-1", token: token, Self.subscriptionNotification(2, token: token))
            #expect(renewed.outcome == .granted)
            #expect(renewed.accountID == "acct-A")
            #expect(renewed.store == .googlePlay)
            #expect(renewed.transactions.first?.orderID == "GPA.1..0")
            #expect(
                try await play.ledger.claims(ownedBy: "acct-A").map(\.transactionID).sorted() == ["GPA.1", "GPA.1..0"])

            // IN_GRACE_PERIOD: access to the grace end, billing retry stated.
            play.google.set(token, Self.subscription("IN_GRACE_PERIOD", order: "GPA.1..0", expires: Self.days(38)))
            let grace = try await play.notify("m-2", token: token, Self.subscriptionNotification(6, token: token))
            #expect(grace.outcome == .alreadyGranted)
            #expect(grace.transactions.first?.inBillingRetry == true)
            #expect(grace.transactions.first?.gracePeriodExpiresDate != nil)

            // ON_HOLD: no access, not revoked; the period the ledger held as current ends.
            play.google.set(token, Self.subscription("ON_HOLD", order: "GPA.1..0", expires: Self.days(-0.1)))
            let hold = try await play.notify("m-3", token: token, Self.subscriptionNotification(5, token: token))
            #expect(hold.outcome == .rejected && hold.reason == .expired)
            #expect(hold.transactions.first?.revokedAt == nil)
            let held = try await play.ledger.subscriptionClaims(originalTransactionID: token)
            #expect(!TransactionClaim.subscriptionIsActive(held, at: Date()))
            #expect(hold.transactions.first?.paused == false)

            // PAUSED: no access, stated paused on the verdict until a read finds it resumed.
            play.google.set(token, Self.subscription("PAUSED", order: "GPA.1..0", expires: Self.days(-0.05)))
            let paused = try await play.notify("m-3p", token: token, Self.subscriptionNotification(10, token: token))
            #expect(paused.outcome == .rejected && paused.reason == .expired)
            #expect(paused.transactions.first?.paused == true && paused.transactions.first?.inBillingRetry == false)

            // RECOVERED: a new order, access again.
            play.google.set(token, Self.subscription("ACTIVE", order: "GPA.1..1", expires: Self.days(30)))
            let recovered = try await play.notify("m-4", token: token, Self.subscriptionNotification(1, token: token))
            #expect(recovered.outcome == .granted && recovered.accountID == "acct-A")
            #expect(recovered.transactions.last?.paused == false)

            // CANCELED: auto-renew off, access until the expiry.
            play.google.set(
                token, Self.subscription("CANCELED", order: "GPA.1..1", expires: Self.days(30), autoRenew: false))
            let cancelled = try await play.notify("m-5", token: token, Self.subscriptionNotification(3, token: token))
            #expect(cancelled.outcome == .alreadyGranted)
            let afterCancel = try await play.ledger.subscriptionClaims(originalTransactionID: token)
            #expect(afterCancel.allSatisfy { $0.autoRenew == false })

            // REVOKED: access ends now, every claim of the token revoked.
            play.google.set(token, Self.subscription("EXPIRED", order: "GPA.1..1", expires: Date()))
            let revoked = try await play.notify("m-6", token: token, Self.subscriptionNotification(12, token: token))
            #expect(revoked.outcome == .rejected && revoked.reason == .revoked)
            let claims = try await play.ledger.subscriptionClaims(originalTransactionID: token)
            #expect(claims.count == 3 && claims.allSatisfy { $0.revokedAt != nil })
            #expect(play.google.reads(token) == 8, "every notification reads the purchase again")
        }
    }

    @Test(
        "a pending purchase that completes is granted to the account that sent it; an upgrade moves to the old owner",
        arguments: LedgerBackend.allCases)
    func pendingAndUpgrade(backend: LedgerBackend) async throws {
        try await Self.withHarness(backend) { play in
            play.google.set(
                "tok-p",
                #"{"productLineItem":[{"productId":"premium_unlock"}],"purchaseStateContext":{"purchaseState":"PENDING"}}"#
            )
            let pending = try await play.verify("pending", account: "acct-P", product: Self.premium, token: "tok-p")
            #expect(pending.reason == .purchasePending)
            #expect(try await play.ledger.pendingPlayPurchase(purchaseToken: "tok-p")?.accountID == "acct-P")
            play.google.set("tok-p", Self.product("PURCHASED", order: "GPA.9"))
            let completed = try await play.notify("m-p", token: "tok-p", Self.oneTimeNotification(1, token: "tok-p"))
            #expect(completed.outcome == .granted && completed.accountID == "acct-P")
            #expect(try await play.ledger.claims(ownedBy: "acct-P").map(\.transactionID) == ["GPA.9"])
            // ONE_TIME_PRODUCT_CANCELED: the claim revoked.
            play.google.set("tok-p", Self.product("CANCELLED", order: "GPA.9"))
            let cancelled = try await play.notify("m-pc", token: "tok-p", Self.oneTimeNotification(2, token: "tok-p"))
            #expect(cancelled.reason == .revoked && cancelled.accountID == "acct-P")

            play.google.set("tok-old", Self.subscription("ACTIVE", order: "GPA.2", expires: Self.days(20)))
            #expect(try await play.verify("old", account: "acct-U", token: "tok-old").outcome == .granted)
            play.google.set(
                "tok-new", Self.subscription("ACTIVE", order: "GPA.3", expires: Self.days(30), linked: "tok-old"))
            let upgraded = try await play.notify(
                "m-u", token: "tok-new", Self.subscriptionNotification(17, token: "tok-new"))
            #expect(upgraded.outcome == .granted && upgraded.accountID == "acct-U")
            let old = try await play.ledger.subscriptionClaims(originalTransactionID: "tok-old")
            #expect(!TransactionClaim.subscriptionIsActive(old, at: Date()), "the replaced token ends")
        }
    }

    @Test(
        "voided purchase, refund review, test notification and a type Google adds later",
        arguments: LedgerBackend.allCases)
    func voidedReviewTestUnknown(backend: LedgerBackend) async throws {
        try await Self.withHarness(backend) { play in
            play.google.set("tok-v", Self.product("PURCHASED", order: "GPA.7"))
            #expect(
                try await play.verify("v", account: "acct-V", product: Self.premium, token: "tok-v").outcome == .granted
            )
            let event = Date().addingTimeInterval(-60)
            let review = try await play.notify(
                "m-r", token: "tok-v",
                Self.developerNotification(
                    #""pendingRefundReviewNotification":{"purchaseToken":"tok-v","orderId":"GPA.7","pendingRefundToken":"prt-1"}"#,
                    eventTime: event))
            #expect(review.outcome == .alreadyGranted && review.accountID == "acct-V")
            let recorded = try #require(try await play.ledger.playRefundReview(pendingRefundToken: "prt-1"))
            #expect(recorded.orderID == "GPA.7" && recorded.purchaseToken == "tok-v")
            #expect(abs(recorded.deadline.timeIntervalSince(event) - 86_400) < 0.01)
            let open = try await play.ledger.playRefundReviews(deadlineAfter: Date(), limit: 10)
            #expect(open.map(\.pendingRefundToken) == ["prt-1"])
            #expect(try await play.ledger.playRefundReviews(deadlineAfter: Self.days(2), limit: 10).isEmpty)

            let voided = try await play.notify(
                "m-v", token: "tok-v",
                Self.developerNotification(
                    #""voidedPurchaseNotification":{"purchaseToken":"tok-v","orderId":"GPA.7","productType":2,"refundType":1}"#
                ))
            #expect(voided.outcome == .rejected && voided.reason == .revoked && voided.accountID == "acct-V")

            let test = try await play.notify(
                "m-t", token: nil, Self.developerNotification(#""testNotification":{"version":"1.0"}"#))
            #expect(test.outcome == .rejected && test.reason == .notificationRecorded)

            play.google.set("tok-s", Self.subscription("ACTIVE", order: "GPA.8", expires: Self.days(10)))
            #expect(try await play.verify("s", account: "acct-S", token: "tok-s").outcome == .granted)
            let later = try await play.notify(
                "m-x", token: "tok-s",
                Self.developerNotification(#""somethingNewNotification":{"purchaseToken":"tok-s"}"#))
            #expect(later.outcome == .alreadyGranted && later.accountID == "acct-S")
        }
    }

    // MARK: One read per token, never backwards

    @Test("notification jobs and a verification about one token in flight at once share one read")
    func singleFlight() async throws {
        try await Self.withHarness(.sqlite) { play in
            play.google.set("tok-f", Self.subscription("ACTIVE", order: "GPA.F", expires: Self.days(10)))
            #expect(try await play.verify("f", account: "acct-F", token: "tok-f").outcome == .granted)
            play.google.holding.store(true, ordering: .releasing)
            let key = GooglePlayStore.PurchaseRead(packageName: Self.package, token: "tok-f", isSubscription: true)
            try await withThrowingTaskGroup(of: Verdict.self) { group in
                for index in 0..<5 {
                    group.addTask {
                        try await play.notify(
                            "m-f\(index)", token: "tok-f", Self.subscriptionNotification(2, token: "tok-f"))
                    }
                }
                while play.store.readFlights.waiting(for: key.flightKey) < 5 { await Task.yield() }
                play.google.release()
                for try await verdict in group { #expect(verdict.accountID == "acct-F") }
            }
            #expect(play.google.reads("tok-f") == 2, "one read for the grant, one shared by the five notifications")
        }
    }

    @Test(
        "a stale read decided after a newer one, and an old notification replayed late, never undo the newer state",
        arguments: LedgerBackend.allCases)
    func neverBackwards(backend: LedgerBackend) async throws {
        try await Self.withHarness(backend) { play in
            let token = "tok-late"
            play.google.set(token, Self.subscription("ACTIVE", order: "GPA.L", expires: Self.days(5)))
            #expect(try await play.verify("l", account: "acct-L", token: token).outcome == .granted)
            play.google.set(token, Self.subscription("EXPIRED", order: "GPA.L", expires: Date()))
            let revoked = try await play.notify("m-l1", token: token, Self.subscriptionNotification(12, token: token))
            #expect(revoked.reason == .revoked)

            // A job whose read was taken before the revocation was applied (its answer still ACTIVE) is decided after:
            // answered from the ledger, nothing written.
            play.clock.offset.withLock { $0 = -60 }
            play.google.set(token, Self.subscription("ACTIVE", order: "GPA.L", expires: Self.days(5)))
            let stale = try await play.notify("m-l0", token: token, Self.subscriptionNotification(2, token: token))
            #expect(stale.outcome == .rejected && stale.reason == .revoked && stale.decidedBy == .ledger)
            let claims = try await play.ledger.subscriptionClaims(originalTransactionID: token)
            #expect(claims.map(\.transactionID) == ["GPA.L"] && claims.allSatisfy { $0.revokedAt != nil })

            // An old RENEWED replayed a month late, read now: Google's state now answers (still revoked: expired).
            play.clock.offset.withLock { $0 = 0 }
            play.google.set(token, Self.subscription("EXPIRED", order: "GPA.L", expires: Date()))
            let replayed = try await play.notify(
                "m-old", token: token, Self.subscriptionNotification(2, token: token, eventTime: Self.days(-30)))
            #expect(replayed.outcome == .rejected && replayed.accountID == "acct-L")
            let after = try await play.ledger.subscriptionClaims(originalTransactionID: token)
            #expect(after.allSatisfy { $0.revokedAt != nil })
        }
    }

    @Test("a notification's grant is acknowledged as Google Play's (once per token), never as an App Store follow-up")
    func notificationGrantIsAcknowledged() async throws {
        try await Self.withHarness(.sqlite) { play in
            play.google.set(
                "tok-p",
                #"{"productLineItem":[{"productId":"premium_unlock"}],"purchaseStateContext":{"purchaseState":"PENDING"}}"#
            )
            _ = try await play.verify("pending", account: "acct-P", product: Self.premium, token: "tok-p")
            play.google.set("tok-p", Self.product("PURCHASED", order: "GPA.9"))
            let job = GooglePlayNotificationJob.job(
                packageName: Self.package, purchaseToken: "tok-p",
                notification: Self.oneTimeNotification(1, token: "tok-p"),
                messageID: "m-ack", submittedAt: Date())
            let granted = try await play.decide(job)
            #expect(granted.outcome == .granted)
            let target = try #require(GooglePlayFollowUps.target(of: granted, job: job, catalog: Self.catalog))
            #expect(target.token == "tok-p" && target.productID == Self.premium && target.action == .acknowledgeProduct)
            let routed = VerdictFollowUps.followsUp(appStore: nil, googlePlay: nil)
            #expect(!routed(granted, job), "no App Store follow-up for a Google Play notification")
        }
    }

    // MARK: Bad input

    @Test("a notification that is not JSON, another package's, an unknown package, an unknown token: each a verdict")
    func badInput() async throws {
        try await Self.withHarness(.sqlite) { play in
            let notJSON = try await play.notify("b-1", token: "tok-b", "not json")
            #expect(notJSON.outcome == .rejected && notJSON.reason == .malformed)
            let notDeveloper = try await play.notify("b-2", token: "tok-b", #"{"version":"1.0"}"#)
            #expect(notDeveloper.reason == .malformed)
            let otherToken = try await play.notify(
                "b-3", token: "tok-b", Self.subscriptionNotification(2, token: "tok-c"))
            #expect(otherToken.reason == .malformed)
            let unknownPackage = try await play.decide(
                GooglePlayNotificationJob.job(
                    packageName: "com.unknown.app", purchaseToken: "tok-b", notification: nil, messageID: "b-4",
                    submittedAt: Date()))
            #expect(unknownPackage.reason == .wrongBundle)
            play.google.set("tok-b", Self.subscription("ACTIVE", order: "GPA.B", expires: Self.days(5)))
            let unclaimed = try await play.notify(
                "b-5", token: "tok-b", Self.subscriptionNotification(2, token: "tok-b"))
            #expect(unclaimed.outcome == .rejected && unclaimed.reason == .unclaimed)
            #expect(unclaimed.accountID == GooglePlayNotificationJob.defaultAccountID)
            #expect(try await play.ledger.subscriptionClaims(originalTransactionID: "tok-b").isEmpty)
            #expect(play.google.reads("tok-b") == 1, "only the well-formed one reads Google")
        }
    }
}
