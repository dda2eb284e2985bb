import Decision
import Foundation
import Messages
import Testing

@testable import AppleClients
@testable import Reconciler

/// The reconciler's corrections are the rules' own writes: for the same facts (a transaction as Apple's history
/// states it, the ledger's claims), a correction job is published exactly when the rules, deciding Apple's answer
/// for the owner under that job's id, would write something for that transaction. A refund reversed is written only
/// under a reversal correction's id: from a transaction's state alone, in any other job, never.
@Suite("Reconciler: corrections come from the decision rules")
struct CorrectionRulesTests {
    typealias R = NotificationReconciler<ContinuousClock>

    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let day: TimeInterval = 86_400

    static func stated(_ id: String, expires: Date, revoked: Date? = nil) -> SignedTransaction {
        SignedTransaction(
            transactionID: id, originalTransactionID: "sub-1", bundleID: "com.example.app",
            productID: "com.example.monthly", purchaseDate: expires.addingTimeInterval(-30 * day), expiresDate: expires,
            type: "Auto-Renewable Subscription", revocationDate: revoked, environment: .production)
    }

    static func claim(_ id: String, expires: Date, revoked: Date? = nil) -> TransactionClaim {
        TransactionClaim(
            transactionID: id, originalTransactionID: "sub-1", accountID: "acct-1", productID: "com.example.monthly",
            productType: .autoRenewable, bundleID: "com.example.app", environment: "Production",
            purchaseDate: expires.addingTimeInterval(-30 * day), expiresDate: expires, revokedAt: revoked,
            grantedJobID: "job-\(id)", verdictID: "verdict-\(id)", createdAt: expires, updatedAt: expires)
    }

    /// Whether the rules, deciding Apple's authentic answer with `transaction` for the owner in the job `jobID`,
    /// write anything for it.
    static func rulesWrite(
        _ transaction: SignedTransaction, claims: [TransactionClaim], jobID: String = "job-check"
    ) -> Bool {
        let job = ReceiptJob(jobID: jobID, accountID: "acct-1", proof: .transactionID(transaction.transactionID))
        let evidence = PurchaseEvidence(
            source: .apple, authenticity: .authentic, environment: .production, bundleID: "com.example.app",
            transactions: [transaction.purchase], appleStatus: 200)
        let input = DecisionInput(
            job: job, evidence: evidence, snapshot: LedgerSnapshot(claims: claims),
            policy: DecisionPolicy(now: now))
        guard case .decided(let decision) = DecisionRules.decide(input) else { return false }
        return decision.writes.contains { write in
            switch write {
            case .claim(let claim): claim.transactionID == transaction.transactionID
            case .revoke(let id, _, _), .extendSubscription(let id, _, _), .reinstate(let id):
                id == transaction.transactionID
            case .moveSubscription, .recordNotification, .endSubscription, .recordPendingPurchase, .recordRefundReview:
                false
            }
        }
    }

    @Test(
        "the same facts give the same transition through the reconciler and the rules",
        arguments: [
            // A transaction the ledger lacks: claimed, unless Apple revoked it.
            ("unclaimed", stated("t-2", expires: now + 30 * day), [claim("t-1", expires: now)], true),
            (
                "unclaimed, revoked", stated("t-2", expires: now + 30 * day, revoked: now),
                [claim("t-1", expires: now)], false
            ),
            // A claimed transaction: a later expiry, a revocation and a refund reversed are written; the same state
            // and an earlier expiry are not.
            ("same state", stated("t-1", expires: now), [claim("t-1", expires: now)], false),
            ("later expiry", stated("t-1", expires: now + 5 * day), [claim("t-1", expires: now)], true),
            ("earlier expiry", stated("t-1", expires: now - 5 * day), [claim("t-1", expires: now)], false),
            ("revoked", stated("t-1", expires: now, revoked: now - day), [claim("t-1", expires: now)], true),
            (
                "revoked twice", stated("t-1", expires: now, revoked: now - day),
                [claim("t-1", expires: now, revoked: now - 2 * day)], false
            ),
            ("refund reversed", stated("t-1", expires: now), [claim("t-1", expires: now, revoked: now - day)], true),
        ])
    func sameTransition(case name: String, transaction: SignedTransaction, claims: [TransactionClaim], writes: Bool) {
        let jobs = R.corrections([transaction], of: "sub-1", claims: claims, owner: "acct-1", submittedAt: Self.now)
        let jobID =
            jobs.first?.jobID
            ?? CorrectionJob.jobID(
                transactionID: transaction.transactionID, expiresDate: transaction.expiresDate,
                revocationDate: transaction.revocationDate)
        #expect(Self.rulesWrite(transaction, claims: claims, jobID: jobID) == writes, "\(name): the rules")
        #expect(!jobs.isEmpty == writes, "\(name): the reconciler")
        let claim = claims.first { $0.transactionID == transaction.transactionID }
        let correction = TransactionCorrection(stated: transaction.purchase, claim: claim)
        #expect(correction.isEmpty == !writes, "\(name)")
        // Only a reversal correction restores a claim; the same answer in any other job leaves it revoked.
        #expect(CorrectionJob.isReversal(jobID: jobID) == (correction.reversedRevocation != nil), "\(name)")
        if correction.reversedRevocation != nil {
            #expect(!Self.rulesWrite(transaction, claims: claims), "\(name): a plain job")
        }
    }

    @Test("a reversal correction restores nothing for another account than the owner, or while Apple states the refund")
    func reversalOnlyForTheOwner() {
        let refunded = [Self.claim("t-1", expires: Self.now + 5 * Self.day, revoked: Self.now - Self.day)]
        let jobID = CorrectionJob.reversalJobID(
            transactionID: "t-1", expiresDate: Self.now + 5 * Self.day, reversedRevocation: Self.now - Self.day)
        func writes(_ transaction: SignedTransaction, account: String) -> [LedgerWrite] {
            let job = ReceiptJob(jobID: jobID, accountID: account, proof: .transactionID("t-1"))
            let evidence = PurchaseEvidence(
                source: .apple, authenticity: .authentic, environment: .production, bundleID: "com.example.app",
                transactions: [transaction.purchase], appleStatus: 200)
            let input = DecisionInput(
                job: job, evidence: evidence, snapshot: LedgerSnapshot(claims: refunded),
                policy: DecisionPolicy(now: Self.now))
            guard case .decided(let decision) = DecisionRules.decide(input) else { return [] }
            return decision.writes
        }
        let reversed = Self.stated("t-1", expires: Self.now + 5 * Self.day)
        #expect(writes(reversed, account: "acct-1") == [.reinstate(transactionID: "t-1")])
        #expect(writes(reversed, account: "acct-2").isEmpty)
        let stillRefunded = Self.stated("t-1", expires: Self.now + 5 * Self.day, revoked: Self.now - Self.day)
        #expect(writes(stillRefunded, account: "acct-1").isEmpty)
    }
}
