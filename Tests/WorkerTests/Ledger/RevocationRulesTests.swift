import Foundation
import Messages
import Testing

@testable import Decision

/// Revocations in detail and Family Sharing through the pure rules, rule by rule (docs/LEDGER.md, "Revocations and
/// Family Sharing").
@Suite("Ledger rules: revocations and family sharing")
struct RevocationRulesTests {
    typealias F = LedgerFixtures

    static let purchaser = F.renewal("s1", purchased: F.days(-10), expires: F.days(20))
    static let full = Revocation(type: .refundFull, reason: 1)
    static let prorated = Revocation(type: .refundProrated, percentage: 25_000, reason: 0)
    static let familyRevoke = Revocation(type: .familyRevoke, reason: 0)

    /// A family member's transaction of the purchaser's subscription: its own transaction id, and (the rules do not
    /// rely on Apple giving the member an original id of its own) the purchaser's original id.
    static func member(_ id: String = "m1", revoked: Date? = nil, revocation: Revocation? = nil) -> PurchaseTransaction
    {
        var transaction = F.renewal(id, purchased: F.days(-10), expires: F.days(20), revoked: revoked)
        transaction.ownershipType = .familyShared
        transaction.revocation = revocation
        return transaction
    }

    static func claim(_ transaction: PurchaseTransaction, account: String) -> TransactionClaim {
        var claim = F.claim(transaction, account: account)
        claim.ownershipType = transaction.ownershipType
        claim.revocation = transaction.revokedAt == nil ? nil : transaction.revocation
        return claim
    }

    static func revoked(_ transaction: PurchaseTransaction, at: Date, _ revocation: Revocation) -> PurchaseTransaction {
        var transaction = transaction
        transaction.revokedAt = at
        transaction.revocation = revocation
        return transaction
    }

    static func decide(
        _ evidence: PurchaseEvidence, job: ReceiptJob, claims: [TransactionClaim]
    ) throws -> LedgerDecision {
        try #require(F.decision(F.decide(job, evidence, claims: claims, policy: F.policy(allowSandbox: true))))
    }

    static func notification(_ type: String, _ transaction: PurchaseTransaction) -> PurchaseEvidence {
        NotificationRulesTests.notification(type, [transaction], signed: F.days(0))
    }

    // MARK: R1-R3: what a refund or a revocation ends

    @Test("R1: REFUND with REFUND_FULL revokes the claim and records how; the verdict's transaction says so")
    func fullRefund() throws {
        let decision = try Self.decide(
            Self.notification("REFUND", Self.revoked(Self.purchaser, at: F.days(-1), Self.full)),
            job: F.notificationJob(), claims: [Self.claim(Self.purchaser, account: "acct-A")])
        #expect(decision.verdict.outcome == .rejected && decision.verdict.reason == .revoked)
        #expect(decision.writes.first == .revoke(transactionID: "s1", revokedAt: F.days(-1), revocation: Self.full))
        let stated = try #require(decision.verdict.transactions.first)
        #expect(stated.revokedAt == F.days(-1))
        #expect(stated.revocation == Self.full)
    }

    @Test("R2: REFUND_PRORATED is recorded with its percentage and ends the entitlement at the revocation date")
    func proratedRefund() throws {
        // The period runs 20 more days; Apple refunded the part left (25 %) and set `revocationDate`.
        let decision = try Self.decide(
            Self.notification("REFUND", Self.revoked(Self.purchaser, at: F.days(-1), Self.prorated)),
            job: F.notificationJob(), claims: [Self.claim(Self.purchaser, account: "acct-A")])
        #expect(decision.verdict.reason == .revoked, "access ends now, not at the period's end")
        #expect(
            decision.writes.first == .revoke(transactionID: "s1", revokedAt: F.days(-1), revocation: Self.prorated))
        #expect(decision.verdict.transactions.first?.revocation?.percentage == 25_000)
        // The same transaction verified again afterwards: the claim stays revoked, with its detail.
        var stored = Self.claim(Self.revoked(Self.purchaser, at: F.days(-1), Self.prorated), account: "acct-A")
        stored.revocation = Self.prorated
        let again = try Self.decide(F.apple([Self.purchaser]), job: F.job("job-9"), claims: [stored])
        #expect(again.verdict.reason == .revoked && again.writes.isEmpty)
        #expect(again.verdict.transactions.first?.revocation == Self.prorated)
    }

    @Test("R2: a verification that finds a prorated refund revokes the claim with its detail (rule 14)")
    func proratedRefundFoundByVerification() throws {
        let item = F.purchase("t1", product: "com.example.pro")
        var refunded = Self.revoked(item, at: F.days(-1), Self.prorated)
        refunded.ownershipType = .purchased
        let decision = try Self.decide(
            F.apple([refunded]), job: F.job("job-2"), claims: [F.claim(item, account: "acct-A")])
        #expect(decision.verdict.reason == .revoked)
        #expect(decision.writes == [.revoke(transactionID: "t1", revokedAt: F.days(-1), revocation: Self.prorated)])
        #expect(decision.verdict.transactions.first?.ownershipType == .purchased)
    }

    @Test("R3: REVOKE with FAMILY_REVOKE ends the member's claim only; the verdict is the member's")
    func familyRevoke() throws {
        let claims = [Self.claim(Self.purchaser, account: "acct-A"), Self.claim(Self.member(), account: "acct-M")]
        let decision = try Self.decide(
            Self.notification("REVOKE", Self.member(revoked: F.days(-1), revocation: Self.familyRevoke)),
            job: F.notificationJob(), claims: claims)
        #expect(decision.verdict.accountID == "acct-M")
        #expect(decision.verdict.reason == .revoked)
        #expect(
            decision.writes.first
                == .revoke(transactionID: "m1", revokedAt: F.days(-1), revocation: Self.familyRevoke))
        #expect(!decision.writes.contains { if case .revoke("s1", _, _) = $0 { true } else { false } })
        #expect(decision.verdict.transactions.first?.ownershipType == .familyShared)
        // The purchaser still has access.
        let purchaser = try Self.decide(F.local([Self.purchaser]), job: F.job("job-p"), claims: claims)
        #expect(purchaser.verdict.outcome == .alreadyGranted)
    }

    @Test("R3: a member's REVOKE the ledger never granted is the member's unclaimed notification, not the purchaser's")
    func familyRevokeOfUnknownMember() throws {
        let decision = try Self.decide(
            Self.notification("REVOKE", Self.member(revoked: F.days(-1), revocation: Self.familyRevoke)),
            job: F.notificationJob(), claims: [Self.claim(Self.purchaser, account: "acct-A")])
        #expect(decision.verdict.reason == .unclaimed)
        #expect(decision.writes.isEmpty)
    }

    // MARK: R4-R5: a family member's purchase

    @Test("R4: a FAMILY_SHARED transaction is granted to the member's account, not answered as a replay")
    func familySharedGranted() throws {
        let decision = try Self.decide(
            F.apple([Self.member()]), job: F.job("job-m", account: "acct-M"),
            claims: [Self.claim(Self.purchaser, account: "acct-A")])
        #expect(decision.verdict.outcome == .granted)
        #expect(decision.verdict.accountID == "acct-M")
        guard case .claim(let claim) = decision.writes.first else {
            Issue.record("expected a claim, got \(decision.writes)")
            return
        }
        #expect(claim.accountID == "acct-M" && claim.transactionID == "m1" && claim.ownershipType == .familyShared)
        #expect(decision.verdict.transactions.first?.ownershipType == .familyShared)
    }

    @Test("R4: a member's transaction tagged with the purchaser's app account token is still the member's")
    func familySharedKeepsPurchasersToken() throws {
        var member = Self.member()
        member.appAccountToken = AppAccountToken.derived(fromAccountID: "acct-A")
        let decision = try Self.decide(
            F.apple([member]), job: F.job("job-m", account: "acct-M"),
            claims: [Self.claim(Self.purchaser, account: "acct-A")])
        #expect(decision.verdict.outcome == .granted && decision.verdict.accountID == "acct-M")
    }

    @Test("R5: a member's transaction sent again by another account is a replay; by the member, a repeat")
    func familySharedReplay() throws {
        let claims = [Self.claim(Self.purchaser, account: "acct-A"), Self.claim(Self.member(), account: "acct-M")]
        let other = try Self.decide(F.apple([Self.member()]), job: F.job("job-x", account: "acct-X"), claims: claims)
        #expect(other.verdict.reason == .replayed)
        let repeated = try Self.decide(
            F.apple([Self.member()]), job: F.job("job-m2", account: "acct-M"), claims: claims)
        #expect(repeated.verdict.outcome == .alreadyGranted)
        // The purchaser's own transaction sent by the member's account is still a replay of the purchaser's.
        let purchasers = try Self.decide(
            F.apple([Self.purchaser]), job: F.job("job-y", account: "acct-M"), claims: claims)
        #expect(purchasers.verdict.reason == .replayed)
    }

    // MARK: R6-R7: reversal and a detail learnt late

    @Test("R6: REFUND_REVERSED clears the revocation and its detail")
    func reversalClearsDetail() throws {
        let refunded = Self.revoked(Self.purchaser, at: F.days(-1), Self.prorated)
        let decision = try Self.decide(
            Self.notification("REFUND_REVERSED", Self.purchaser), job: F.notificationJob(),
            claims: [Self.claim(refunded, account: "acct-A")])
        #expect(decision.verdict.outcome == .alreadyGranted)
        #expect(decision.writes.first == .reinstate(transactionID: "s1"))
        #expect(decision.verdict.transactions.first?.revocation == nil)
        #expect(decision.verdict.transactions.first?.revokedAt == nil)
    }

    @Test("R7: a claim revoked without detail (verifyReceipt, a re-read) gets it from the REFUND notification")
    func detailAddedLater() throws {
        var bare = Self.purchaser
        bare.revokedAt = F.days(-2)
        let decision = try Self.decide(
            Self.notification("REFUND", Self.revoked(Self.purchaser, at: F.days(-2), Self.full)),
            job: F.notificationJob(), claims: [F.claim(bare, account: "acct-A")])
        #expect(decision.writes.first == .revoke(transactionID: "s1", revokedAt: F.days(-2), revocation: Self.full))
    }

    @Test("Apple's answer shared through a verification lease keeps the revocation detail and the ownership type")
    func evidenceJSON() {
        let at = Date(timeIntervalSince1970: 1_800_000_000)
        var member = PurchaseTransaction(
            transactionID: "m1", originalTransactionID: "m0", productID: "com.example.monthly", purchaseDate: at,
            expiresDate: at.addingTimeInterval(86_400), revokedAt: at, revocation: Self.familyRevoke,
            ownershipType: .familyShared)
        let evidence = F.apple([member])
        #expect(PurchaseEvidence(jsonText: evidence.jsonText()) == evidence)
        member.revocation = Self.prorated
        member.ownershipType = .purchased
        #expect(PurchaseEvidence(jsonText: F.apple([member]).jsonText()) == F.apple([member]))
    }

    // MARK: Bad input

    @Test("a revocationPercentage outside 0...100000 milliunits is not Apple's: dropped, never stored")
    func percentageOutOfRange() {
        #expect(Revocation(type: .refundProrated, percentage: 100_001).percentage == nil)
        #expect(Revocation(type: .refundProrated, percentage: -5).percentage == nil)
        #expect(Revocation(type: .refundProrated, percentage: 100_000).percentage == 100_000)
        #expect(Revocation(percentage: 200_000).nonEmpty == nil)
    }
}
