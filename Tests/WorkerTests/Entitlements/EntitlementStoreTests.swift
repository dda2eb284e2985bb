import CodedErrors
import Foundation
import Logging
import Messages
import PostgresNIO
import PostgresSettings
import SQLiteStorage
import Testing

@testable import Entitlements

/// The two store backends, through one shared suite: batches applied once, all or nothing, and read back.
@Suite("Entitlement stores", .timeLimit(.minutes(3)))
struct EntitlementStoreTests {
    typealias F = EntitlementFixtures
    static let day = EntitlementFixtures.day

    enum Backend: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case sqlite, postgres
        var testDescription: String { rawValue }
    }

    /// A store of `backend`, migrated (twice) to this build's schema; with `upTo`, only to that version, and `body`
    /// gets a way to run SQL on it (rows as an older build wrote them).
    static func withStore<T>(_ backend: Backend, _ body: (any EntitlementStore) async throws -> T) async throws -> T {
        try await withStore(backend, upTo: nil) { store, _ in try await body(store) }
    }

    static func withStore<T>(
        _ backend: Backend, upTo version: Int?,
        _ body: (any EntitlementStore, _ execute: @Sendable ([String]) async throws -> Void) async throws -> T
    ) async throws -> T {
        var logger = Logger(label: "entitlements-store-test")
        logger.logLevel = .critical
        let tag = UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(12)
        let store: any EntitlementStore
        var directory: URL?
        let execute: @Sendable ([String]) async throws -> Void
        var pool: PostgresPool?
        switch backend {
        case .sqlite:
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("entitlements-\(tag)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            directory = dir
            let path = dir.appendingPathComponent("e.sqlite").path
            let sqlite = try SQLiteEntitlementStore(path: path, logger: logger)
            store = sqlite
            execute = { statements in
                let executor = try SQLiteExecutor<EntitlementStoreError>(
                    path: path, busyTimeout: .seconds(5), setup: [], label: "entitlements-test-sql")
                try await executor.run { connection in
                    for statement in statements { try connection.execute(statement) }
                }
                await executor.close()
            }
        case .postgres:
            let base = try TestEnvironment.service(
                "VERIFY_TEST_POSTGRES_URL",
                startWith: "start one with `scripts/test-postgres.sh start && eval \"$(scripts/test-postgres.sh env)\"`"
            )
            // Patient deadlines: hundreds of tests share two cores, and the migrations of parallel tests queue on one
            // advisory lock; the production defaults are for a service that retries.
            var settings = PostgresEntitlementStore.Settings()
            settings.operationTimeout = .seconds(100)  // as the ledger tests' `patient`: a hang guard
            settings.connectTimeout = .seconds(20)
            let url = base + (base.contains("?") ? "&" : "?") + "schema=e_\(tag)"
            store = try PostgresEntitlementStore(url: url, settings: settings, logger: logger)
            let sqlPool = try PostgresPool(
                url: url, noun: "test URL", storeName: "entitlements test", connectTimeout: .seconds(20),
                maximumConnections: 1, operationTimeout: .seconds(100), applicationName: "entitlements-test",
                logger: logger)
            pool = sqlPool
            let sqlLogger = logger
            execute = { statements in
                try await sqlPool.operation("test SQL", failure: { $0 }) { lease in
                    try await lease.withConnection { connection in
                        for statement in statements {
                            try await connection.query(PostgresQuery(unsafeSQL: statement), logger: sqlLogger)
                        }
                    }
                }
            }
        }
        let runner = Task { try await store.run() }
        let poolRunner = Task { await pool?.run() }
        defer {
            runner.cancel()
            poolRunner.cancel()
            if let directory { try? FileManager.default.removeItem(at: directory) }
        }
        switch store {
        case let sqlite as SQLiteEntitlementStore: try await sqlite.migrate(upTo: version)
        case let postgres as PostgresEntitlementStore: try await postgres.migrate(upTo: version)
        default: try await store.migrate()
        }
        if version == nil { try await store.migrate() }
        return try await body(store, execute)
    }

    static func batch(_ verdicts: [Verdict], offset: Int64, webhooks: [String] = []) -> ProjectionBatch {
        ProjectionBatch(
            inputs: verdicts.map { .verdict($0) },
            positions: [
                TopicPosition(
                    topic: "receipt-verdicts", partition: 3, nextOffset: offset, recordTime: F.at(Double(offset)))
            ],
            webhookURLs: webhooks)
    }

    static let grant = F.verdict(
        "j1", account: "a1", .granted, decided: 10, transactions: [F.transaction("t1", expires: 30 * day)])
    static let coins = F.verdict(
        "j2", account: "a1", .granted, decided: 20,
        transactions: [F.transaction("c1", product: "coins.100", quantity: 2)])
    static let refund = F.verdict(
        "n1", account: "a1", .rejected, reason: .revoked, decided: 30,
        transactions: [F.transaction("t1", expires: 30 * day, revoked: 25)])

    @Test(
        "a batch is applied once: a second application of the same verdicts changes nothing",
        arguments: Backend.allCases)
    func idempotent(_ backend: Backend) async throws {
        try await Self.withStore(backend) { store in
            let first = try await store.project(
                Self.batch([Self.grant, Self.coins], offset: 2), catalog: F.catalog, recordedAt: F.at(100))
            #expect(first.results == [.applied, .applied])
            #expect(first.events.map(\.kind) == [.initialPurchase])
            let again = try await store.project(
                Self.batch([Self.grant, Self.coins], offset: 2), catalog: F.catalog, recordedAt: F.at(200))
            #expect(again.results == [.duplicate, .duplicate])
            #expect(again.events.isEmpty)
            let account = try #require(try await store.account("a1"))
            #expect(account.consumables == [ConsumableProduct(store: .appStore, productID: "coins.100"): 2])
            #expect(Set(account.transactions.map(\.transactionID)) == ["t1", "c1"])
            #expect(try await store.history(of: "a1", before: nil, limit: 50).count == 3)
            #expect(try await store.account("nobody") == nil)
        }
    }

    @Test(
        "state carries across batches: a refund in a later batch revokes, events land in the outbox",
        arguments: Backend.allCases)
    func acrossBatches(_ backend: Backend) async throws {
        try await Self.withStore(backend) { store in
            _ = try await store.project(Self.batch([Self.grant], offset: 1), catalog: F.catalog, recordedAt: F.at(100))
            let second = try await store.project(
                Self.batch([Self.refund], offset: 2, webhooks: ["http://127.0.0.1:1/hook"]), catalog: F.catalog,
                recordedAt: F.at(200))
            #expect(second.events.map(\.kind) == [.refund])
            let account = try #require(try await store.account("a1"))
            #expect(account.transactions.first { $0.transactionID == "t1" }?.revokedAt == F.at(25))
            let outbox = try await store.unpublishedEvents(limit: 10)
            #expect(outbox.map(\.kind) == [.initialPurchase, .refund])
            try await store.markPublished([outbox[0].eventID], at: F.at(300))
            #expect(try await store.unpublishedEvents(limit: 10).map(\.kind) == [.refund])
            let due = try await store.dueWebhookDeliveries(at: F.at(300), limit: 10)
            #expect(due.map(\.event.kind) == [.refund])
            try await store.recordWebhookAttempt(due[0], delivered: false, nextAttempt: F.at(400), at: F.at(300))
            #expect(try await store.dueWebhookDeliveries(at: F.at(350), limit: 10).isEmpty)
            #expect(try await store.dueWebhookDeliveries(at: F.at(400), limit: 10).first?.attempts == 1)
            try await store.recordWebhookAttempt(due[0], delivered: true, nextAttempt: nil, at: F.at(400))
            #expect(try await store.dueWebhookDeliveries(at: F.at(9999), limit: 10).isEmpty)
            let progress = try await store.progress()
            #expect(progress.positions.first?.nextOffset == 2)
            #expect(progress.asOf == F.at(2))
        }
    }

    @Test("history pages newest first; transactions are found by id or by original id", arguments: Backend.allCases)
    func reads(_ backend: Backend) async throws {
        try await Self.withStore(backend) { store in
            let renewal = F.verdict(
                "r1", account: "a1", .granted, decided: 29 * Self.day,
                transactions: [F.transaction("t2", original: "t1", purchased: 29 * Self.day, expires: 60 * Self.day)])
            _ = try await store.project(
                Self.batch([Self.grant, Self.coins, renewal], offset: 3), catalog: F.catalog, recordedAt: F.at(100))
            let all = try await store.history(of: "a1", before: nil, limit: 100)
            #expect(all.map(\.sequence) == all.map(\.sequence).sorted(by: >))
            let page = try await store.history(of: "a1", before: all[1].sequence, limit: 2)
            #expect(page.map(\.sequence) == Array(all.dropFirst(2).prefix(2)).map(\.sequence))
            #expect(try await store.transactions(matching: "t2").map(\.transactionID) == ["t2"])
            let group = try await store.transactions(matching: "t1")
            #expect(group.map(\.transactionID) == ["t1"])
            #expect(try await store.transactions(matching: "zzz").isEmpty)
        }
    }

    @Test("a transfer moves rows between accounts in one batch or across batches", arguments: Backend.allCases)
    func transfer(_ backend: Backend) async throws {
        try await Self.withStore(backend) { store in
            _ = try await store.project(Self.batch([Self.grant], offset: 1), catalog: F.catalog, recordedAt: F.at(100))
            let move = F.verdict(
                "j9", account: "a2", .granted, decided: 40 * Self.day,
                transactions: [
                    F.transaction("t1", expires: 30 * Self.day),
                    F.transaction("t5", original: "t1", purchased: 39 * Self.day, expires: 69 * Self.day),
                ])
            let result = try await store.project(
                Self.batch([move], offset: 2), catalog: F.catalog, recordedAt: F.at(200))
            #expect(Set(result.events.map(\.accountID)) == ["a1", "a2"])
            #expect(try await store.account("a1")?.transactions.isEmpty == true)
            #expect(Set(try await store.account("a2")?.transactions.map(\.transactionID) ?? []) == ["t1", "t5"])
            #expect(try await store.history(of: "a1", before: nil, limit: 10).first?.event?.kind == .transfer)
        }
    }

    @Test(
        "the clock's sweep publishes expirations no verdict reports, once, with the id a verdict would give",
        arguments: Backend.allCases)
    func expirySweep(_ backend: Backend) async throws {
        try await Self.withStore(backend) { store in
            let day = Self.day
            let verdicts = (1...3).map { index in
                F.verdict(
                    "s\(index)", account: "a\(index)", .granted, decided: 10,
                    transactions: [F.transaction("s\(index)", expires: Double(20 + index) * day)])
            }
            let lifetime = F.verdict(
                "l1", account: "a4", .granted, decided: 10, transactions: [F.transaction("l1", product: "no.ads")])
            _ = try await store.project(
                Self.batch(verdicts + [lifetime], offset: 4), catalog: F.catalog, recordedAt: F.at(11))
            var logger = Logger(label: "sweep")
            logger.logLevel = .critical
            let sweeper = ExpirationSweeper(
                store: store, catalog: F.catalog, interval: .seconds(1), webhookURLs: [], logger: logger)
            // One account per page: the sweep pages through all of them.
            let first = try await sweeper.sweep(F.at(20 * day)...F.at(22.5 * day), limit: 1)
            #expect(first.map(\.accountID).sorted() == ["a1", "a2"])
            #expect(first.allSatisfy { $0.kind == .expiration && !$0.active && $0.verdictID == nil })
            #expect(first.first { $0.accountID == "a1" }?.occurredAt == F.at(21 * day))
            let again = try await sweeper.sweep(F.at(20 * day)...F.at(22.5 * day), limit: 1)
            #expect(again.isEmpty)
            // A verdict that reports the third expiry makes the same event: the sweep then finds it stored.
            let reported = try await store.project(
                Self.batch(
                    [
                        F.verdict(
                            "n3", account: "a3", .rejected, reason: .expired, decided: 24 * day,
                            transactions: [F.transaction("s3", expires: 23 * day)])
                    ], offset: 5), catalog: F.catalog, recordedAt: F.at(24 * day))
            #expect(reported.events.map(\.kind) == [.expiration])
            let afterReport = try await sweeper.sweep(F.at(22.5 * day)...F.at(25 * day))
            #expect(afterReport.isEmpty)
            let history = try await store.history(of: "a1", before: nil, limit: 10)
            #expect(history.first?.event?.kind == .expiration)
            let outbox = try await store.unpublishedEvents(limit: 20)
            #expect(outbox.filter { $0.kind == .expiration }.count == 3)
        }
    }

    @Test(
        "unreadable messages are recorded as ignored, once, and make their account known", arguments: Backend.allCases)
    func ignored(_ backend: Backend) async throws {
        try await Self.withStore(backend) { store in
            let reader = VerdictReader()
            let bytes = F.verdictJSON(Self.grant, replacing: ["outcome": "partially_granted"])
            let batch = ProjectionBatch(inputs: [reader.read(bytes, position: "receipt-verdicts/0/7")])
            let first = try await store.project(batch, catalog: F.catalog, recordedAt: F.at(1))
            let second = try await store.project(batch, catalog: F.catalog, recordedAt: F.at(2))
            #expect(first.results == [.ignored])
            #expect(second.results == [.duplicate])
            #expect(try await store.history(of: "a1", before: nil, limit: 10).map(\.kind) == [.ignored])
            #expect(try await store.account("a1")?.transactions.isEmpty == true)
        }
    }

    @Test(
        "each transaction keeps its store, order id, purchase token and pause; consumables are counted per store",
        arguments: Backend.allCases)
    func stores(_ backend: Backend) async throws {
        try await Self.withStore(backend) { store in
            let play = F.verdict(
                "p1", account: "a1", .granted, decided: 40,
                transactions: [
                    F.transaction(
                        "GPA.7-1", product: "premium_sub", original: "tok-7", expires: 30 * Self.day,
                        orderID: "GPA.7-1", purchaseToken: "tok-7")
                ], store: .googlePlay)
            let gems = F.verdict(
                "p2", account: "a1", .granted, decided: 50,
                transactions: [F.transaction("GPA.7-2", product: "gems_50", quantity: 3, orderID: "GPA.7-2")],
                store: .googlePlay)
            let appStoreGems = F.verdict(
                "i3", account: "a1", .granted, decided: 60,
                transactions: [F.transaction("2000000007", product: "gems_50", quantity: 1)])
            _ = try await store.project(
                Self.batch([Self.grant, Self.coins, play, gems, appStoreGems], offset: 5), catalog: F.catalog,
                recordedAt: F.at(100))
            let account = try #require(try await store.account("a1"))
            let byID = Dictionary(uniqueKeysWithValues: account.transactions.map { ($0.transactionID, $0) })
            #expect(byID["t1"]?.store == .appStore)
            #expect(byID["t1"]?.orderID == nil)
            #expect(byID["GPA.7-1"]?.store == .googlePlay)
            #expect(byID["GPA.7-1"]?.orderID == "GPA.7-1")
            #expect(byID["GPA.7-1"]?.purchaseToken == "tok-7")
            #expect(
                account.consumables == [
                    ConsumableProduct(store: .appStore, productID: "coins.100"): 2,
                    ConsumableProduct(store: .googlePlay, productID: "gems_50"): 3,
                    ConsumableProduct(store: .appStore, productID: "gems_50"): 1,
                ])
            #expect(try await store.transactions(matching: "tok-7").map(\.transactionID) == ["GPA.7-1"])
            let history = try await store.history(of: "a1", before: nil, limit: 50)
            #expect(history.first { $0.kind == .verdict && $0.verdictID == play.verdictID }?.store == .googlePlay)
            #expect(history.first { $0.kind == .verdict && $0.verdictID == Self.grant.verdictID }?.store == .appStore)
            let events = try await store.unpublishedEvents(limit: 10)
            #expect(events.map(\.store) == [.appStore])
            #expect(byID["GPA.7-1"]?.paused == false)

            // Google states the subscription paused: the row keeps it.
            var pausedItem = F.transaction(
                "GPA.7-1", product: "premium_sub", original: "tok-7", expires: 30 * Self.day, billingRetry: false,
                orderID: "GPA.7-1", purchaseToken: "tok-7")
            pausedItem.paused = true
            let paused = F.verdict(
                "p4", account: "a1", .rejected, reason: .expired, decided: 70, transactions: [pausedItem],
                store: .googlePlay)
            _ = try await store.project(Self.batch([paused], offset: 10), catalog: F.catalog, recordedAt: F.at(110))
            let after = try #require(try await store.account("a1"))
            let row = try #require(after.transactions.first { $0.transactionID == "GPA.7-1" })
            #expect(row.paused && row.state(at: F.at(31 * Self.day)) == "paused")
        }
    }

    @Test(
        "a store of the previous schema is upgraded: its rows are the App Store's, next to new Google Play ones",
        arguments: Backend.allCases)
    func upgradeFromOneStore(_ backend: Backend) async throws {
        try await Self.withStore(backend, upTo: 2) { store, execute in
            let instant: String
            let no: String
            switch backend {
            case .sqlite:
                instant = String(Int64(F.at(10).timeIntervalSince1970 * 1000))
                no = "0"
            case .postgres:
                instant = "'\(RFC3339.format(F.at(10)))'::timestamptz"
                no = "false"
            }
            try await execute([
                """
                INSERT INTO ent_accounts (account_id, first_seen, last_decided_at, updated_at)
                VALUES ('old', \(instant), \(instant), \(instant))
                """,
                """
                INSERT INTO ent_transactions (
                    transaction_id, original_transaction_id, account_id, product_id, product_type, environment,
                    purchase_date, expires_date, revoked_at, quantity, in_billing_retry, in_grace_period, owner_since,
                    decided_at, verdict_id, updated_at)
                VALUES ('2000000001', '2000000001', 'old', 'lifetime', 'non_consumable', 'Production', \(instant),
                    NULL, NULL, 1, \(no), \(no), \(instant), \(instant), 'v-old', \(instant))
                """,
                "INSERT INTO ent_consumables (account_id, product_id, units) VALUES ('old', 'coins.100', 4)",
            ])
            switch store {
            case let sqlite as SQLiteEntitlementStore: try await sqlite.migrate()
            case let postgres as PostgresEntitlementStore: try await postgres.migrate()
            default: Issue.record("unknown backend")
            }
            let before = try #require(try await store.account("old"))
            #expect(before.transactions.map(\.store) == [.appStore])
            #expect(before.transactions.first?.orderID == nil)
            #expect(before.consumables == [ConsumableProduct(store: .appStore, productID: "coins.100"): 4])
            let play = F.verdict(
                "p1", account: "old", .granted, decided: 40,
                transactions: [
                    F.transaction("GPA.8-1", product: "gems_50", quantity: 2, orderID: "GPA.8-1"),
                    F.transaction("GPA.8-2", product: "premium_forever", orderID: "GPA.8-2"),
                ], store: .googlePlay)
            let result = try await store.project(
                Self.batch([play], offset: 1), catalog: F.catalog, recordedAt: F.at(100))
            #expect(result.results == [.applied])
            let after = try #require(try await store.account("old"))
            #expect(Set(after.transactions.map(\.store)) == [.appStore, .googlePlay])
            #expect(after.consumables[ConsumableProduct(store: .googlePlay, productID: "gems_50")] == 2)
            let summaries = EntitlementSummary.summarize(after.transactions, catalog: F.catalog, at: F.at(200))
            #expect(summaries.map(\.entitlementID) == ["premium"])
            #expect(summaries.first?.active == true)
        }
    }
}
