import Foundation
import Messages
import Testing

@testable import Decision
@testable import Ledger
@testable import Worker

/// A subscription stands as its latest transaction does (Apple's status of the subscription), never as the union of
/// its periods: an earlier period whose stored end is later than the latest period's does not keep access on.
@Suite("Ledger rules: a subscription is its latest transaction")
struct SubscriptionStatusRulesTests {
    typealias F = LedgerFixtures
    typealias N = NotificationRulesTests

    /// The earlier period, stored with an end later than the latest period's (extended, or kept when a later
    /// statement of Apple's dates was earlier: the ledger moves dates only later).
    static let earlier = F.renewal("p1", purchased: F.days(-40), expires: F.days(30))

    static func latest(expires: Date, revoked: Date? = nil, billingRetry: Bool = false) -> PurchaseTransaction {
        F.renewal("p2", purchased: F.days(-20), expires: expires, revoked: revoked, billingRetry: billingRetry)
    }

    static func claims(_ latest: PurchaseTransaction) -> [TransactionClaim] {
        [F.claim(earlier, account: "acct-A"), F.claim(latest, account: "acct-A")]
    }

    @Test("(a) billing retry then expiry of the latest period: a receipt of the earlier period is expired")
    func billingRetryThenExpiry() throws {
        let latest = Self.latest(expires: F.days(-2), billingRetry: true)
        let decision = try #require(
            F.decision(F.decide(F.job("job-9"), F.apple([Self.earlier, latest]), claims: Self.claims(latest))))
        #expect(decision.verdict.outcome == .rejected)
        #expect(decision.verdict.reason == .expired)
        #expect(!TransactionClaim.subscriptionIsActive(Self.claims(latest), at: F.now))
        #expect(TransactionClaim.latest(of: Self.claims(latest))?.transactionID == "p2")
    }

    @Test("(b) the latest period expired early: the ledger alone does not call the subscription current")
    func earlyExpiry() throws {
        let latest = Self.latest(expires: F.days(-1))
        // A receipt of the earlier period, not yet authenticated: the ledger knows no current period, Apple decides.
        #expect(F.decision(F.decide(F.job("job-9"), F.local([Self.earlier]), claims: Self.claims(latest))) == nil)
        // Another account's purchase of it is not a replay of a current period: only Apple's new period moves it.
        let other = F.decide(F.job("job-8", account: "acct-B"), F.local([Self.earlier]), claims: Self.claims(latest))
        #expect(F.decision(other) == nil)
    }

    @Test("(c) refund of the latest period of a resubscribed subscription: a late notification answers revoked")
    func refundOfLatest() throws {
        let latest = Self.latest(expires: F.days(10), revoked: F.days(-1))
        var claims = Self.claims(latest)
        for index in claims.indices { claims[index].notificationSignedAt = F.days(-1) }
        let late = try N.decide(N.notification("REFUND_DECLINED", [Self.earlier], signed: F.days(-3)), claims: claims)
        #expect(late.verdict.outcome == .rejected)
        #expect(late.verdict.reason == .revoked)
        #expect(LedgerShow.subscriptionState(of: claims, at: F.now) == "revoked")
        #expect(LedgerShow.state(of: claims[0], at: F.now) == "active", "the earlier period's own dates stand")
    }

    @Test("(d) an extended earlier period with a later expired period: a restating notification answers expired")
    func extendedEarlierPeriod() throws {
        let latest = Self.latest(expires: F.days(-1))
        let decision = try N.decide(
            N.notification("REFUND_DECLINED", [Self.earlier], signed: F.days(0)), claims: Self.claims(latest))
        #expect(decision.verdict.outcome == .rejected)
        #expect(decision.verdict.reason == .expired)
        #expect(LedgerShow.subscriptionState(of: Self.claims(latest), at: F.now) == "expired")
    }

    @Test("a verdict states the renewal info Apple gave on the subscription's latest transaction only")
    func renewalInfoInTheVerdict() throws {
        var current = F.renewal("p3", purchased: F.days(-5), expires: F.days(25))
        current.hasRenewalInfo = true
        let extended = try N.decide(
            N.notification("RENEWAL_EXTENDED", [current], signed: F.days(0)),
            claims: [F.claim(F.renewal("p3", purchased: F.days(-5), expires: F.days(20)), account: "acct-A")])
        #expect(extended.verdict.transactions.map(\.inBillingRetry) == [false])
        #expect(extended.verdict.transactions.first?.gracePeriodExpiresDate == nil)

        var failing = F.renewal("p3", purchased: F.days(-5), expires: F.days(-1), grace: F.days(2), billingRetry: true)
        failing.hasRenewalInfo = true
        let retry = try N.decide(
            N.notification("DID_FAIL_TO_RENEW", [failing], subtype: "GRACE_PERIOD", signed: F.days(0)),
            claims: [F.claim(F.renewal("p3", purchased: F.days(-5), expires: F.days(-1)), account: "acct-A")])
        #expect(retry.verdict.transactions.first?.inBillingRetry == true)
        #expect(retry.verdict.transactions.first?.gracePeriodExpiresDate == F.days(2))

        // A receipt listing two periods: only the latest carries it; without renewal info nothing is stated.
        var older = F.renewal("p1", purchased: F.days(-40), expires: F.days(-10))
        older.hasRenewalInfo = true
        let receipt = try #require(
            F.decision(F.decide(F.job("job-7"), F.apple([older, current]))))
        #expect(receipt.verdict.transactions.map(\.inBillingRetry) == [nil, false])
        let plain = try #require(
            F.decision(F.decide(F.job("job-6"), F.apple([F.renewal("p5", purchased: F.days(-1), expires: F.days(29))])))
        )
        #expect(plain.verdict.transactions.map(\.inBillingRetry) == [nil])
    }
}
