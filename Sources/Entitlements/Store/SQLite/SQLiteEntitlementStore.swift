import CodedErrors
import Foundation
import Logging
import Messages
import Observability
import SQLiteStorage

/// The entitlement store on one machine (`sqlite:PATH`): one SQLite file in WAL mode, one connection for the
/// projection's writes and one for the API's reads (WAL lets them run at once), each owned by a serial queue.
/// A batch is one `BEGIN IMMEDIATE` transaction.
public final class SQLiteEntitlementStore: EntitlementStore {
    private let writer: SQLiteExecutor<EntitlementStoreError>
    private let reader: SQLiteExecutor<EntitlementStoreError>
    private let checkpointer: SQLiteExecutor<EntitlementStoreError>
    private let logger: Logger
    public let path: String

    public init(path: String, busyTimeout: Duration = .seconds(5), logger: Logger) throws {
        self.path = path
        self.logger = logger
        func executor(_ label: String) throws(EntitlementStoreError) -> SQLiteExecutor<EntitlementStoreError> {
            try SQLiteExecutor(
                path: path, busyTimeout: busyTimeout, setup: EntitlementSQLiteConnection.setup, label: label)
        }
        writer = try executor("verify.entitlements.write")
        reader = try executor("verify.entitlements.read")
        checkpointer = try executor("verify.entitlements.checkpoint")
    }

    /// Checkpoints the WAL every half second on a connection of its own (PASSIVE: it never blocks the writer or the
    /// readers), until cancelled; then closes the file. The writer has no automatic checkpoint, so a long copy never
    /// lands inside a batch's commit.
    public func run() async throws {
        while !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(500))
            await checkpoint()
        }
        await close()
    }

    /// One passive checkpoint (also for callers that do not run the store, such as benchmarks between batches).
    public func checkpoint() async {
        _ = try? await checkpointer.run { connection in try connection.query("PRAGMA wal_checkpoint(PASSIVE)") }
    }

    public func close() async {
        await writer.close()
        await reader.close()
        await checkpointer.close()
    }

    public func migrate() async throws { try await migrate(upTo: nil) }

    /// Applies the migrations up to `version` (all when nil): a store at an older version, for the upgrade's tests.
    func migrate(upTo version: Int?) async throws {
        let applied = try await writer.run { connection in
            try connection.inWriteTransaction { () throws -> [Int] in
                try connection.execute(
                    """
                    CREATE TABLE IF NOT EXISTS ent_migrations (
                        version INTEGER PRIMARY KEY NOT NULL, name TEXT NOT NULL, applied_at INTEGER NOT NULL)
                    """)
                let current =
                    try connection.query("SELECT COALESCE(MAX(version), 0) FROM ent_migrations").first?.first?.integer
                    ?? 0
                let pending = try EntitlementSchema.pending(EntitlementSchema.sqlite, after: Int(current))
                    .filter { $0.version <= version ?? Int.max }
                for migration in pending {
                    for statement in migration.statements { try connection.execute(statement) }
                    try connection.query(
                        "INSERT INTO ent_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                        [SQLiteValue(migration.version), .text(migration.name), SQLiteValue(Date())])
                }
                return pending.map(\.version)
            }
        }
        EntitlementSchema.logApplied(applied, store: path, logger: logger)
    }

    // MARK: Projection

    public func project(
        _ batch: ProjectionBatch, catalog: Catalog, recordedAt: Date
    ) async throws -> ProjectionBatchResult {
        try await writer.run { connection in
            try connection.inWriteTransaction { () throws -> ProjectionBatchResult in
                var state = try Self.load(ProjectionKeys(batch.inputs), connection: connection)
                var results: [EntitlementProjection.Result] = []
                results.reserveCapacity(batch.inputs.count)
                for input in batch.inputs {
                    results.append(
                        EntitlementProjection.apply(input, to: &state, catalog: catalog, recordedAt: recordedAt))
                }
                let events = try Self.write(
                    state, positions: batch.positions, webhookURLs: batch.webhookURLs, recordedAt: recordedAt,
                    rejectionsPerAccount: batch.rejectionsPerAccount, connection: connection)
                return ProjectionBatchResult(results: results, events: events)
            }
        }
    }

    static func load(_ keys: ProjectionKeys, connection: EntitlementSQLiteConnection) throws -> ProjectionState {
        var state = ProjectionState()
        for row in try queryIn("SELECT id FROM ent_applied WHERE id IN", keys.dedupeIDs, connection) {
            if let id = row[0].text { state.appliedIDs.insert(id) }
        }
        var owners: Set<String> = []
        let select = "SELECT \(columns) FROM ent_transactions WHERE"
        for row in try queryIn("\(select) transaction_id IN", Array(keys.transactionIDs), connection)
            + queryIn("\(select) original_transaction_id IN", Array(keys.originalIDs), connection)
        {
            let transaction = try transaction(row)
            state.load(transaction)
            owners.insert(transaction.accountID)
        }
        // Every non-consumable of the accounts involved, and of the owners found, so their entitlements are whole.
        for row in try queryIn(
            "\(select) product_type <> 'consumable' AND account_id IN", Array(keys.accounts.union(owners)), connection)
        {
            state.load(try transaction(row))
        }
        return state
    }

    /// `prefix (?, ?, …)` over `values` in chunks of a fixed size (the last one padded with a repeat), so a handful
    /// of cached statements serve any batch: one statement per 64 keys instead of one per key.
    static func queryIn(
        _ prefix: String, _ values: [String], _ connection: EntitlementSQLiteConnection
    ) throws -> [[SQLiteValue]] {
        guard !values.isEmpty else { return [] }
        let chunk = 64
        let placeholders = "(" + Array(repeating: "?", count: chunk).joined(separator: ",") + ")"
        var rows: [[SQLiteValue]] = []
        var start = 0
        while start < values.count {
            var bindings = values[start..<min(start + chunk, values.count)].map { SQLiteValue.text($0) }
            while bindings.count < chunk { bindings.append(bindings[bindings.count - 1]) }
            rows += try connection.query("\(prefix) \(placeholders)", bindings)
            start += chunk
        }
        return rows
    }

    /// Writes what a batch changed; returns the events that are new (an event already stored is not published
    /// again).
    static func write(
        _ state: ProjectionState, positions: [TopicPosition], webhookURLs: [String], recordedAt: Date,
        rejectionsPerAccount: Int = ProjectionBatch.defaultRejectionsPerAccount,
        connection: EntitlementSQLiteConnection
    ) throws -> [LifecycleEvent] {
        let now = SQLiteValue(recordedAt)
        for applied in state.appliedVerdicts {
            try connection.query(
                """
                INSERT INTO ent_applied (id, account_id, outcome, decided_at, applied_at) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (id) DO NOTHING
                """,
                [
                    .text(applied.id), SQLiteValue(applied.accountID), SQLiteValue(applied.outcome),
                    SQLiteValue(applied.decidedAt), now,
                ])
        }
        for id in state.changedTransactionIDs {
            guard let t = state.transactions[id] else { continue }
            try connection.query(
                """
                INSERT INTO ent_transactions (\(columns))
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                \(EntitlementSchema.transactionUpsert)
                """,
                [
                    .text(t.transactionID), .text(t.originalTransactionID), .text(t.accountID), .text(t.productID),
                    .text(t.productType.rawValue), SQLiteValue(t.environment), SQLiteValue(t.purchaseDate),
                    SQLiteValue(t.expiresDate), SQLiteValue(t.revokedAt), SQLiteValue(t.quantity),
                    SQLiteValue(t.inBillingRetry),
                    SQLiteValue(t.inGracePeriod), SQLiteValue(t.ownerSince), SQLiteValue(t.decidedAt),
                    .text(t.verdictID),
                    SQLiteValue(t.updatedAt), .text(t.store.rawValue), SQLiteValue(t.orderID),
                    SQLiteValue(t.purchaseToken), SQLiteValue(t.paused),
                ])
        }
        for (key, delta) in state.consumableDeltas where delta != 0 {
            try connection.query(
                """
                INSERT INTO ent_consumables (account_id, store, product_id, units) VALUES (?, ?, ?, ?)
                ON CONFLICT (account_id, store, product_id) DO UPDATE SET units = units + excluded.units
                """, [.text(key.accountID), .text(key.store.rawValue), .text(key.productID), SQLiteValue(delta)])
        }
        let kept = RejectionRetention(state, keeping: rejectionsPerAccount)
        for (account, decidedAt) in kept.accountsOnlyUpdated {
            try connection.query(
                """
                UPDATE ent_accounts SET last_decided_at = MAX(COALESCE(last_decided_at, ?), ?), updated_at = ?
                WHERE account_id = ?
                """, [SQLiteValue(decidedAt), SQLiteValue(decidedAt), now, .text(account)])
        }
        for (account, decidedAt) in kept.accounts {
            try connection.query(
                """
                INSERT INTO ent_accounts (account_id, first_seen, last_decided_at, updated_at) VALUES (?, ?, ?, ?)
                ON CONFLICT (account_id) DO UPDATE SET
                    last_decided_at = CASE WHEN excluded.last_decided_at IS NULL THEN last_decided_at
                        WHEN last_decided_at IS NULL THEN excluded.last_decided_at
                        ELSE MAX(last_decided_at, excluded.last_decided_at) END,
                    updated_at = excluded.updated_at
                """, [.text(account), now, SQLiteValue(decidedAt), now])
        }
        for entry in kept.history {
            try connection.query(
                """
                INSERT INTO ent_history (account_id, event_id, entry_json, rejection) VALUES (?, ?, ?, ?)
                ON CONFLICT DO NOTHING
                """,
                [
                    .text(entry.accountID), SQLiteValue(entry.event?.eventID),
                    .text(String(decoding: entry.json, as: UTF8.self)), SQLiteValue(entry.isRejection),
                ])
        }
        for account in kept.accountsWithNewRejections {
            try connection.query(
                Self.evictionSQL, [.text(account), .text(account), SQLiteValue(rejectionsPerAccount - 1)])
        }
        var newEvents: [LifecycleEvent] = []
        for event in state.events {
            try connection.query(
                """
                INSERT INTO ent_events (event_id, account_id, event_json, created_at) VALUES (?, ?, ?, ?)
                ON CONFLICT (event_id) DO NOTHING
                """,
                [.text(event.eventID), .text(event.accountID), .text(String(decoding: event.json, as: UTF8.self)), now])
            guard connection.changes == 1 else { continue }
            newEvents.append(event)
            for url in webhookURLs {
                try connection.query(
                    """
                    INSERT INTO ent_webhook_deliveries (event_id, url, attempts, next_attempt_at) VALUES (?, ?, 0, ?)
                    ON CONFLICT DO NOTHING
                    """, [.text(event.eventID), .text(url), now])
            }
        }
        for position in positions {
            try connection.query(
                """
                INSERT INTO ent_positions (topic, partition, next_offset, record_time, updated_at) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (topic, partition) DO UPDATE SET
                    next_offset = MAX(next_offset, excluded.next_offset),
                    record_time = CASE WHEN excluded.record_time IS NULL THEN record_time
                        WHEN record_time IS NULL THEN excluded.record_time
                        ELSE MAX(record_time, excluded.record_time) END,
                    updated_at = excluded.updated_at
                """,
                [
                    .text(position.topic), SQLiteValue(Int(position.partition)), .integer(position.nextOffset),
                    SQLiteValue(position.recordTime), now,
                ])
        }
        return newEvents
    }

    // MARK: Reads

    public func account(_ accountID: String) async throws -> AccountRecord? {
        try await reader.run { connection in
            try connection.execute("BEGIN")
            defer { try? connection.execute("COMMIT") }
            guard
                let row = try connection.query(
                    "SELECT first_seen, last_decided_at FROM ent_accounts WHERE account_id = ?", [.text(accountID)]
                ).first
            else { return nil }
            let transactions = try connection.query(
                "SELECT \(Self.columns) FROM ent_transactions WHERE account_id = ?", [.text(accountID)]
            ).map(Self.transaction)
            var consumables: [ConsumableProduct: Int] = [:]
            for row in try connection.query(
                "SELECT store, product_id, units FROM ent_consumables WHERE account_id = ?", [.text(accountID)])
            {
                guard let store = row[0].text.flatMap(Store.init(rawValue:)), let product = row[1].text else {
                    throw EntitlementStoreError(.corrupt, "an ent_consumables row could not be read")
                }
                consumables[ConsumableProduct(store: store, productID: product)] = Int(row[2].integer ?? 0)
            }
            return AccountRecord(
                accountID: accountID, firstSeen: row[0].date ?? Date(timeIntervalSince1970: 0),
                lastDecidedAt: row[1].date ?? row[0].date ?? Date(timeIntervalSince1970: 0),
                transactions: transactions, consumables: consumables)
        }
    }

    public func history(of accountID: String, before: Int64?, limit: Int) async throws -> [HistoryEntry] {
        try await reader.run { connection in
            try connection.query(
                """
                SELECT sequence, entry_json FROM ent_history WHERE account_id = ? AND sequence < ?
                ORDER BY sequence DESC LIMIT ?
                """, [.text(accountID), .integer(before ?? Int64.max), SQLiteValue(limit)]
            ).map { row in
                var entry = try StoredJSON.decode(HistoryEntry.self, row[1].text ?? "")
                entry.sequence = row[0].integer ?? 0
                return entry
            }
        }
    }

    public func transactions(matching id: String) async throws -> [ProjectedTransaction] {
        try await reader.run { connection in
            for column in TransactionMatch.allCases {
                let found = try connection.query(
                    "SELECT \(Self.columns) FROM ent_transactions WHERE \(column.rawValue) = ?", [.text(id)])
                if !found.isEmpty { return try found.map(Self.transaction) }
            }
            return []
        }
    }

    public func progress() async throws -> ProjectionProgress {
        try await reader.run { connection in
            ProjectionProgress(
                positions: try connection.query(
                    "SELECT topic, partition, next_offset, record_time FROM ent_positions ORDER BY topic, partition"
                ).map { row in
                    TopicPosition(
                        topic: row[0].text ?? "", partition: Int32(row[1].integer ?? 0),
                        nextOffset: row[2].integer ?? 0,
                        recordTime: row[3].date)
                })
        }
    }

    public func unpublishedEvents(limit: Int) async throws -> [LifecycleEvent] {
        try await reader.run { connection in
            try connection.query(
                "SELECT event_json FROM ent_events WHERE published_at IS NULL ORDER BY sequence LIMIT ?",
                [SQLiteValue(limit)]
            ).map { try StoredJSON.decode(LifecycleEvent.self, $0[0].text ?? "") }
        }
    }

    public func markPublished(_ eventIDs: [String], at instant: Date) async throws {
        try await writer.run { connection in
            try connection.inWriteTransaction {
                for id in eventIDs {
                    try connection.query(
                        "UPDATE ent_events SET published_at = ? WHERE event_id = ? AND published_at IS NULL",
                        [SQLiteValue(instant), .text(id)])
                }
            }
        }
    }

    public func dueWebhookDeliveries(at instant: Date, limit: Int) async throws -> [WebhookDelivery] {
        try await reader.run { connection in
            try connection.query(
                """
                SELECT e.event_json, d.url, d.attempts FROM ent_webhook_deliveries d
                JOIN ent_events e ON e.event_id = d.event_id
                WHERE d.delivered_at IS NULL AND d.next_attempt_at IS NOT NULL AND d.next_attempt_at <= ?
                ORDER BY d.next_attempt_at LIMIT ?
                """, [SQLiteValue(instant), SQLiteValue(limit)]
            ).map { row in
                WebhookDelivery(
                    event: try StoredJSON.decode(LifecycleEvent.self, row[0].text ?? ""), url: row[1].text ?? "",
                    attempts: Int(row[2].integer ?? 0))
            }
        }
    }

    public func recordWebhookAttempt(
        _ delivery: WebhookDelivery, delivered: Bool, nextAttempt: Date?, at instant: Date
    ) async throws {
        try await writer.run { connection in
            try connection.inWriteTransaction {
                _ = try connection.query(
                    """
                    UPDATE ent_webhook_deliveries SET attempts = attempts + 1, delivered_at = ?, next_attempt_at = ?
                    WHERE event_id = ? AND url = ?
                    """,
                    [
                        delivered ? SQLiteValue(instant) : .null, delivered ? .null : SQLiteValue(nextAttempt),
                        .text(delivery.event.eventID), .text(delivery.url),
                    ])
            }
        }
    }

    public func accountsWithExpiries(
        in window: ClosedRange<Date>, after account: String, limit: Int
    ) async throws -> [String] {
        try await reader.run { connection in
            try connection.query(
                """
                SELECT DISTINCT account_id FROM ent_transactions
                WHERE revoked_at IS NULL AND expires_date > ? AND expires_date <= ?
                    AND product_type IN ('auto_renewable', 'non_renewing') AND account_id > ?
                ORDER BY account_id LIMIT ?
                """,
                [SQLiteValue(window.lowerBound), SQLiteValue(window.upperBound), .text(account), SQLiteValue(limit)]
            ).compactMap { $0[0].text }
        }
    }

    public func record(
        events: [LifecycleEvent], webhookURLs: [String], recordedAt: Date
    ) async throws -> [LifecycleEvent] {
        guard !events.isEmpty else { return [] }
        return try await writer.run { connection in
            try connection.inWriteTransaction { () throws -> [LifecycleEvent] in
                try Self.write(
                    ProjectionState(recording: events, at: recordedAt), positions: [], webhookURLs: webhookURLs,
                    recordedAt: recordedAt, connection: connection)
            }
        }
    }

    public func ping() async throws {
        _ = try await reader.run { connection in try connection.query("SELECT 1") }
    }

    // MARK: Rows

    /// Drops an account's rejections older than its newest N (bindings: account, account, N - 1).
    static let evictionSQL = """
        DELETE FROM ent_history WHERE account_id = ? AND rejection = 1 AND sequence < (
            SELECT sequence FROM ent_history WHERE account_id = ? AND rejection = 1
            ORDER BY sequence DESC LIMIT 1 OFFSET ?)
        """

    static let columns = """
        transaction_id, original_transaction_id, account_id, product_id, product_type, environment, purchase_date, \
        expires_date, revoked_at, quantity, in_billing_retry, in_grace_period, owner_since, decided_at, verdict_id, \
        updated_at, store, order_id, purchase_token, paused
        """

    static func transaction(_ row: [SQLiteValue]) throws -> ProjectedTransaction {
        guard row.count == 20, let id = row[0].text, let original = row[1].text, let account = row[2].text,
            let product = row[3].text, let type = row[4].text.flatMap(ProductType.init(rawValue:)),
            let ownerSince = row[12].date, let decidedAt = row[13].date, let verdictID = row[14].text,
            let updatedAt = row[15].date, let store = row[16].text.flatMap(Store.init(rawValue:))
        else { throw EntitlementStoreError(.corrupt, "an ent_transactions row could not be read") }
        return ProjectedTransaction(
            transactionID: id, originalTransactionID: original, accountID: account, productID: product,
            productType: type, environment: row[5].text, purchaseDate: row[6].date, expiresDate: row[7].date,
            revokedAt: row[8].date, quantity: Int(row[9].integer ?? 1), inBillingRetry: row[10].bool,
            inGracePeriod: row[11].bool, paused: row[19].bool, ownerSince: ownerSince, decidedAt: decidedAt,
            verdictID: verdictID, updatedAt: updatedAt, store: store, orderID: row[17].text,
            purchaseToken: row[18].text)
    }
}
