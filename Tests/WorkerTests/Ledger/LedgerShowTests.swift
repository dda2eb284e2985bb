import Foundation
import Messages
import Testing

@testable import Ledger

/// `verify-worker ledger show`'s report, on both backends.
@Suite("Ledger: show a transaction or an account", .serialized, .timeLimit(.minutes(2)))
struct LedgerShowTests {
    typealias S = LedgerTestSupport
    typealias F = LedgerFixtures

    @Test(
        "by transaction, by original transaction and by account: owner, state, dates, granting verdict",
        arguments: LedgerBackend.allCases)
    func report(backend: LedgerBackend) async throws {
        try await S.withLedger(backend) { ledger, _ in
            let granted = try await S.settle(ledger, F.job("job-1", account: "acct-A"), F.apple([F.purchase("t1")]))
            #expect(granted.outcome == .granted)
            _ = try await S.settle(
                ledger, F.job("job-2", account: "acct-A"),
                F.apple([F.renewal("r1", original: "sub-1", purchased: F.days(-40), expires: F.days(-10))]))
            _ = try await S.settle(ledger, F.job("job-3", account: "acct-B"), F.apple([F.purchase("t3")]))
            try await ledger.revoke(transactionID: "t3", at: F.days(-1))

            let one = try await LedgerShow.report(.transaction("t1"), ledger: ledger, now: F.now)
            let rows = try #require(one["transactions"] as? [[String: Any]])
            #expect(rows.count == 1)
            #expect(rows[0]["transaction_id"] as? String == "t1")
            #expect(rows[0]["account_id"] as? String == "acct-A")
            #expect(rows[0]["product_id"] as? String == "com.example.pro")
            #expect(rows[0]["state"] as? String == "active")
            #expect(rows[0]["expires_at"] is NSNull)
            #expect(rows[0]["auto_renew"] is NSNull)
            let verdicts = try #require(rows[0]["verdicts"] as? [[String: Any]])
            #expect(verdicts.map { $0["job_id"] as? String } == ["job-1"])
            #expect(verdicts.first?["verdict_id"] as? String == granted.verdictID)

            let subscription = try await LedgerShow.report(.transaction("sub-1"), ledger: ledger, now: F.now)
            let renewals = try #require(subscription["transactions"] as? [[String: Any]])
            #expect(renewals.map { $0["state"] as? String } == ["expired"])
            #expect(rows[0]["subscription_state"] is NSNull, "a non-consumable is no subscription")

            // A subscription stands as its latest claim: a later period refunded ends it, though the earlier period's
            // own (extended) expiry has not passed.
            _ = try await S.settle(
                ledger, F.job("job-4", account: "acct-A"),
                F.apple([F.renewal("r2", original: "sub-1", purchased: F.days(-5), expires: F.days(40))]))
            _ = try await S.settle(
                ledger, F.job("job-5", account: "acct-A"),
                F.apple([F.renewal("r3", original: "sub-1", purchased: F.days(-1), expires: F.days(29))]))
            try await ledger.revoke(transactionID: "r3", at: F.days(0))
            let refunded = try await LedgerShow.report(.transaction("r2"), ledger: ledger, now: F.now)
            let r2 = try #require((refunded["transactions"] as? [[String: Any]])?.first)
            #expect(r2["state"] as? String == "active")
            #expect(r2["subscription_state"] as? String == "revoked")

            let account = try await LedgerShow.report(.account("acct-A"), ledger: ledger, now: F.now)
            #expect(
                (account["transactions"] as? [[String: Any]])?.compactMap { $0["transaction_id"] as? String }
                    == ["r1", "r2", "r3", "t1"])
            let revoked = try await LedgerShow.report(.account("acct-B"), ledger: ledger, now: F.now)
            let revokedRow = try #require((revoked["transactions"] as? [[String: Any]])?.first)
            #expect(revokedRow["state"] as? String == "revoked")
            #expect(revokedRow["revoked_at"] is String)
            let nobody = try await LedgerShow.report(.account("acct-Z"), ledger: ledger, now: F.now)
            #expect((nobody["transactions"] as? [Any])?.isEmpty == true)
            // The report is JSON.
            _ = try JSONSerialization.data(withJSONObject: account)
        }
    }

    /// A ledger wrapped by a test double lists an account's transactions too: every ``Ledger`` has every capability,
    /// so the report needs no run-time check that could refuse a ledger (it refused every double that only wrapped
    /// the worker's operations).
    @Test("an account's transactions through a wrapping test double", arguments: LedgerBackend.allCases)
    func accountThroughDouble(backend: LedgerBackend) async throws {
        try await S.withLedger(backend) { ledger, _ in
            _ = try await S.settle(ledger, F.job("job-1", account: "acct-A"), F.apple([F.purchase("t1")]))
            let double = LeaseCountingLedger(ledger)
            let account = try await LedgerShow.report(.account("acct-A"), ledger: double, now: F.now)
            #expect(
                (account["transactions"] as? [[String: Any]])?.compactMap { $0["transaction_id"] as? String } == ["t1"])
        }
    }
}
