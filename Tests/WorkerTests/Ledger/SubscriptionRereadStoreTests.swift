import Foundation
import Messages
import Testing

@testable import Decision
@testable import Ledger

/// The reconciler's list of subscriptions the ledger is unsure of (lapsed or in grace; or claimed after a
/// notification named them unclaimed), and its record of re-reads (schema version 6), on both backends (a real SQLite
/// file and a real PostgreSQL).
@Suite("Ledger: subscriptions to re-read", .timeLimit(.minutes(2)))
struct SubscriptionRereadStoreTests {
    typealias S = LedgerTestSupport

    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func at(days: Double) -> Date { now.addingTimeInterval(days * 86_400) }

    static func store(_ ledger: any Ledger) throws -> any SubscriptionRereadStore {
        ledger
    }

    static func claim(
        _ id: String, original: String? = nil, expires: Date?, grace: Date? = nil, revoked: Date? = nil,
        type: ProductType = .autoRenewable, purchased: Date = at(days: -400), bundleID: String = "com.example.app"
    ) -> TransactionClaim {
        TransactionClaim(
            transactionID: id, originalTransactionID: original ?? id, accountID: "acct-\(original ?? id)",
            productID: "pro.monthly", productType: type, bundleID: bundleID, environment: "Production",
            purchaseDate: purchased, expiresDate: expires, gracePeriodExpiresDate: grace, revokedAt: revoked,
            grantedJobID: "job-\(id)", verdictID: "verdict-\(id)", createdAt: at(days: -400), updatedAt: at(days: -400))
    }

    /// A ledger with one subscription of each kind; the unsure ones are `lapsed` and `grace`.
    static func seed(_ ledger: any Ledger) async throws {
        let writes: [LedgerWrite] = [
            // Lapsed a day ago, auto-renew unknown: billing retry, or a renewal whose notification never came.
            .claim(claim("lapsed", expires: at(days: -1))),
            // Lapsed an hour ago, in a grace period, auto-renew on.
            .claim(claim("grace", expires: now.addingTimeInterval(-3_600), grace: at(days: 5))),
            // Renewed: the latest period runs for 20 more days.
            .claim(claim("renewed", expires: at(days: -10))),
            .claim(claim("renewed-2", original: "renewed", expires: at(days: 20))),
            // The customer turned auto-renew off: it simply ended.
            .claim(claim("off", expires: at(days: -2))),
            // Refunded 70 days ago: past the 60 days a reversal of the refund is awaited.
            .claim(claim("refunded", expires: at(days: -3), revoked: at(days: -70))),
            // Ended 90 days ago: past Apple's 60 days of billing retry.
            .claim(claim("old", expires: at(days: -90))),
            // Not a subscription.
            .claim(claim("lifetime", expires: nil, type: .nonConsumable)),
            .recordNotification(originalTransactionID: "grace", signedAt: at(days: -1), autoRenew: true),
            .recordNotification(originalTransactionID: "off", signedAt: at(days: -3), autoRenew: false),
        ]
        #expect(try await ledger.perform(writes))
    }

    @Test(
        "unsure: lapsed or in grace, not revoked, auto-renew not off, within the window; never-read first",
        arguments: LedgerBackend.allCases)
    func listsUnsureSubscriptions(backend: LedgerBackend) async throws {
        try await S.withLedger(backend) { ledger, _ in
            let store = try Self.store(ledger)
            try await Self.seed(ledger)
            let first = try await store.unsureSubscriptions(
                now: Self.now, lapsedSince: Self.at(days: -60), rereadBefore: Self.now.addingTimeInterval(-3_600),
                limit: 10)
            #expect(
                first == [
                    UnsureSubscription(
                        originalTransactionID: "grace", environment: "Production", rereadAt: nil, revision: nil,
                        bundleID: "com.example.app"),
                    UnsureSubscription(
                        originalTransactionID: "lapsed", environment: "Production", rereadAt: nil, revision: nil,
                        bundleID: "com.example.app"),
                ])
            // Bounded batches.
            let one = try await store.unsureSubscriptions(
                now: Self.now, lapsedSince: Self.at(days: -60), rereadBefore: Self.now, limit: 1)
            #expect(one.map(\.originalTransactionID) == ["grace"])
            // The latest period (purchased last) lapsed, though an earlier period's stored expiry is later
            // (extended): the subscription is its latest period, so it is unsure.
            #expect(
                try await ledger.perform([
                    .claim(Self.claim("early", expires: Self.at(days: 30), purchased: Self.at(days: -40))),
                    .claim(
                        Self.claim(
                            "early-2", original: "early", expires: Self.at(days: -1), purchased: Self.at(days: -20))),
                ]))
            let withEarly = try await store.unsureSubscriptions(
                now: Self.now, lapsedSince: Self.at(days: -60), rereadBefore: Self.now.addingTimeInterval(-3_600),
                limit: 10)
            #expect(withEarly.map(\.originalTransactionID) == ["early", "grace", "lapsed"])
        }
    }

    @Test(
        "a re-read hides the subscription for the interval, keeps its revision, and comes back oldest-read first",
        arguments: LedgerBackend.allCases)
    func rereadOncePerInterval(backend: LedgerBackend) async throws {
        try await S.withLedger(backend) { ledger, _ in
            let store = try Self.store(ledger)
            try await Self.seed(ledger)
            try await store.recordSubscriptionReread(originalTransactionID: "lapsed", revision: "5", at: Self.now)
            // A minute later, with a one-hour interval: only the one not read yet.
            let soon = Self.now.addingTimeInterval(60)
            let listed = try await store.unsureSubscriptions(
                now: soon, lapsedSince: soon.addingTimeInterval(-60 * 86_400),
                rereadBefore: soon.addingTimeInterval(-3_600), limit: 10)
            #expect(listed.map(\.originalTransactionID) == ["grace"])
            // Grace read later than lapsed; an answer without a revision keeps the stored one.
            try await store.recordSubscriptionReread(
                originalTransactionID: "grace", revision: nil, at: Self.now.addingTimeInterval(120))
            try await store.recordSubscriptionReread(
                originalTransactionID: "lapsed", revision: nil, at: Self.now.addingTimeInterval(60))
            let later = Self.now.addingTimeInterval(2 * 3_600)
            let again = try await store.unsureSubscriptions(
                now: later, lapsedSince: later.addingTimeInterval(-60 * 86_400),
                rereadBefore: later.addingTimeInterval(-3_600), limit: 10)
            #expect(
                again == [
                    UnsureSubscription(
                        originalTransactionID: "lapsed", environment: "Production",
                        rereadAt: Self.now.addingTimeInterval(60), revision: "5", bundleID: "com.example.app"),
                    UnsureSubscription(
                        originalTransactionID: "grace", environment: "Production",
                        rereadAt: Self.now.addingTimeInterval(120), revision: nil, bundleID: "com.example.app"),
                ])
            // A renewal claimed since: no longer unsure.
            #expect(
                try await ledger.perform([
                    .claim(Self.claim("lapsed-2", original: "lapsed", expires: Self.at(days: 30)))
                ]))
            let afterRenewal = try await store.unsureSubscriptions(
                now: later, lapsedSince: later.addingTimeInterval(-60 * 86_400), rereadBefore: later, limit: 10)
            #expect(afterRenewal.map(\.originalTransactionID) == ["grace"])
            #expect(
                try await store.subscriptionClaims(originalTransactionID: "lapsed").map(\.transactionID).sorted()
                    == ["lapsed", "lapsed-2"])
        }
    }

    @Test(
        "a claim made after a notification about its transaction found none: listed first, whole history, once",
        arguments: LedgerBackend.allCases)
    func namedWhileUnclaimed(backend: LedgerBackend) async throws {
        try await S.withLedger(backend) { ledger, _ in
            typealias F = LedgerFixtures
            let store = try Self.store(ledger)
            try await Self.seed(ledger)
            // A REFUND about a transaction no account had yet: recorded as `unclaimed`, nothing claimed.
            let refunded = F.renewal(
                "orphan", original: "orphan", purchased: F.days(-3), expires: F.days(27), revoked: F.days(-1))
            let refund = NotificationRulesTests.notification("REFUND", [refunded], signed: F.days(-1))
            let decision = try NotificationRulesTests.decide(refund, claims: [], job: "apple-notification-orphan")
            #expect(decision.verdict.reason == .unclaimed)
            #expect(try await ledger.apply(decision) == .applied(decision.verdict))
            // The purchase decided after it, from a JWS signed before the refund: claimed, not revoked. A re-read
            // before the notification does not count.
            #expect(try await ledger.perform([.claim(Self.claim("orphan", expires: Self.at(days: 27)))]))
            try await store.recordSubscriptionReread(
                originalTransactionID: "orphan", revision: "3", at: decision.verdict.decidedAt.addingTimeInterval(-60))
            let listed = try await store.unsureSubscriptions(
                now: Self.now, lapsedSince: Self.at(days: -60), rereadBefore: Self.now.addingTimeInterval(-3_600),
                limit: 10)
            #expect(listed.map(\.originalTransactionID) == ["orphan", "grace", "lapsed"])
            #expect(listed.first?.revision == nil, "the whole history: the refunded transaction may be an old one")
            #expect(
                try await store.unsureSubscriptions(
                    now: Self.now, lapsedSince: Self.at(days: -60), rereadBefore: Self.now, limit: 1
                ).map(\.originalTransactionID) == ["orphan"])
            // Re-read after the notification: done with it.
            try await store.recordSubscriptionReread(
                originalTransactionID: "orphan", revision: "4", at: decision.verdict.decidedAt.addingTimeInterval(60))
            let after = try await store.unsureSubscriptions(
                now: Self.now, lapsedSince: Self.at(days: -60), rereadBefore: Self.now.addingTimeInterval(-3_600),
                limit: 10)
            #expect(after.map(\.originalTransactionID) == ["grace", "lapsed"])
        }
    }

    /// The claim `claim` as a verdict of `store` granted it (recorded in `job_verdicts` under its granting job).
    static func granted(_ claim: TransactionClaim, store: Store) -> LedgerDecision {
        LedgerDecision(
            verdict: Verdict(
                verdictID: claim.verdictID, jobID: claim.grantedJobID, accountID: claim.accountID, outcome: .granted,
                decidedBy: store == .googlePlay ? .googlePlay : .apple, store: store,
                transactions: [
                    Verdict.Transaction(
                        transactionID: claim.transactionID, originalTransactionID: claim.originalTransactionID,
                        productID: claim.productID, expiresDate: claim.expiresDate)
                ], decidedAt: at(days: -400)),
            writes: [.claim(claim)])
    }

    @Test(
        "each unsure subscription names its app; the App Store and Play lists never take each other's claims",
        arguments: LedgerBackend.allCases)
    func appsAndStores(backend: LedgerBackend) async throws {
        try await S.withLedger(backend) { ledger, _ in
            let store = try Self.store(ledger)
            // Two App Store apps, each with a lapsed subscription (granted by App Store verdicts, and one written
            // without a verdict), and a Play subscription whose package has the first app's name.
            let appA = Self.claim("a-sub", expires: Self.at(days: -1), bundleID: "com.example.app")
            let appB = Self.claim("b-sub", expires: Self.at(days: -2), bundleID: "com.example.other")
            let play = Self.claim("play-token", expires: Self.at(days: -1), bundleID: "com.example.app")
            for decision in [Self.granted(appA, store: .appStore), Self.granted(play, store: .googlePlay)] {
                #expect(try await ledger.apply(decision) == .applied(decision.verdict))
            }
            #expect(try await ledger.perform([.claim(appB)]))
            let window = (lapsedSince: Self.at(days: -60), rereadBefore: Self.now.addingTimeInterval(-3_600))
            let all = try await store.unsureSubscriptions(
                bundleID: nil, now: Self.now, lapsedSince: window.lapsedSince, rereadBefore: window.rereadBefore,
                limit: 10)
            #expect(
                all == [
                    UnsureSubscription(
                        originalTransactionID: "a-sub", environment: "Production", rereadAt: nil, revision: nil,
                        bundleID: "com.example.app"),
                    UnsureSubscription(
                        originalTransactionID: "b-sub", environment: "Production", rereadAt: nil, revision: nil,
                        bundleID: "com.example.other"),
                ])
            for (bundleID, expected) in [("com.example.app", ["a-sub"]), ("com.example.other", ["b-sub"])] {
                let listed = try await store.unsureSubscriptions(
                    bundleID: bundleID, now: Self.now, lapsedSince: window.lapsedSince,
                    rereadBefore: window.rereadBefore, limit: 10)
                #expect(listed.map(\.originalTransactionID) == expected, "\(bundleID)")
                #expect(listed.allSatisfy { $0.bundleID == bundleID })
            }
            // The Play re-reads of the package named like app A: the Play token only, not A's subscription.
            let playListed = try await ledger.unsurePlaySubscriptions(
                packages: ["com.example.app"], from: Self.at(days: -2), to: Self.now,
                rereadBefore: window.rereadBefore, limit: 10)
            #expect(playListed.map(\.purchaseToken) == ["play-token"])
        }
    }

    @Test(
        "a subscription refunded within the window is unsure (a reversal may be lost), its whole history read",
        arguments: LedgerBackend.allCases)
    func refundedWithinWindow(backend: LedgerBackend) async throws {
        try await S.withLedger(backend) { ledger, _ in
            let store = try Self.store(ledger)
            try await Self.seed(ledger)
            #expect(
                try await ledger.perform([
                    // The current period refunded two days ago; it would run ten more days.
                    .claim(
                        Self.claim(
                            "reversible", expires: Self.at(days: 10), revoked: Self.at(days: -2),
                            purchased: Self.at(days: -20)))
                ]))
            try await store.recordSubscriptionReread(
                originalTransactionID: "reversible", revision: "7", at: Self.now.addingTimeInterval(-7_200))
            let listed = try await store.unsureSubscriptions(
                now: Self.now, lapsedSince: Self.at(days: -60), rereadBefore: Self.now.addingTimeInterval(-3_600),
                limit: 10)
            #expect(listed.map(\.originalTransactionID) == ["grace", "lapsed", "reversible"])
            #expect(listed.last?.revision == nil, "a reversal changes a transaction read before")
            // Re-read at most once per interval, like the others.
            try await store.recordSubscriptionReread(originalTransactionID: "reversible", revision: "8", at: Self.now)
            let soon = Self.now.addingTimeInterval(60)
            #expect(
                try await store.unsureSubscriptions(
                    now: soon, lapsedSince: soon.addingTimeInterval(-60 * 86_400),
                    rereadBefore: soon.addingTimeInterval(-3_600), limit: 10
                ).map(\.originalTransactionID) == ["grace", "lapsed"])
        }
    }
}
