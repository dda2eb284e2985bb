import Foundation
import Messages
import Testing

@testable import Chaos

/// Google Play's invariants on synthetic runs: a clean one passes, and a double acknowledge, a lost Play job, a
/// double grant, a refund and junk granted are each found.
@Suite("Chaos: Google Play invariant checker")
struct ChaosPlayCheckerTests {
    static let decidedAt = Date(timeIntervalSince1970: 1_800_000_000)

    static let premium = ChaosPlayPurchase(
        token: "premium-token", packageName: ChaosPlayApp.packageName, productID: "premium", type: .nonConsumable,
        orderID: "GPA.1111-1111-1111-11111")
    static let coins = ChaosPlayPurchase(
        token: "coins-token", packageName: ChaosPlayApp.packageName, productID: "coins", type: .consumable,
        orderID: "GPA.2222-2222-2222-22222")
    static let monthly = ChaosPlayPurchase(
        token: "monthly-token", packageName: ChaosPlayApp.packageName, productID: "monthly", type: .autoRenewable,
        orderID: "GPA.3333-3333-3333-33333")
    static let forged = ChaosPlayPurchase(
        token: "forged-token", packageName: ChaosPlayApp.packageName, productID: "premium", type: .nonConsumable,
        orderID: "GPA.4444-4444-4444-44444")
    static let purchases = [premium, coins, monthly, forged]

    static let jobs = [
        ChaosSubmittedJob(
            jobID: "p1", accountID: "alice", grantableTransactionID: premium.orderID, category: "play_one_time"),
        ChaosSubmittedJob(
            jobID: "p2", accountID: "bob", grantableTransactionID: premium.orderID,
            category: "play_replay_other_account"),
        ChaosSubmittedJob(
            jobID: "c1", accountID: "carol", grantableTransactionID: coins.orderID, category: "play_consumable"),
        ChaosSubmittedJob(
            jobID: "s1", accountID: "dave", grantableTransactionID: monthly.orderID, category: "play_subscription"),
        ChaosSubmittedJob(jobID: "f1", accountID: "erin", category: "play_forged_signature"),
    ]

    static func verdict(
        _ jobID: String, _ account: String, _ outcome: Verdict.Outcome, _ reason: Verdict.Reason? = nil,
        _ purchase: ChaosPlayPurchase? = nil, orderID: String? = nil
    ) -> Verdict {
        let transactions = purchase.map { purchase in
            var transaction = Verdict.Transaction(
                transactionID: orderID ?? purchase.orderID ?? "", productID: purchase.productID)
            transaction.orderID = orderID ?? purchase.orderID
            transaction.purchaseToken = purchase.token
            return [transaction]
        }
        return Verdict(
            verdictID: "verdict-" + jobID, jobID: jobID, accountID: account, outcome: outcome, reason: reason,
            decidedBy: .googlePlay, store: .googlePlay, transactions: transactions ?? [], decidedAt: decidedAt)
    }

    static let clean: [Verdict] = [
        verdict("p1", "alice", .granted, nil, premium),
        verdict("p2", "bob", .rejected, .replayed),
        verdict("c1", "carol", .granted, nil, coins),
        verdict("s1", "dave", .granted, nil, monthly),
        verdict("f1", "erin", .rejected, .notAuthenticated),
        // A redelivery: the first verdict counts.
        verdict("p1", "alice", .granted, nil, premium),
    ]

    static let cleanTruths: [String: ChaosPlayPurchaseTruth] = [
        premium.token: ChaosPlayPurchaseTruth(state: "purchased", acknowledgeCalls: 1),
        coins.token: ChaosPlayPurchaseTruth(state: "purchased", consumeCalls: 1),
        monthly.token: ChaosPlayPurchaseTruth(state: "active", acknowledgeCalls: 1),
        forged.token: ChaosPlayPurchaseTruth(state: "purchased"),
    ]

    static let checker = ChaosPlayChecker(jobs: jobs, purchases: purchases)

    func kinds(_ verdicts: [Verdict], truths: [String: ChaosPlayPurchaseTruth] = cleanTruths) -> [String] {
        Self.checker.check(verdicts: verdicts, truths: truths).violations.map(\.kind)
    }

    @Test("A clean run: no violation; grants acknowledged or consumed once are counted")
    func clean() {
        let (violations, report) = Self.checker.check(verdicts: Self.clean, truths: Self.cleanTruths)
        #expect(violations.isEmpty)
        #expect(report.jobs == 5)
        #expect(report.jobsDecided == 5)
        #expect(report.lost == 0)
        #expect(report.purchasesMinted == 4)
        #expect(report.purchasesGranted == 3)
        #expect(report.acknowledgedOnce == 2)
        #expect(report.consumedOnce == 1)
        #expect(report.outcomes == ["granted": 3, "rejected": 2])
        #expect(Self.checker.grantedTokens(Self.clean) == [Self.premium.token, Self.coins.token, Self.monthly.token])
    }

    @Test("A granted purchase acknowledged twice (a crash's sweep repeating a call that had reached Google)")
    func doubleAcknowledge() {
        var truths = Self.cleanTruths
        truths[Self.premium.token]?.acknowledgeCalls = 2
        #expect(kinds(Self.clean, truths: truths) == ["play_acknowledgements"])
    }

    @Test("A granted consumable acknowledged instead of consumed, or never consumed")
    func consumableNotConsumed() {
        var truths = Self.cleanTruths
        truths[Self.coins.token] = ChaosPlayPurchaseTruth(state: "purchased", acknowledgeCalls: 1)
        #expect(kinds(Self.clean, truths: truths) == ["play_acknowledgements"])
        truths[Self.coins.token] = ChaosPlayPurchaseTruth(state: "purchased")
        #expect(kinds(Self.clean, truths: truths) == ["play_acknowledgements"])
    }

    @Test("A purchase acknowledged without a grant, and a grant Google Play does not know")
    func acknowledgedWithoutGrant() {
        var truths = Self.cleanTruths
        truths[Self.forged.token]?.acknowledgeCalls = 1
        #expect(kinds(Self.clean, truths: truths) == ["play_acknowledgements"])
        truths = Self.cleanTruths
        truths[Self.monthly.token] = nil
        #expect(kinds(Self.clean, truths: truths) == ["play_acknowledgements"])
    }

    @Test("A lost Play job: counted here, and a missing verdict for the general check")
    func lostJob() {
        let verdicts = Self.clean.filter { $0.jobID != "f1" }
        let (violations, report) = Self.checker.check(verdicts: verdicts, truths: Self.cleanTruths)
        #expect(violations.isEmpty)
        #expect(report.lost == 1)
        #expect(report.jobsDecided == 4)
        let general = ChaosInvariantChecker(jobs: Self.jobs, malformedKeys: [])
            .check(verdicts: verdicts, deadLetters: [], ledger: nil).violations
        #expect(general == [.missingVerdict(jobID: "f1")])
    }

    @Test("A one-time purchase granted to two accounts (its order id)")
    func doubleGrantOneTime() {
        var verdicts = Self.clean
        verdicts[1] = Self.verdict("p2", "bob", .granted, nil, Self.premium)
        #expect(kinds(verdicts) == ["play_granted_twice"])
    }

    @Test("A subscription granted twice under two order ids (its token): only Google Play's identity sees it")
    func doubleGrantSubscription() {
        let jobs =
            Self.jobs + [
                ChaosSubmittedJob(
                    jobID: "s2", accountID: "frank", grantableTransactionID: "GPA.3333-3333-3333-33333..0",
                    category: "play_replay_other_account")
            ]
        let verdicts =
            Self.clean + [
                Self.verdict("s2", "frank", .granted, nil, Self.monthly, orderID: "GPA.3333-3333-3333-33333..0")
            ]
        let checker = ChaosPlayChecker(jobs: jobs, purchases: Self.purchases)
        let found = checker.check(verdicts: verdicts, truths: Self.cleanTruths).violations
        #expect(found.map(\.kind) == ["play_granted_twice"])
        let general = ChaosInvariantChecker(jobs: jobs, malformedKeys: [])
            .check(verdicts: verdicts, deadLetters: [], ledger: nil).violations
        #expect(!general.contains { $0.kind == "granted_twice" || $0.kind == "granted_to_several_accounts" })
    }

    @Test("A purchase refunded by Google Play's three days")
    func refunded() {
        var truths = Self.cleanTruths
        truths[Self.premium.token] = ChaosPlayPurchaseTruth(
            state: "refunded", acknowledgeCalls: 1, refundedAtMs: 1_800_000_000_000)
        #expect(kinds(Self.clean, truths: truths) == ["play_refunded"])
    }

    @Test("A forged purchase granted: junk, found by the general check")
    func forgedGranted() {
        var verdicts = Self.clean
        verdicts[4] = Self.verdict("f1", "erin", .granted, nil, Self.forged)
        let general = ChaosInvariantChecker(jobs: Self.jobs, malformedKeys: [])
            .check(verdicts: verdicts, deadLetters: [], ledger: nil).violations
        #expect(general.map(\.kind).contains("inauthentic_granted"))
        // Granted, it must also have been acknowledged once.
        #expect(kinds(verdicts) == ["play_acknowledgements"])
    }

}
