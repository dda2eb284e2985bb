import Foundation
import Logging
import SQLiteStorage
import Testing

@testable import Ledger

/// The ledger's record of follow-up calls to Apple (schema version 5), on both backends.
@Suite("Ledger: follow-up records", .serialized, .timeLimit(.minutes(2)))
struct LedgerFollowUpRecordTests {
    typealias S = LedgerTestSupport

    static let start = Date(timeIntervalSince1970: 1_800_000_000)

    static func call(_ id: String, environment: String? = "Sandbox") -> FollowUpRecord.Call {
        FollowUpRecord.Call(kind: .finishTransaction, key: id, transactionID: id, environment: environment)
    }

    private func withStore(
        _ backend: LedgerBackend, _ body: @Sendable (any FollowUpRecordStore) async throws -> Void
    ) async throws {
        try await S.withLedger(backend) { ledger, _ in
            let store = ledger
            try await body(store)
        }
    }

    @Test("one claim per call: the second claimer, of any holder, finds the record", arguments: LedgerBackend.allCases)
    func claimOnce(backend: LedgerBackend) async throws {
        try await withStore(backend) { store in
            let results = try await withThrowingTaskGroup(of: FollowUpClaim.self) { group in
                for holder in 0..<8 {
                    group.addTask {
                        try await store.claimFollowUp(
                            Self.call("t1"), holder: "w\(holder)", now: Self.start, lease: .seconds(60))
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(results.filter { $0 == .claimed }.count == 1)
            #expect(results.filter { $0 == .exists(.pending) }.count == 7)
            let record = try #require(try await store.followUpRecord(kind: .finishTransaction, key: "t1"))
            #expect(record.state == .pending)
            #expect(record.call.environment == "Sandbox")
            #expect(record.dueAt == Self.start.addingTimeInterval(60))
            // Another kind with the same key is another call.
            let consumption = FollowUpRecord.Call(
                kind: .consumptionInformation, key: "t1", transactionID: "t1", environment: nil)
            #expect(
                try await store.claimFollowUp(consumption, holder: "w0", now: Self.start, lease: .seconds(60))
                    == .claimed)
        }
    }

    @Test(
        "settled records are final; only the holder settles; due ones go to one sweeper",
        arguments: LedgerBackend.allCases)
    func settleAndSweep(backend: LedgerBackend) async throws {
        try await withStore(backend) { store in
            let now = Self.start
            for id in ["a", "b", "c"] {
                #expect(
                    try await store.claimFollowUp(Self.call(id), holder: "w1", now: now, lease: .seconds(60))
                        == .claimed)
            }
            // Another holder's settle does nothing.
            try await store.settleFollowUp(
                kind: .finishTransaction, key: "a", holder: "w2", state: .sent, detail: nil, retryAt: nil, now: now)
            #expect(try await store.followUpRecord(kind: .finishTransaction, key: "a")?.state == .pending)
            try await store.settleFollowUp(
                kind: .finishTransaction, key: "a", holder: "w1", state: .sent, detail: nil, retryAt: nil, now: now)
            try await store.settleFollowUp(
                kind: .finishTransaction, key: "b", holder: "w1", state: .pending, detail: "HTTP 429",
                retryAt: now.addingTimeInterval(30), now: now)
            let a = try #require(try await store.followUpRecord(kind: .finishTransaction, key: "a"))
            #expect(a.state == .sent && a.call.attempts == 1 && a.holder == nil)
            #expect(
                try await store.claimFollowUp(Self.call("a"), holder: "w3", now: now, lease: .seconds(60))
                    == .exists(.sent))

            // Nothing due yet: b retries at +30 s, c's claim holds until +60 s.
            #expect(
                try await store.claimDueFollowUps(
                    kind: .finishTransaction, holder: "w2", now: now.addingTimeInterval(10), lease: .seconds(60),
                    limit: 10
                ).isEmpty)
            let later = now.addingTimeInterval(61)
            async let one = store.claimDueFollowUps(
                kind: .finishTransaction, holder: "w2", now: later, lease: .seconds(60), limit: 10)
            async let two = store.claimDueFollowUps(
                kind: .finishTransaction, holder: "w3", now: later, lease: .seconds(60), limit: 10)
            let (first, second) = try await (one, two)
            #expect((first + second).map(\.key).sorted() == ["b", "c"])
            let b = try #require((first + second).first { $0.key == "b" })
            #expect(b.attempts == 1)
            // The crashed holder's late settle no longer counts.
            try await store.settleFollowUp(
                kind: .finishTransaction, key: "c", holder: "w1", state: .failed, detail: nil, retryAt: nil,
                now: later)
            #expect(try await store.followUpRecord(kind: .finishTransaction, key: "c")?.state == .pending)
        }
    }

    @Test(
        "the oldest pending record of the kinds asked: settled ones and other kinds do not count",
        arguments: LedgerBackend.allCases)
    func oldestPending(backend: LedgerBackend) async throws {
        try await withStore(backend) { store in
            let kinds: [FollowUpRecord.Kind] = [.playAcknowledge, .playConsume]
            #expect(try await store.oldestPendingFollowUp(kinds: kinds) == nil)
            func play(_ token: String, _ kind: FollowUpRecord.Kind) -> FollowUpRecord.Call {
                FollowUpRecord.Call(
                    kind: kind, key: token, transactionID: token, environment: "com.example.app/products/coins")
            }
            // An older Finish Transaction, an acknowledge settled as sent, then two pending Play calls.
            _ = try await store.claimFollowUp(Self.call("t1"), holder: "w1", now: Self.start, lease: .seconds(60))
            let settled = Self.start.addingTimeInterval(10)
            _ = try await store.claimFollowUp(
                play("token-a", .playAcknowledge), holder: "w1", now: settled, lease: .seconds(60))
            try await store.settleFollowUp(
                kind: .playAcknowledge, key: "token-a", holder: "w1", state: .sent, detail: nil, retryAt: nil,
                now: settled)
            let oldest = Self.start.addingTimeInterval(20)
            _ = try await store.claimFollowUp(
                play("token-b", .playConsume), holder: "w1", now: oldest, lease: .seconds(60))
            _ = try await store.claimFollowUp(
                play("token-c", .playAcknowledge), holder: "w2", now: oldest.addingTimeInterval(5),
                lease: .seconds(60))
            #expect(try await store.oldestPendingFollowUp(kinds: kinds) == oldest)
            #expect(try await store.oldestPendingFollowUp(kinds: [.playAcknowledge]) == oldest.addingTimeInterval(5))
            #expect(try await store.oldestPendingFollowUp(kinds: [.finishTransaction]) == Self.start)
            #expect(try await store.oldestPendingFollowUp(kinds: []) == nil)
        }
    }

    @Test("migrations apply a version missing below the newest one (branches merged in another order)")
    func migrationGap() async throws {
        let url = try S.freshURL(.sqlite)
        defer { S.removeFiles(of: url) }
        let path = String(url.dropFirst("sqlite:".count))
        try await LedgerFactory.withLedger(url: url, configuration: S.patient) { _ in }
        // Forget version 2 as if this database had been migrated by a build without it.
        let ledger = try SQLiteLedger(path: path, logger: .init(label: "test"))
        try await ledger.executor.run { connection, _ in
            try connection.execute("DROP TABLE verification_leases")
            try connection.execute("DELETE FROM ledger_migrations WHERE version = 2")
        }
        await ledger.close()
        let versions = try await LedgerFactory.withLedger(url: url, configuration: S.patient) { ledger in
            try await ledger.schemaVersions()
        }
        #expect(versions == LedgerSchema.sqlite.map(\.version))
    }
}
