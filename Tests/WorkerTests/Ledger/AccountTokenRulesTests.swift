import Foundation
import Messages
import Testing

@testable import Decision

/// A transaction whose `appAccountToken` is set is granted only to a job whose token matches (the job's
/// `app_account_token`, or the token derived from its `account_id` when it has none); otherwise `rejected` /
/// `account_token_mismatch`. Only authenticated evidence decides it.
@Suite("Ledger rules: app account tokens")
struct AccountTokenRulesTests {
    typealias F = LedgerFixtures

    static let tokenA = "8a2c1f5e-3b4d-4c6e-9f70-1a2b3c4d5e6f"
    static let tokenB = "0f1e2d3c-4b5a-4968-8776-655443322110"

    static func tagged(_ id: String, _ token: String?, product: String = "com.example.pro") -> PurchaseTransaction {
        var transaction = F.purchase(id, product: product)
        transaction.appAccountToken = token
        return transaction
    }

    static func job(token: String?, account: String = "acct-A") -> ReceiptJob {
        var job = F.job(account: account)
        job.appAccountToken = token
        return job
    }

    static func verdict(_ result: DecisionResult) -> Verdict? { F.decision(result)?.verdict }

    @Test("the job's own token matches (in any case): granted; another token: account_token_mismatch, nothing written")
    func explicitToken() throws {
        let evidence = F.apple([Self.tagged("t1", Self.tokenA)])
        #expect(Self.verdict(F.decide(Self.job(token: Self.tokenA.uppercased()), evidence))?.outcome == .granted)
        let other = try #require(F.decision(F.decide(Self.job(token: Self.tokenB), evidence)))
        #expect(other.verdict.outcome == .rejected)
        #expect(other.verdict.reason == .accountTokenMismatch)
        #expect(other.writes.isEmpty)
        // No token in the job, and the transaction's is not this account's derived one: a mismatch too.
        #expect(Self.verdict(F.decide(Self.job(token: nil), evidence))?.reason == .accountTokenMismatch)
    }

    @Test("a job without a token matches the token derived from its account id (what Set App Account Token writes)")
    func derivedToken() throws {
        #expect(AppAccountToken.derived(fromAccountID: "acct-1") == "f1b33675-7e10-5044-be4c-42d8a7e5057f")
        let derived = AppAccountToken.derived(fromAccountID: "acct-A")
        let evidence = F.apple([Self.tagged("t1", derived)])
        #expect(Self.verdict(F.decide(Self.job(token: nil), evidence))?.outcome == .granted)
        #expect(
            Self.verdict(F.decide(Self.job(token: nil, account: "acct-B"), evidence))?.reason == .accountTokenMismatch)
    }

    @Test("a transaction without a token is granted whatever the job's token; of two, the foreign one is left out")
    func untaggedAndMixed() throws {
        #expect(
            Self.verdict(F.decide(Self.job(token: Self.tokenB), F.apple([Self.tagged("t1", nil)])))?.outcome == .granted
        )
        let mixed = try #require(
            F.decision(
                F.decide(
                    Self.job(token: Self.tokenA),
                    F.apple([
                        Self.tagged("t1", Self.tokenB), Self.tagged("t2", Self.tokenA, product: "com.example.gems"),
                    ])
                )))
        #expect(mixed.verdict.outcome == .granted)
        #expect(mixed.verdict.transactions.map(\.transactionID) == ["t2"])
    }

    @Test("unauthenticated evidence with a foreign token decides nothing: Apple is asked")
    func localEvidenceAsksApple() {
        let result = F.decide(Self.job(token: Self.tokenB), F.local([Self.tagged("t1", Self.tokenA)]))
        #expect(result == .needsApple)
    }

    @Test("the token survives the lease's evidence JSON")
    func evidenceJSON() throws {
        let evidence = F.apple([Self.tagged("t1", Self.tokenA)])
        let decoded = try #require(PurchaseEvidence(jsonText: evidence.jsonText()))
        #expect(decoded.transactions.first?.appAccountToken == Self.tokenA)
    }
}
