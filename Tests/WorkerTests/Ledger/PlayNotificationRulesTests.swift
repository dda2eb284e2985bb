import Foundation
import Messages
import Testing

@testable import Decision

/// Each Google Play notification transition of docs/LEDGER.md ("Google Play notifications") through the pure rules:
/// the purchase as Google answered it again, applied to the token's owner.
@Suite("Ledger rules: Google Play notifications")
struct PlayNotificationRulesTests {
    typealias F = LedgerFixtures

    static let package = "com.example.play"
    static let monthly = "gold_monthly"
    static let premium = "premium_unlock"
    static let token = "tok-sub"
    static let catalog = Catalog(
        playApps: [.init(packageName: package, licensingKeyFile: "/dev/null", serviceAccountKeyFile: "/dev/null")],
        playProducts: [
            .init(id: monthly, type: .autoRenewable, basePlans: ["monthly"]), .init(id: premium, type: .nonConsumable),
        ])
    static let policy = DecisionPolicy(allowSandbox: false, now: F.now, catalog: catalog)

    /// A notification job: its account is the reserved one, never the owner's.
    static func job(_ id: String = "1", token: String = token) -> ReceiptJob {
        GooglePlayNotificationJob.job(
            packageName: package, purchaseToken: token, notification: nil, messageID: id, submittedAt: F.now)
    }

    /// A period of the subscription `token` as Google answers it.
    static func period(
        _ order: String, token: String = token, started: Date = F.days(-40), expires: Date, grace: Date? = nil,
        billingRetry: Bool = false, linked: String? = nil, revoked: Date? = nil, paused: Bool = false
    ) -> PurchaseTransaction {
        PurchaseTransaction(
            transactionID: order, originalTransactionID: token, productID: monthly, productType: .autoRenewable,
            purchaseDate: started, expiresDate: expires, revokedAt: revoked, gracePeriodExpiresDate: grace,
            isInBillingRetry: billingRetry, hasRenewalInfo: true, linkedSubscriptionKey: linked, orderID: order,
            purchaseToken: token, isPaused: paused)
    }

    static func oneTime(_ order: String, token: String, revoked: Date? = nil) -> PurchaseTransaction {
        PurchaseTransaction(
            transactionID: order, originalTransactionID: token, productID: premium, purchaseDate: F.days(-3),
            revokedAt: revoked, orderID: order, purchaseToken: token)
    }

    static func evidence(
        _ transactions: [PurchaseTransaction], _ kind: PlayNotification.Kind = .restates, token: String? = token,
        readAt: Date = F.now, autoRenew: Bool? = nil, voided: String? = nil, review: PlayRefundReview? = nil,
        eventTime: Date? = nil
    ) -> PurchaseEvidence {
        var evidence = PurchaseEvidence(
            source: .apple, authenticity: .authentic, environment: .production, bundleID: package,
            transactions: transactions, store: .googlePlay)
        evidence.playNotification = PlayNotification(
            kind: kind, purchaseToken: token, eventTime: eventTime, readAt: readAt, autoRenew: autoRenew,
            voidedOrderID: voided, refundReview: review)
        return evidence
    }

    static func claim(
        _ transaction: PurchaseTransaction, account: String = "acct-A", read: Date? = nil
    )
        -> TransactionClaim
    {
        var claim = F.claim(transaction, account: account, type: transaction.productType ?? .nonConsumable)
        claim.bundleID = package
        claim.notificationSignedAt = read
        return claim
    }

    static let current = Self.period("GPA.1", expires: F.days(5))
    static let owned = [claim(current, read: F.days(-1))]

    static func decide(
        _ evidence: PurchaseEvidence, claims: [TransactionClaim] = owned, job: ReceiptJob = job(),
        pending: PendingPlayPurchase? = nil
    ) throws -> LedgerDecision {
        let result = DecisionRules.decide(
            DecisionInput(
                job: job, evidence: evidence,
                snapshot: LedgerSnapshot(claims: claims, pendingPlayPurchase: pending), policy: policy))
        return try #require(F.decision(result))
    }

    static func record(_ read: Date = F.now, autoRenew: Bool? = nil, token: String = token) -> LedgerWrite {
        .recordNotification(originalTransactionID: token, signedAt: read, autoRenew: autoRenew)
    }

    @Test("renewed, recovered, restarted: a new order is a new claim for the token's owner, the verdict is theirs")
    func renewed() throws {
        let renewal = Self.period("GPA.1..0", started: F.days(-40), expires: F.days(35))
        let decision = try Self.decide(Self.evidence([renewal], autoRenew: true))
        #expect(decision.verdict.accountID == "acct-A")
        #expect(decision.verdict.outcome == .granted)
        #expect(decision.verdict.decidedBy == .googlePlay)
        #expect(decision.verdict.transactions.first?.orderID == "GPA.1..0")
        guard case .claim(let claim) = decision.writes.first else {
            Issue.record("no claim: \(decision.writes)")
            return
        }
        #expect(claim.accountID == "acct-A" && claim.originalTransactionID == Self.token)
        #expect(claim.expiresDate == F.days(35))
        #expect(decision.writes.last == Self.record(autoRenew: true))
        // The same order again (a redelivered RENEWED under another message id): nothing new to claim.
        let again = try Self.decide(Self.evidence([renewal]), claims: Self.owned + [Self.claim(renewal)])
        #expect(again.verdict.outcome == .alreadyGranted)
        #expect(again.writes == [Self.record()])
    }

    @Test("in grace period: access continues to the grace end, billing retry stated on the verdict")
    func gracePeriod() throws {
        let grace = Self.period("GPA.1", expires: F.days(3), grace: F.days(3), billingRetry: true)
        let decision = try Self.decide(Self.evidence([grace]))
        #expect(decision.verdict.outcome == .alreadyGranted)
        let item = try #require(decision.verdict.transactions.first)
        #expect(item.inBillingRetry == true)
        #expect(item.gracePeriodExpiresDate == F.days(3))
        #expect(
            decision.writes == [
                .extendSubscription(transactionID: "GPA.1", expiresDate: nil, gracePeriodExpiresDate: F.days(3)),
                Self.record(),
            ])
    }

    @Test("on hold and paused: no access, not revoked; cancelled: auto-renew off, access until the expiry")
    func holdPauseCancel() throws {
        let lapsed = [Self.claim(Self.period("GPA.1", expires: F.days(-1)), read: F.days(-2))]
        let hold = try Self.decide(
            Self.evidence([Self.period("GPA.1", expires: F.days(-1), billingRetry: true)]), claims: lapsed)
        #expect(hold.verdict.outcome == .rejected && hold.verdict.reason == .expired)
        #expect(hold.verdict.transactions.first?.revokedAt == nil)
        #expect(hold.verdict.transactions.first?.inBillingRetry == true)
        #expect(hold.writes == [Self.record()])
        #expect(hold.verdict.transactions.first?.paused == false)
        let paused = try Self.decide(
            Self.evidence([Self.period("GPA.1", expires: F.days(-1), paused: true)]), claims: lapsed)
        #expect(paused.verdict.reason == .expired && paused.verdict.transactions.first?.inBillingRetry == false)
        #expect(paused.verdict.transactions.first?.paused == true)

        let cancelled = try Self.decide(Self.evidence([Self.current], autoRenew: false))
        #expect(cancelled.verdict.outcome == .alreadyGranted)
        #expect(cancelled.writes == [Self.record(autoRenew: false)])
    }

    @Test("revoked: access ends now, every claim of the token revoked")
    func revoked() throws {
        let earlier = Self.period("GPA.0", started: F.days(-70), expires: F.days(-40))
        let claims = [Self.claim(earlier)] + Self.owned
        let decision = try Self.decide(
            Self.evidence([Self.period("GPA.1", expires: F.now)], .revoked, eventTime: F.days(-0.01)), claims: claims)
        #expect(decision.verdict.outcome == .rejected && decision.verdict.reason == .revoked)
        #expect(decision.verdict.accountID == "acct-A")
        #expect(decision.writes.contains(.revoke(transactionID: "GPA.1", revokedAt: F.days(-0.01))))
        #expect(decision.writes.contains(.revoke(transactionID: "GPA.0", revokedAt: F.days(-0.01))))
    }

    @Test("expired and a pending purchase cancelled: rejected / expired, nothing revoked")
    func expired() throws {
        // The ledger held the period as current until day 5; Google says it ended: it ends now.
        let decision = try Self.decide(Self.evidence([Self.period("GPA.1", expires: F.days(-1))]))
        #expect(decision.verdict.reason == .expired)
        #expect(decision.verdict.transactions.first?.expiresDate == F.days(-1))
        #expect(decision.writes == [.endSubscription(originalTransactionID: Self.token, at: F.now), Self.record()])
    }

    @Test("items changed: the new token's linkedPurchaseToken moves the entitlement to the old owner; the old ends")
    func itemsChanged() throws {
        let upgraded = Self.period(
            "GPA.2", token: "tok-new", started: F.days(0), expires: F.days(30), linked: Self.token)
        let decision = try Self.decide(
            Self.evidence([upgraded], .itemsChanged, token: "tok-new"), job: Self.job(token: "tok-new"))
        #expect(decision.verdict.accountID == "acct-A")
        #expect(decision.verdict.outcome == .granted)
        #expect(decision.writes.first == .endSubscription(originalTransactionID: Self.token, at: F.now))
        guard case .claim(let claim) = decision.writes.dropFirst().first else {
            Issue.record("no claim: \(decision.writes)")
            return
        }
        #expect(claim.accountID == "acct-A" && claim.originalTransactionID == "tok-new")
        // The verdict states the replaced period ended, for its consumers.
        let replaced = try #require(decision.verdict.transactions.first { $0.purchaseToken == Self.token })
        #expect(replaced.transactionID == "GPA.1" && replaced.expiresDate == F.now)
    }

    @Test("one-time PURCHASED of a pending purchase: granted to the account that sent it, nothing else claims")
    func pendingCompleted() throws {
        let purchase = Self.oneTime("GPA.9", token: "tok-pending")
        let pending = PendingPlayPurchase(
            purchaseToken: "tok-pending", accountID: "acct-P", jobID: "job-p", packageName: Self.package,
            productID: Self.premium, recordedAt: F.days(-1))
        let decision = try Self.decide(
            Self.evidence([purchase], token: "tok-pending"), claims: [], job: Self.job(token: "tok-pending"),
            pending: pending)
        #expect(decision.verdict.outcome == .granted)
        #expect(decision.verdict.accountID == "acct-P")
        guard case .claim(let claim) = decision.writes.first else {
            Issue.record("no claim: \(decision.writes)")
            return
        }
        #expect(claim.accountID == "acct-P" && claim.transactionID == "GPA.9")
        // Without a pending record, a token the ledger never saw is unclaimed.
        let unknown = try Self.decide(
            Self.evidence([purchase], token: "tok-pending"), claims: [], job: Self.job(token: "tok-pending"))
        #expect(unknown.verdict.outcome == .rejected && unknown.verdict.reason == .unclaimed)
        #expect(unknown.verdict.accountID == "google-play-notification")
        #expect(unknown.writes.isEmpty)
    }

    @Test("a verification job that finds a purchase pending remembers who sent it")
    func pendingRecorded() throws {
        var evidence = PurchaseEvidence(source: .apple, authenticity: .unknown, store: .googlePlay)
        evidence.rejection = .purchasePending
        let job = ReceiptJob(
            jobID: "job-p", accountID: "acct-P",
            proof: .googlePlay(
                GooglePlayPurchase(packageName: Self.package, productID: Self.premium, purchaseToken: "tok-p")))
        let decision = try Self.decide(evidence, claims: [], job: job)
        #expect(decision.verdict.reason == .purchasePending)
        #expect(
            decision.writes == [
                .recordPendingPurchase(
                    PendingPlayPurchase(
                        purchaseToken: "tok-p", accountID: "acct-P", jobID: "job-p", packageName: Self.package,
                        productID: Self.premium, recordedAt: decision.verdict.decidedAt))
            ])
    }

    @Test("one-time CANCELED and a voided purchase: the order's claim revoked")
    func oneTimeCanceledAndVoided() throws {
        let bought = Self.oneTime("GPA.5", token: "tok-one")
        let claims = [Self.claim(bought)]
        let cancelled = try Self.decide(
            Self.evidence([Self.oneTime("GPA.5", token: "tok-one", revoked: F.now)], token: "tok-one"), claims: claims,
            job: Self.job(token: "tok-one"))
        #expect(cancelled.verdict.reason == .revoked)
        #expect(cancelled.writes.first == .revoke(transactionID: "GPA.5", revokedAt: F.now))

        // Voided while Google's read still says PURCHASED (the voided list is the truth about the order).
        let voided = try Self.decide(
            Self.evidence([bought], .voided, token: "tok-one", voided: "GPA.5", eventTime: F.days(-0.5)),
            claims: claims, job: Self.job(token: "tok-one"))
        #expect(voided.verdict.reason == .revoked)
        #expect(voided.writes.first == .revoke(transactionID: "GPA.5", revokedAt: F.days(-0.5)))

        // A subscription's earlier order voided: that order only.
        let earlier = Self.period("GPA.0", started: F.days(-70), expires: F.days(-40))
        let subscription = try Self.decide(
            Self.evidence([Self.current], .voided, voided: "GPA.0", eventTime: F.days(-0.5)),
            claims: [Self.claim(earlier)] + Self.owned)
        #expect(subscription.verdict.outcome == .alreadyGranted)
        #expect(subscription.writes == [.revoke(transactionID: "GPA.0", revokedAt: F.days(-0.5)), Self.record()])
    }

    @Test("a pending refund review is recorded with its 24-hour deadline; the verdict restates the purchase")
    func refundReview() throws {
        let review = PlayRefundReview(
            pendingRefundToken: "prt-1", purchaseToken: Self.token, orderID: "GPA.1", packageName: Self.package,
            eventAt: F.days(-0.1), jobID: "google-play-notification-1")
        #expect(review.deadline == F.days(-0.1).addingTimeInterval(86_400))
        let decision = try Self.decide(Self.evidence([Self.current], .refundReview, review: review))
        #expect(decision.verdict.outcome == .alreadyGranted)
        #expect(decision.writes == [.recordRefundReview(review), Self.record()])
    }

    @Test("a test notification and a notification naming nothing: notification_recorded, nothing written")
    func testNotification() throws {
        let decision = try Self.decide(Self.evidence([], .test, token: nil))
        #expect(decision.verdict.outcome == .rejected && decision.verdict.reason == .notificationRecorded)
        #expect(decision.writes.isEmpty)
    }

    @Test("a late read (older than the one applied to the token) is answered from the ledger and writes nothing")
    func staleRead() throws {
        // The ledger applied a read at `now` showing the subscription revoked; a job whose read was taken before it,
        // when it was active, is decided after it.
        let revokedClaim = [
            Self.claim(Self.period("GPA.1", expires: F.days(5), revoked: F.days(-0.5)), read: F.now)
        ]
        let decision = try Self.decide(
            Self.evidence([Self.current], readAt: F.days(-0.6)), claims: revokedClaim)
        #expect(decision.verdict.outcome == .rejected && decision.verdict.reason == .revoked)
        #expect(decision.verdict.decidedBy == .ledger)
        #expect(decision.writes.isEmpty)
        #expect(decision.verdict.transactions.first?.revokedAt == F.days(-0.5))
    }

    @Test("a late old notification re-read now applies today's state, never the state of its event time")
    func lateOldNotification() throws {
        // RENEWED of a month ago arrives after the subscription was revoked: the read shows it revoked.
        let revokedClaim = [
            Self.claim(Self.period("GPA.1", expires: F.days(5), revoked: F.days(-0.5)), read: F.days(-0.5))
        ]
        let decision = try Self.decide(
            Self.evidence(
                [Self.period("GPA.1", expires: F.days(5), revoked: F.days(-0.5))], eventTime: F.days(-30)),
            claims: revokedClaim)
        #expect(decision.verdict.reason == .revoked)
        #expect(!decision.writes.contains { if case .claim = $0 { true } else { false } })
        #expect(decision.writes == [Self.record()])
    }

    @Test("a type Google adds later restates the purchase, as an unknown App Store type does")
    func unknownType() throws {
        var evidence = Self.evidence([Self.current])
        evidence.playNotification?.googleType = "SUBSCRIPTION_SOMETHING_NEW"
        let decision = try Self.decide(evidence)
        #expect(decision.verdict.outcome == .alreadyGranted && decision.verdict.accountID == "acct-A")
    }

    @Test("an unknown package is wrong_bundle, an unknown product unknown_product: nothing written")
    func badInput() throws {
        var other = Self.evidence([Self.current])
        other.bundleID = "com.other.app"
        let wrong = try Self.decide(other)
        #expect(wrong.verdict.reason == .wrongBundle && wrong.writes.isEmpty)
        var unknownProduct = Self.current
        unknownProduct.productID = "not_sold"
        let unknown = try Self.decide(Self.evidence([unknownProduct]))
        #expect(unknown.verdict.reason == .unknownProduct && unknown.writes.isEmpty)
    }
}
