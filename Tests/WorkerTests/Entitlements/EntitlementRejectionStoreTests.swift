import Foundation
import Messages
import Testing

@testable import Entitlements

/// What both store backends keep of an account's rejections (the newest N, `entitlements_rejections_per_account`)
/// and how support finds a purchase (by order id and purchase token too).
@Suite("Entitlement stores: rejections kept and lookups", .timeLimit(.minutes(3)))
struct EntitlementRejectionStoreTests {
    typealias F = EntitlementFixtures
    typealias Backend = EntitlementStoreTests.Backend

    static let limit = 5

    static func rejection(_ index: Int, account: String = "junk-1") -> Verdict {
        F.verdict(
            "junk-\(account)-\(index)", account: account, .rejected, reason: .replayed, decided: Double(100 + index),
            transactions: [F.transaction("t-\(index)")], by: .ledger)
    }

    static func batch(_ verdicts: [Verdict], limit: Int = limit) -> ProjectionBatch {
        ProjectionBatch(inputs: verdicts.map { .verdict($0) }, rejectionsPerAccount: limit)
    }

    static func verdictIDs(_ history: [HistoryEntry]) -> [String] { history.compactMap(\.jobID) }

    @Test(
        "an account with only rejections keeps its newest N: N-1 and N all kept, the N+1st evicts the oldest",
        arguments: Backend.allCases, [limit - 1, limit, limit + 1])
    func newestKept(_ backend: Backend, count: Int) async throws {
        try await EntitlementStoreTests.withStore(backend) { store in
            // One batch per verdict, as a live stream would bring them, and the same again in one batch.
            for index in 0..<count {
                _ = try await store.project(
                    Self.batch([Self.rejection(index)]), catalog: F.catalog, recordedAt: F.at(Double(index)))
            }
            _ = try await store.project(
                Self.batch((0..<count).map { Self.rejection($0, account: "junk-2") }), catalog: F.catalog,
                recordedAt: F.at(1))
            for account in ["junk-1", "junk-2"] {
                let record = try #require(try await store.account(account), "an account with only rejections is known")
                #expect(record.transactions.isEmpty)
                let history = try await store.history(of: account, before: nil, limit: 50)
                let kept = (max(0, count - Self.limit)..<count).reversed().map { "junk-\(account)-\($0)" }
                #expect(Self.verdictIDs(history) == kept, "\(account): the newest \(Self.limit), newest first")
                #expect(history.allSatisfy { $0.reason == "replayed" && $0.isRejection })
            }
        }
    }

    @Test(
        "grants, refunds and events are never evicted; only the account's own rejections count",
        arguments: Backend.allCases)
    func onlyRejectionsBounded(_ backend: Backend) async throws {
        try await EntitlementStoreTests.withStore(backend) { store in
            let grant = F.verdict(
                "grant", account: "a1", .granted, decided: 10,
                transactions: [F.transaction("g1", product: "no.ads", purchased: 10)])
            let refund = F.verdict(
                "refund", account: "a1", .rejected, reason: .revoked, decided: 20,
                transactions: [F.transaction("g1", product: "no.ads", purchased: 10, revoked: 20)])
            _ = try await store.project(Self.batch([grant, refund]), catalog: F.catalog, recordedAt: F.at(30))
            let rejections = (0..<(Self.limit + 3)).map { Self.rejection($0, account: "a1") }
            _ = try await store.project(Self.batch(rejections), catalog: F.catalog, recordedAt: F.at(200))
            _ = try await store.project(
                Self.batch([Self.rejection(0, account: "neighbour")]), catalog: F.catalog, recordedAt: F.at(300))
            let history = try await store.history(of: "a1", before: nil, limit: 50)
            #expect(history.filter(\.isRejection).count == Self.limit)
            #expect(history.filter { !$0.isRejection }.count == 4, "grant, purchase event, refund, refund event")
            #expect(history.contains { $0.jobID == "refund" && $0.effect == .applied })
            #expect(try await store.history(of: "neighbour", before: nil, limit: 50).count == 1)
        }
    }

    @Test(
        "0 keeps no rejection: an account with only rejections stays unknown, a known one keeps the rest",
        arguments: Backend.allCases)
    func noneKept(_ backend: Backend) async throws {
        try await EntitlementStoreTests.withStore(backend) { store in
            let grant = F.verdict(
                "grant", account: "a1", .granted, decided: 10,
                transactions: [F.transaction("g1", product: "no.ads", purchased: 10)])
            _ = try await store.project(Self.batch([grant], limit: 0), catalog: F.catalog, recordedAt: F.at(30))
            let result = try await store.project(
                Self.batch([Self.rejection(0), Self.rejection(1, account: "a1")], limit: 0), catalog: F.catalog,
                recordedAt: F.at(40))
            #expect(result.results == [.noChange, .noChange])
            #expect(try await store.account("junk-1") == nil)
            #expect(try await store.history(of: "junk-1", before: nil, limit: 50).isEmpty)
            let known = try #require(try await store.account("a1"))
            #expect(known.lastDecidedAt == F.at(101), "the rejection still counts as the newest verdict read")
            #expect(try await store.history(of: "a1", before: nil, limit: 50).allSatisfy { !$0.isRejection })
            // Applied once all the same: a redelivery is a duplicate.
            let again = try await store.project(
                Self.batch([Self.rejection(0)], limit: 0), catalog: F.catalog, recordedAt: F.at(50))
            #expect(again.results == [.duplicate])
        }
    }

    @Test(
        "a purchase is found by transaction id, original id, Google Play order id and purchase token",
        arguments: Backend.allCases)
    func lookups(_ backend: Backend) async throws {
        try await EntitlementStoreTests.withStore(backend) { store in
            let play = F.verdict(
                "android", account: "p1", .granted, decided: 10,
                transactions: [
                    F.transaction(
                        "GPA.3300-1111-2222-33334..1", product: "premium_sub", original: "token-abc", purchased: 5,
                        expires: 40 * F.day, orderID: "GPA.3300-1111-2222-33334..1", purchaseToken: "token-abc")
                ], store: .googlePlay)
            let apple = F.verdict(
                "ios", account: "a1", .granted, decided: 10,
                transactions: [F.transaction("2000000900", original: "2000000800", expires: 40 * F.day)])
            _ = try await store.project(Self.batch([play, apple]), catalog: F.catalog, recordedAt: F.at(20))
            for (id, kind, account) in [
                ("2000000900", TransactionMatch.transactionID, "a1"),
                ("2000000800", .originalTransactionID, "a1"),
                ("GPA.3300-1111-2222-33334..1", .transactionID, "p1"),
                ("token-abc", .originalTransactionID, "p1"),
            ] {
                let found = try await store.transactions(matching: id)
                #expect(found.map(\.accountID) == [account], "\(id)")
                #expect(TransactionMatch.kind(of: found, for: id) == kind, "\(id)")
            }
            // A Google Play purchase recorded under another id than its order id (a renewal's order, a token).
            let renewal = F.verdict(
                "android-renewal", account: "p2", .granted, decided: 20,
                transactions: [
                    F.transaction(
                        "play-txn-7", product: "premium_sub", original: "play-original-7", purchased: 6,
                        expires: 40 * F.day, orderID: "GPA.7777-0000-0000-00007..2", purchaseToken: "token-seven")
                ], store: .googlePlay)
            _ = try await store.project(Self.batch([renewal]), catalog: F.catalog, recordedAt: F.at(30))
            let byOrder = try await store.transactions(matching: "GPA.7777-0000-0000-00007..2")
            #expect(byOrder.map(\.transactionID) == ["play-txn-7"])
            #expect(TransactionMatch.kind(of: byOrder, for: "GPA.7777-0000-0000-00007..2") == .orderID)
            let byToken = try await store.transactions(matching: "token-seven")
            #expect(byToken.map(\.transactionID) == ["play-txn-7"])
            #expect(TransactionMatch.kind(of: byToken, for: "token-seven") == .purchaseToken)
            #expect(try await store.transactions(matching: "GPA.nothing").isEmpty)
        }
    }

    @Test(
        "a store of schema 3 is upgraded: its rejections are told from its JSON and bounded by the next one",
        arguments: Backend.allCases)
    func upgradeFlagsOldRejections(_ backend: Backend) async throws {
        try await EntitlementStoreTests.withStore(backend, upTo: 3) { store, execute in
            let instant =
                backend == .sqlite
                ? String(Int64(F.at(10).timeIntervalSince1970 * 1000))
                : "'\(RFC3339.format(F.at(10)))'::timestamptz"
            func row(_ json: String) -> String {
                "INSERT INTO ent_history (account_id, event_id, entry_json) VALUES ('old', NULL, '\(json)')"
            }
            let at = RFC3339.format(F.at(10))
            try await execute([
                """
                INSERT INTO ent_accounts (account_id, first_seen, last_decided_at, updated_at)
                VALUES ('old', \(instant), \(instant), \(instant))
                """,
                row(
                    #"{"sequence":0,"account_id":"old","kind":"verdict","recorded_at":"\#(at)","job_id":"old-grant","#
                        + #""outcome":"granted","effect":"applied","transactions":[],"notes":[]}"#),
                row(
                    #"{"sequence":0,"account_id":"old","kind":"verdict","recorded_at":"\#(at)","job_id":"old-junk-1","#
                        + #""outcome":"rejected","reason":"malformed","effect":"no_change","transactions":[],"notes":[]}"#
                ),
                row(
                    #"{"sequence":0,"account_id":"old","kind":"ignored","recorded_at":"\#(at)","outcome":"maybe","#
                        + #""effect":"ignored","problem":"unknown_outcome: x","transactions":[],"notes":[]}"#),
                row(
                    #"{"sequence":0,"account_id":"old","kind":"verdict","recorded_at":"\#(at)","job_id":"old-junk-2","#
                        + #""outcome":"unverifiable","reason":"apple_unavailable","effect":"no_change","#
                        + #""transactions":[],"notes":[]}"#),
            ])
            try await store.migrate()
            #expect(try await store.history(of: "old", before: nil, limit: 50).count == 4)
            // Two kept: the new one and the newest old one; the grant is not a rejection.
            _ = try await store.project(
                Self.batch([Self.rejection(1, account: "old")], limit: 2), catalog: F.catalog, recordedAt: F.at(20))
            let history = try await store.history(of: "old", before: nil, limit: 50)
            #expect(history.map { $0.jobID ?? $0.kind.rawValue } == ["junk-old-1", "old-junk-2", "old-grant"])
        }
    }
}
