import Foundation
import Ledger
import Logging
import Messages
import Prometheus
import RateLimiter
import Synchronization
import Testing

@testable import AppleClients
@testable import Decision
@testable import Reconciler

/// The reconciler's re-reads of subscriptions the ledger is unsure of, on a manual clock, a real
/// SQLite ledger, a fake Get Transaction History and a recording sink: a renewal whose notification was dropped is
/// published as a correction for the owner and, decided by the workers' rules, brings the ledger to Apple's truth;
/// each subscription is re-read at most once per interval; sweeps and re-reads share one rate budget; 429 backs
/// off; answers that are not the app's, or not signed, correct nothing and are logged without their payload.
@Suite("Reconciler: re-reads of unsure subscriptions", .timeLimit(.minutes(2)))
struct SubscriptionRereadTests {
    typealias S = LedgerTestSupport
    typealias Sweeps = NotificationReconcilerTests

    static let bundle = LedgerFixtures.bundle

    /// Apple's transaction histories, by original transaction id, 2 transactions a page (the revision is the
    /// offset, as in the simulator).
    final class FakeTransactionHistory: TransactionHistorySource, Sendable {
        struct Request: Sendable {
            var transactionID: String
            var revision: String?
            var at: Int64
        }
        struct State {
            var histories: [String: [SignedTransaction]] = [:]
            var bundleID: String = SubscriptionRereadTests.bundle
            var requests: [Request] = []
            var scripted: [AppleOutcome<TransactionHistoryPage>] = []
        }
        let state = Mutex(State())
        let clock: ManualClock
        let pageSize = 2

        init(clock: ManualClock) { self.clock = clock }

        func transactionHistory(
            transactionID: String, revision: String?, environment: AppleEnvironment?
        ) async throws -> AppleOutcome<TransactionHistoryPage> {
            state.withLock { state in
                state.requests.append(
                    Request(transactionID: transactionID, revision: revision, at: clock.unixMillisecondsNow))
                if !state.scripted.isEmpty { return state.scripted.removeFirst() }
                let all = state.histories[transactionID] ?? []
                let offset = min(Int(revision ?? "0") ?? 0, all.count)
                let end = min(offset + pageSize, all.count)
                return .answered(
                    TransactionHistoryPage(
                        revision: String(end), hasMore: end < all.count, bundleID: state.bundleID,
                        environment: .production, answeredBy: .production,
                        transactions: Array(all[offset..<end])))
            }
        }

        var requests: [Request] { state.withLock { $0.requests } }
    }

    /// A transaction as the client returns it after verifying its JWS.
    static func signed(
        _ id: String, original: String, purchase: Date, expires: Date, revoked: Date? = nil, bundleID: String = bundle
    ) -> SignedTransaction {
        SignedTransaction(
            transactionID: id, originalTransactionID: original, bundleID: bundleID, productID: "com.example.monthly",
            purchaseDate: purchase, expiresDate: expires, type: "Auto-Renewable Subscription", revocationDate: revoked,
            environment: .production)
    }

    static func claim(
        _ id: String, account: String, expires: Date, revoked: Date? = nil, bundleID: String = bundle
    ) -> TransactionClaim {
        TransactionClaim(
            transactionID: id, originalTransactionID: id, accountID: account, productID: "com.example.monthly",
            productType: .autoRenewable, bundleID: bundleID, environment: "Production",
            purchaseDate: expires.addingTimeInterval(-30 * 86_400), expiresDate: expires, revokedAt: revoked,
            grantedJobID: "job-\(id)", verdictID: "verdict-\(id)", createdAt: expires, updatedAt: expires)
    }

    static func configuration() -> ReconcilerConfiguration {
        var configuration = Sweeps.configuration()
        configuration.rereadInterval = .seconds(3_600)
        return configuration
    }

    static func reconciler(
        _ ledger: any Ledger, _ history: FakeTransactionHistory, _ sink: Sweeps.RecordingSink, _ clock: ManualClock,
        notifications: Sweeps.FakeHistory? = nil, logger: Logger = Logger(label: "test.reread"),
        configuration: ReconcilerConfiguration = configuration()
    ) throws -> NotificationReconciler<ManualClock> {
        NotificationReconciler(
            configuration: configuration, store: ledger,
            source: notifications ?? Sweeps.FakeHistory(clock: clock), sink: sink, clock: clock, holder: "replica-a",
            logger: logger, rereadStore: ledger, historySource: history,
            // Its own registry: the process-wide one refuses a name both with and without the `app` label, which
            // tests running side by side would otherwise mix.
            metricsFactory: PrometheusMetricsFactory(registry: PrometheusCollectorRegistry()))
    }

    @Test("billing retry, renewal notification dropped: the renewal is published for the owner and corrects the ledger")
    func renewalCorrected() async throws {
        try await S.withLedger(.sqlite) { ledger, _ in
            let clock = ManualClock()
            let now = Sweeps.wall(clock)
            let history = FakeTransactionHistory(clock: clock)
            let sink = Sweeps.RecordingSink()
            // The ledger: `sub-1` lapsed a day ago (DID_FAIL_TO_RENEW, then the DID_RENEW was dropped); `sub-2`
            // lapsed two days ago and Apple's billing retry has not succeeded.
            let lapsed = now.addingTimeInterval(-86_400)
            #expect(
                try await ledger.perform([
                    .claim(Self.claim("sub-1", account: "acct-1", expires: lapsed)),
                    .claim(Self.claim("sub-2", account: "acct-2", expires: lapsed.addingTimeInterval(-86_400))),
                ]))
            let renewal = Self.signed(
                "sub-1-r1", original: "sub-1", purchase: now.addingTimeInterval(-3_600),
                expires: now.addingTimeInterval(29 * 86_400))
            history.state.withLock {
                $0.histories = [
                    "sub-1": [
                        Self.signed(
                            "sub-1", original: "sub-1", purchase: lapsed.addingTimeInterval(-30 * 86_400),
                            expires: lapsed),
                        renewal,
                    ],
                    "sub-2": [
                        Self.signed(
                            "sub-2", original: "sub-2", purchase: lapsed.addingTimeInterval(-31 * 86_400),
                            expires: lapsed.addingTimeInterval(-86_400))
                    ],
                ]
            }
            let reconciler = try Self.reconciler(ledger, history, sink, clock)
            let first = await Sweeps.driving(clock) { await reconciler.rereadUnsure() }
            #expect(first == .completed(subscriptions: 2, corrections: 1))
            let jobs = sink.jobs.withLock { $0 }
            #expect(jobs.count == 1)
            let job = try #require(jobs.first)
            let expiresMs = Int64((renewal.expiresDate!.timeIntervalSince1970 * 1000).rounded())
            #expect(job.jobID == "reconcile-sub-1-r1-\(expiresMs)-0")
            #expect(job.accountID == "acct-1")
            #expect(job.bundleID == Self.bundle)
            #expect(job.proof == .transactionID("sub-1-r1"))

            // The workers decide it like any purchase, from Apple's Get Transaction Info: the renewal is claimed for
            // the owner, active to Apple's expiry.
            let evidence = LedgerFixtures.apple([
                PurchaseTransaction(
                    transactionID: "sub-1-r1", originalTransactionID: "sub-1", productID: "com.example.monthly",
                    productType: .autoRenewable, purchaseDate: renewal.purchaseDate, expiresDate: renewal.expiresDate)
            ])
            let verdict = try await S.settle(ledger, job, evidence, policy: LedgerFixtures.policy(now: now))
            #expect(verdict.outcome == .granted)
            #expect(verdict.accountID == "acct-1")
            let claims = try await ledger.snapshot(jobID: "", transactionIDs: [], originalTransactionIDs: ["sub-1"])
                .claims
            let renewed = try #require(claims.first { $0.transactionID == "sub-1-r1" })
            #expect(renewed.accountID == "acct-1")
            #expect(renewed.expiresDate == renewal.expiresDate)
            #expect(LedgerShow.state(of: renewed, at: now) == "active")

            // Re-read at most once per interval: a minute later nothing is asked; `sub-1` is no longer unsure.
            let asked = history.requests.count
            clock.advance(by: .seconds(60))
            #expect(
                await Sweeps.driving(clock) { await reconciler.rereadUnsure() }
                    == .completed(subscriptions: 0, corrections: 0))
            #expect(history.requests.count == asked)
            // After the interval, `sub-2` again, from the revision Apple gave last time; still nothing to correct.
            clock.advance(by: .seconds(3_600))
            let third = await Sweeps.driving(clock) { await reconciler.rereadUnsure() }
            #expect(third == .completed(subscriptions: 1, corrections: 0))
            #expect(history.requests.suffix(1).map(\.transactionID) == ["sub-2"])
            #expect(history.requests.last?.revision == "1")
            #expect(sink.jobs.withLock { $0.count } == 1)
        }
    }

    @Test("the same state re-read again is the same job; a refund Apple states is a new one")
    func idempotentJobIDs() async throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let owned = Self.claim("sub-1", account: "acct-1", expires: now)
        let renewal = Self.signed("sub-1-r1", original: "sub-1", purchase: now, expires: now.addingTimeInterval(86_400))
        typealias R = NotificationReconciler<ManualClock>
        let once = R.corrections([renewal], of: "sub-1", claims: [owned], owner: "acct-1", submittedAt: now)
        let twice = R.corrections(
            [renewal], of: "sub-1", claims: [owned], owner: "acct-1", submittedAt: now.addingTimeInterval(60))
        #expect(once.map(\.jobID) == twice.map(\.jobID))
        // Same content too (a transaction id, not a JWS Apple signs anew each time): one job, decided once.
        #expect(once.map(\.contentDigest) == twice.map(\.contentDigest))
        var refunded = renewal
        refunded.revocationDate = now.addingTimeInterval(10)
        let claimed = Self.claim("sub-1-r1", account: "acct-1", expires: renewal.expiresDate!)
        let revoke = R.corrections(
            [refunded], of: "sub-1", claims: [owned, claimed], owner: "acct-1", submittedAt: now)
        #expect(revoke.count == 1)
        #expect(revoke.first?.jobID != once.first?.jobID)
        // Nothing differs: no job. An earlier expiry is not a correction (the rules never move a date back).
        #expect(
            R.corrections([renewal], of: "sub-1", claims: [owned, claimed], owner: "acct-1", submittedAt: now).isEmpty)
        var earlier = renewal
        earlier.expiresDate = now
        #expect(
            R.corrections([earlier], of: "sub-1", claims: [owned, claimed], owner: "acct-1", submittedAt: now).isEmpty)
        // Another subscription's transaction in the answer is ignored.
        let stranger = Self.signed("x-1", original: "x", purchase: now, expires: now.addingTimeInterval(86_400))
        #expect(R.corrections([stranger], of: "sub-1", claims: [owned], owner: "acct-1", submittedAt: now).isEmpty)
    }

    @Test("sweep and re-reads share the budget; 429 with Retry-After waits that long and asks the same page again")
    func budgetAndBackoff() async throws {
        try await S.withLedger(.sqlite) { ledger, _ in
            let clock = ManualClock()
            let now = Sweeps.wall(clock)
            let history = FakeTransactionHistory(clock: clock)
            let notifications = Sweeps.FakeHistory(clock: clock)
            let sink = Sweeps.RecordingSink()
            var claims: [LedgerWrite] = []
            for index in 0..<5 {
                claims.append(
                    .claim(Self.claim("sub-\(index)", account: "acct-\(index)", expires: now.addingTimeInterval(-60))))
            }
            #expect(try await ledger.perform(claims))
            history.state.withLock {
                $0.scripted = [
                    .retryable(AppleRetryAdvice(reason: .httpStatus(429), retryAfter: .seconds(5))),
                    .retryable(AppleRetryAdvice(reason: .httpStatus(429))),
                ]
            }
            let reconciler = try Self.reconciler(ledger, history, sink, clock, notifications: notifications)
            let (sweep, reread) = await Sweeps.driving(clock) {
                (await reconciler.sweep(), await reconciler.rereadUnsure())
            }
            #expect(sweep == .completed(checkpoint: now, pages: 1, published: 0))
            #expect(reread == .completed(subscriptions: 5, corrections: 0))
            // One request per 100 ms at 10/s, across both kinds of call.
            let times = (notifications.queries.map(\.at) + history.requests.map(\.at)).sorted()
            #expect(times.count == 8)
            for (earlier, later) in zip(times, times.dropFirst()) {
                #expect(later - earlier >= 100, "\(times)")
            }
            // The 429's Retry-After (5 s), then the configured backoff (1 s), each for the same subscription.
            let requests = history.requests
            #expect(requests[0].transactionID == requests[1].transactionID)
            #expect(requests[1].at - requests[0].at >= 5_000)
            #expect(requests[2].transactionID == requests[0].transactionID)
            #expect(requests[2].at - requests[1].at >= 1_000)
        }
    }

    @Test("a bad signature or another app's bundle: no correction, logged without the payload, read again later")
    func badAnswersCorrectNothing() async throws {
        try await S.withLedger(.sqlite) { ledger, _ in
            let clock = ManualClock()
            let now = Sweeps.wall(clock)
            let history = FakeTransactionHistory(clock: clock)
            let sink = Sweeps.RecordingSink()
            let capture = SecurityLogCapture()
            #expect(
                try await ledger.perform([
                    .claim(Self.claim("sub-1", account: "acct-1", expires: now.addingTimeInterval(-60))),
                    .claim(Self.claim("sub-2", account: "acct-2", expires: now.addingTimeInterval(-120))),
                ]))
            let foreign = Self.signed(
                "sub-2-r1", original: "sub-2", purchase: now, expires: now.addingTimeInterval(86_400),
                bundleID: "com.other.app")
            history.state.withLock {
                // Both never read, listed by id: sub-1 meets a chain that does not verify (the client's verdict on the
                // JWS), sub-2 a transaction of another app's bundle.
                $0.histories = ["sub-2": [foreign]]
                $0.scripted = [
                    .failed(
                        AppleClientError(code: .signatureInvalid, detail: "x5c chain does not reach a trusted anchor"))
                ]
            }
            let reconciler = try Self.reconciler(
                ledger, history, sink, clock, logger: capture.logger("test.reread"))
            let result = await Sweeps.driving(clock) { await reconciler.rereadUnsure() }
            #expect(result == .completed(subscriptions: 2, corrections: 0))
            #expect(sink.jobs.withLock { $0.isEmpty })
            #expect(history.requests.map(\.transactionID) == ["sub-1", "sub-2"])
            let warnings = capture.lines.filter { $0.contains("not usable") }
            #expect(warnings.count == 2)
            #expect(warnings.contains { $0.contains("signed payload rejected") && $0.contains("sub-1") })
            #expect(warnings.contains { $0.contains("another bundle") && $0.contains("sub-2") })
            #expect(capture.leaks(of: [("transaction", "sub-2-r1"), ("bundle", "com.other.app")]).isEmpty)
            // Recorded as read: not asked again within the interval, asked again after it.
            #expect(
                await Sweeps.driving(clock) { await reconciler.rereadUnsure() }
                    == .completed(subscriptions: 0, corrections: 0))
            clock.advance(by: .seconds(3_601))
            history.state.withLock { $0.histories = [:] }
            #expect(
                await Sweeps.driving(clock) { await reconciler.rereadUnsure() }
                    == .completed(subscriptions: 2, corrections: 0))
        }
    }

    @Test("several apps: each app's reconciler re-reads its own app's subscriptions, with its own key, and no other")
    func severalApps() async throws {
        try await S.withLedger(.sqlite) { ledger, _ in
            let clock = ManualClock()
            let now = Sweeps.wall(clock)
            let sink = Sweeps.RecordingSink()
            let other = "com.example.other"
            let lapsed = now.addingTimeInterval(-86_400)
            #expect(
                try await ledger.perform([
                    .claim(Self.claim("a-sub", account: "acct-a", expires: lapsed)),
                    .claim(Self.claim("b-sub", account: "acct-b", expires: lapsed, bundleID: other)),
                ]))
            // Each app's Server API (its own key): Apple answers a request with that app's history only.
            let historyA = FakeTransactionHistory(clock: clock)
            let historyB = FakeTransactionHistory(clock: clock)
            let renewalB = Self.signed(
                "b-sub-r1", original: "b-sub", purchase: now.addingTimeInterval(-3_600),
                expires: now.addingTimeInterval(29 * 86_400), bundleID: other)
            historyA.state.withLock {
                $0.histories = [
                    "a-sub": [
                        Self.signed(
                            "a-sub", original: "a-sub", purchase: lapsed.addingTimeInterval(-30 * 86_400),
                            expires: lapsed)
                    ]
                ]
            }
            historyB.state.withLock {
                $0.bundleID = other
                $0.histories = [
                    "b-sub": [
                        Self.signed(
                            "b-sub", original: "b-sub", purchase: lapsed.addingTimeInterval(-30 * 86_400),
                            expires: lapsed, bundleID: other),
                        renewalB,
                    ]
                ]
            }
            // As the runtime configures them: one lease and checkpoint row per app, labelled by its bundle id.
            var settingsA = Self.configuration()
            settingsA.name += "/" + Self.bundle
            settingsA.app = Self.bundle
            var settingsB = Self.configuration()
            settingsB.name += "/" + other
            settingsB.app = other
            let reconcilerA = try Self.reconciler(ledger, historyA, sink, clock, configuration: settingsA)
            let reconcilerB = try Self.reconciler(ledger, historyB, sink, clock, configuration: settingsB)
            let (a, b) = await Sweeps.driving(clock) {
                (await reconcilerA.rereadUnsure(), await reconcilerB.rereadUnsure())
            }
            #expect(a == .completed(subscriptions: 1, corrections: 0))
            #expect(b == .completed(subscriptions: 1, corrections: 1))
            #expect(historyA.requests.map(\.transactionID) == ["a-sub"])
            #expect(historyB.requests.map(\.transactionID) == ["b-sub"])
            let jobs = sink.jobs.withLock { $0 }
            #expect(jobs.map(\.proof) == [.transactionID("b-sub-r1")])
            #expect(jobs.first?.bundleID == other)
            #expect(jobs.first?.accountID == "acct-b")
        }
    }

    @Test("a refund reversed, its notification dropped: the re-read's reversal is decided once and restores the claim")
    func refundReversed() async throws {
        try await S.withLedger(.sqlite) { ledger, _ in
            let clock = ManualClock()
            let now = Sweeps.wall(clock)
            let history = FakeTransactionHistory(clock: clock)
            let sink = Sweeps.RecordingSink()
            // The current period was refunded two days ago (the ledger revoked it); Apple reversed the refund and
            // its REFUND_REVERSED never arrived. Apple's history states the transaction without a revocation.
            let expires = now.addingTimeInterval(10 * 86_400)
            let revoked = now.addingTimeInterval(-2 * 86_400)
            #expect(
                try await ledger.perform([
                    .claim(Self.claim("sub-1", account: "acct-1", expires: expires, revoked: revoked))
                ]))
            let stated = Self.signed(
                "sub-1", original: "sub-1", purchase: expires.addingTimeInterval(-30 * 86_400), expires: expires)
            history.state.withLock { $0.histories = ["sub-1": [stated]] }
            let reconciler = try Self.reconciler(ledger, history, sink, clock)
            #expect(
                await Sweeps.driving(clock) { await reconciler.rereadUnsure() }
                    == .completed(subscriptions: 1, corrections: 1))
            let job = try #require(sink.jobs.withLock { $0.first })
            #expect(
                job.jobID
                    == CorrectionJob.reversalJobID(
                        transactionID: "sub-1", expiresDate: expires, reversedRevocation: revoked))
            #expect(CorrectionJob.transactionID(ofJobID: job.jobID) == "sub-1")
            #expect(job.accountID == "acct-1")
            #expect(job.proof == .transactionID("sub-1"))

            // A worker decides it from Apple's Get Transaction Info, as a REFUND_REVERSED: restored for the owner.
            let evidence = LedgerFixtures.apple([
                PurchaseTransaction(
                    transactionID: "sub-1", originalTransactionID: "sub-1", productID: "com.example.monthly",
                    productType: .autoRenewable, purchaseDate: stated.purchaseDate, expiresDate: expires)
            ])
            let policy = LedgerFixtures.policy(now: now)
            let verdict = try await S.settle(ledger, job, evidence, policy: policy)
            #expect(verdict.outcome == .alreadyGranted)
            #expect(verdict.reason == .alreadyOwned)
            #expect(verdict.accountID == "acct-1")
            #expect(verdict.transactions.map(\.revokedAt) == [nil])
            let claims = try await ledger.subscriptionClaims(originalTransactionID: "sub-1")
            #expect(claims.map(\.revokedAt) == [nil])
            #expect(LedgerShow.state(of: try #require(claims.first), at: now) == "active")
            // Decided once: the same job again (a redelivery, or the same state published again) is the recorded
            // verdict, bit for bit.
            #expect(try await S.settle(ledger, job, evidence, policy: policy) == verdict)
            // Restored, the subscription is no longer unsure: after the interval nothing is read or published.
            clock.advance(by: .seconds(3_601))
            #expect(
                await Sweeps.driving(clock) { await reconciler.rereadUnsure() }
                    == .completed(subscriptions: 0, corrections: 0))
            #expect(sink.jobs.withLock { $0.count } == 1)
        }
    }

    @Test("a reversal's job id names the refund it reverses and reads back its transaction; other ids are no reversal")
    func reversalJobIDs() {
        let expires = Date(timeIntervalSince1970: 1_800_000_000.25)
        let revoked = Date(timeIntervalSince1970: 1_799_000_000)
        let id = CorrectionJob.reversalJobID(
            transactionID: "sub-1-r1", expiresDate: expires, reversedRevocation: revoked)
        #expect(id == "reconcile-reversal-1799000000000-sub-1-r1-1800000000250-0")
        #expect(CorrectionJob.transactionID(ofJobID: id) == "sub-1-r1")
        #expect(CorrectionJob.isReversal(jobID: id))
        let plain = CorrectionJob.jobID(transactionID: "sub-1-r1", expiresDate: expires, revocationDate: nil)
        #expect(!CorrectionJob.isReversal(jobID: plain))
        for notOne in ["reconcile-reversal-", "reconcile-reversal-x-t-1-0", "reconcile-reversal-1-t-x-0", "job-1"] {
            #expect(!CorrectionJob.isReversal(jobID: notOne), "\(notOne)")
        }
    }
}
