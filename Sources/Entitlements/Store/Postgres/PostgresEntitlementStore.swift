import CodedErrors
import Foundation
import Logging
import Messages
import Observability
import PostgresNIO
import PostgresSettings
import SQLiteStorage

/// The entitlement store for a cluster of entitlement services
/// (`postgres://user[:password]@host[:port]/db[?sslmode=MODE][&sslrootcert=PATH][&schema=NAME]`, read by
/// `PostgresURL` as the ledger's): a postgres-nio
/// pool, the ledger's deadline discipline (no connection within the connect timeout while nobody got one means
/// `unavailable`; every operation ends by its timeout), and each batch one SERIALIZABLE transaction in a handful of
/// round trips (rows go in as one JSON document per table). Two instances that touch the same account at once
/// conflict, one rolls back (`busy`) and retries its batch.
public final class PostgresEntitlementStore: EntitlementStore {
    public struct Settings: Sendable {
        public var operationTimeout: Duration = .seconds(10)
        public var connectTimeout: Duration = .seconds(3)
        public var maximumConnections: Int = 8
        public init() {}
    }

    private let pool: PostgresPool
    private let logger: Logger
    public var target: String { pool.target }
    public let schema: String?

    /// Key of the advisory lock that serializes migrations ("vw-entit" in ASCII).
    static let migrationLockKey: Int64 = 0x7677_2D65_6E74_6974

    public init(url: String, settings: Settings = .init(), logger: Logger) throws {
        do {
            pool = try PostgresPool(
                url: url, noun: "store URL", storeName: "entitlement store", connectTimeout: settings.connectTimeout,
                maximumConnections: settings.maximumConnections, operationTimeout: settings.operationTimeout,
                applicationName: "verify-worker-entitlements", logger: logger)
        } catch {
            throw EntitlementStoreError(.invalidConfiguration, error.message)
        }
        self.schema = pool.url.schema
        self.logger = logger
    }

    public func run() async throws { await pool.run() }

    public func migrate() async throws { try await migrate(upTo: nil) }

    /// Applies the migrations up to `version` (all when nil): a store at an older version, for the upgrade's tests.
    func migrate(upTo version: Int?) async throws {
        if let refusal = await pool.certificateRefusal(logger: logger) {
            throw EntitlementStoreError(.invalidConfiguration, refusal)
        }
        let schema = self.schema
        let applied = try await operation("migrate") { connection, logger in
            try await Self.inTransaction(connection, logger: logger) {
                try await connection.query("SELECT pg_advisory_xact_lock(\(Self.migrationLockKey))", logger: logger)
                if let schema {
                    try await connection.query(
                        PostgresQuery(unsafeSQL: "CREATE SCHEMA IF NOT EXISTS \(schema)"), logger: logger)
                }
                try await connection.query(
                    """
                    CREATE TABLE IF NOT EXISTS ent_migrations (
                        version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL)
                    """, logger: logger)
                var current = 0
                for try await version in try await connection.query(
                    "SELECT COALESCE(MAX(version), 0) FROM ent_migrations", logger: logger
                ).decode(Int.self) {
                    current = version
                }
                let pending = try EntitlementSchema.pending(EntitlementSchema.postgres, after: current)
                    .filter { $0.version <= version ?? Int.max }
                for migration in pending {
                    for statement in migration.statements {
                        try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                    }
                    try await connection.query(
                        "INSERT INTO ent_migrations (version, name, applied_at) VALUES (\(migration.version), \(migration.name), now())",
                        logger: logger)
                }
                return pending.map(\.version)
            }
        }
        EntitlementSchema.logApplied(applied, store: target, logger: logger)
    }

    // MARK: Projection

    public func project(
        _ batch: ProjectionBatch, catalog: Catalog, recordedAt: Date
    ) async throws -> ProjectionBatchResult {
        try await operation("project") { connection, logger in
            try await Self.inTransaction(connection, logger: logger, serializable: true) {
                let keys = ProjectionKeys(batch.inputs)
                var state = try await Self.load(keys, connection: connection, logger: logger)
                var results: [EntitlementProjection.Result] = []
                for input in batch.inputs {
                    results.append(
                        EntitlementProjection.apply(input, to: &state, catalog: catalog, recordedAt: recordedAt))
                }
                let events = try await Self.write(
                    state, batch: batch, recordedAt: recordedAt, connection: connection, logger: logger)
                return ProjectionBatchResult(results: results, events: events)
            }
        }
    }

    static func load(
        _ keys: ProjectionKeys, connection: PostgresConnection, logger: Logger
    ) async throws -> ProjectionState {
        var state = ProjectionState()
        for try await id in try await connection.query(
            "SELECT id FROM ent_applied WHERE id = ANY(\(keys.dedupeIDs))", logger: logger
        ).decode(String.self) {
            state.appliedIDs.insert(id)
        }
        var owners: Set<String> = []
        let rows = try await connection.query(
            """
            SELECT \(unescaped: columns) FROM ent_transactions
            WHERE transaction_id = ANY(\(Array(keys.transactionIDs))) OR original_transaction_id = ANY(\(Array(keys.originalIDs)))
                OR (account_id = ANY(\(Array(keys.accounts))) AND product_type <> 'consumable')
            """, logger: logger)
        for try await row in rows {
            let transaction = try transaction(row.makeRandomAccess())
            state.load(transaction)
            owners.insert(transaction.accountID)
        }
        let others = Array(owners.subtracting(keys.accounts))
        if !others.isEmpty {
            for try await row in try await connection.query(
                """
                SELECT \(unescaped: columns) FROM ent_transactions
                WHERE account_id = ANY(\(others)) AND product_type <> 'consumable'
                """, logger: logger)
            {
                state.load(try transaction(row.makeRandomAccess()))
            }
        }
        return state
    }

    /// Rows as one JSON array per table (jsonb_to_recordset): a handful of round trips per batch, whatever its size.
    static func rows<T>(_ items: some Sequence<T>, _ write: (T, inout JSONWriter) -> Void) -> String {
        var writer = JSONWriter(capacity: 4096)
        writer.beginArray()
        for item in items {
            writer.beginObject()
            write(item, &writer)
            writer.endObject()
        }
        writer.endArray()
        return writer.text
    }

    static func write(
        _ state: ProjectionState, batch: ProjectionBatch, recordedAt: Date, connection: PostgresConnection,
        logger: Logger
    ) async throws -> [LifecycleEvent] {
        if !state.appliedVerdicts.isEmpty {
            let rows = Self.rows(state.appliedVerdicts) { applied, writer in
                writer.field("id", applied.id)
                writer.field("account_id", applied.accountID)
                writer.field("outcome", applied.outcome)
                writer.field("decided_at", applied.decidedAt)
            }
            try await connection.query(
                """
                INSERT INTO ent_applied (id, account_id, outcome, decided_at, applied_at)
                SELECT id, account_id, outcome, decided_at, \(recordedAt)
                FROM jsonb_to_recordset(\(rows)::jsonb)
                    AS x(id text, account_id text, outcome text, decided_at timestamptz)
                ON CONFLICT (id) DO NOTHING
                """, logger: logger)
        }
        let changed = state.changedTransactionIDs.compactMap { state.transactions[$0] }
        if !changed.isEmpty {
            let rows = Self.rows(changed) { t, writer in
                writer.field("transaction_id", t.transactionID)
                writer.field("original_transaction_id", t.originalTransactionID)
                writer.field("account_id", t.accountID)
                writer.field("product_id", t.productID)
                writer.field("product_type", t.productType.rawValue)
                writer.field("environment", t.environment)
                writer.field("purchase_date", t.purchaseDate)
                writer.field("expires_date", t.expiresDate)
                writer.field("revoked_at", t.revokedAt)
                writer.field("quantity", t.quantity)
                writer.field("in_billing_retry", t.inBillingRetry)
                writer.field("in_grace_period", t.inGracePeriod)
                writer.field("owner_since", t.ownerSince)
                writer.field("decided_at", t.decidedAt)
                writer.field("verdict_id", t.verdictID)
                writer.field("updated_at", t.updatedAt)
                writer.field("store", t.store.rawValue)
                writer.field("order_id", t.orderID)
                writer.field("purchase_token", t.purchaseToken)
                writer.field("paused", t.paused)
            }
            try await connection.query(
                """
                INSERT INTO ent_transactions (\(unescaped: columns))
                SELECT \(unescaped: columns) FROM jsonb_to_recordset(\(rows)::jsonb) AS x(
                    transaction_id text, original_transaction_id text, account_id text, product_id text,
                    product_type text, environment text, purchase_date timestamptz, expires_date timestamptz,
                    revoked_at timestamptz, quantity integer, in_billing_retry boolean, in_grace_period boolean,
                    owner_since timestamptz, decided_at timestamptz, verdict_id text, updated_at timestamptz,
                    store text, order_id text, purchase_token text, paused boolean)
                \(unescaped: EntitlementSchema.transactionUpsert)
                """, logger: logger)
        }
        let deltas = state.consumableDeltas.filter { $0.value != 0 }
        if !deltas.isEmpty {
            let rows = Self.rows(deltas) { delta, writer in
                writer.field("account_id", delta.key.accountID)
                writer.field("store", delta.key.store.rawValue)
                writer.field("product_id", delta.key.productID)
                writer.field("units", delta.value)
            }
            try await connection.query(
                """
                INSERT INTO ent_consumables (account_id, store, product_id, units)
                SELECT account_id, store, product_id, units
                FROM jsonb_to_recordset(\(rows)::jsonb)
                    AS x(account_id text, store text, product_id text, units bigint)
                ON CONFLICT (account_id, store, product_id) DO UPDATE SET units = ent_consumables.units + excluded.units
                """, logger: logger)
        }
        let kept = RejectionRetention(state, keeping: batch.rejectionsPerAccount)
        if !kept.accountsOnlyUpdated.isEmpty {
            let rows = Self.rows(kept.accountsOnlyUpdated) { account, writer in
                writer.field("account_id", account.key)
                writer.field("last_decided_at", account.value)
            }
            try await connection.query(
                """
                UPDATE ent_accounts SET last_decided_at = GREATEST(ent_accounts.last_decided_at, x.last_decided_at),
                    updated_at = \(recordedAt)
                FROM jsonb_to_recordset(\(rows)::jsonb) AS x(account_id text, last_decided_at timestamptz)
                WHERE ent_accounts.account_id = x.account_id
                """, logger: logger)
        }
        let accounts = kept.accounts
        if !accounts.isEmpty {
            let rows = Self.rows(accounts) { account, writer in
                writer.field("account_id", account.key)
                writer.field("last_decided_at", account.value)
            }
            try await connection.query(
                """
                INSERT INTO ent_accounts (account_id, first_seen, last_decided_at, updated_at)
                SELECT account_id, \(recordedAt), last_decided_at, \(recordedAt)
                FROM jsonb_to_recordset(\(rows)::jsonb) AS x(account_id text, last_decided_at timestamptz)
                ON CONFLICT (account_id) DO UPDATE SET
                    last_decided_at = GREATEST(ent_accounts.last_decided_at, excluded.last_decided_at),
                    updated_at = excluded.updated_at
                """, logger: logger)
        }
        if !kept.history.isEmpty {
            let rows = Self.rows(kept.history) { entry, writer in
                writer.field("account_id", entry.accountID)
                writer.field("event_id", entry.event?.eventID)
                writer.field("entry_json", String(decoding: entry.json, as: UTF8.self))
                writer.field("rejection", entry.isRejection)
            }
            try await connection.query(
                """
                INSERT INTO ent_history (account_id, event_id, entry_json, rejection)
                SELECT value ->> 'account_id', value ->> 'event_id', value ->> 'entry_json',
                    (value ->> 'rejection')::boolean
                FROM jsonb_array_elements(\(rows)::jsonb) WITH ORDINALITY AS x(value, ordinality)
                ORDER BY ordinality
                ON CONFLICT (event_id) DO NOTHING
                """, logger: logger)
        }
        if !kept.accountsWithNewRejections.isEmpty {
            // Each account's rejections older than its newest N (the Nth newest's sequence is the bound).
            let rows = Self.rows(kept.accountsWithNewRejections) { account, writer in
                writer.field("account_id", account)
            }
            try await connection.query(
                """
                DELETE FROM ent_history h USING (
                    SELECT x.account_id, (
                        SELECT sequence FROM ent_history WHERE account_id = x.account_id AND rejection
                        ORDER BY sequence DESC LIMIT 1 OFFSET \(batch.rejectionsPerAccount - 1)) AS bound
                    FROM jsonb_to_recordset(\(rows)::jsonb) AS x(account_id text)) b
                WHERE h.account_id = b.account_id AND h.rejection AND h.sequence < b.bound
                """, logger: logger)
        }
        var newEvents: [LifecycleEvent] = []
        if !state.events.isEmpty {
            let rows = Self.rows(state.events) { event, writer in
                writer.field("event_id", event.eventID)
                writer.field("account_id", event.accountID)
                writer.field("event_json", String(decoding: event.json, as: UTF8.self))
            }
            var inserted = Set<String>()
            for try await id in try await connection.query(
                """
                INSERT INTO ent_events (event_id, account_id, event_json, created_at)
                SELECT value ->> 'event_id', value ->> 'account_id', value ->> 'event_json', \(recordedAt)
                FROM jsonb_array_elements(\(rows)::jsonb) WITH ORDINALITY AS x(value, ordinality)
                ORDER BY ordinality
                ON CONFLICT (event_id) DO NOTHING
                RETURNING event_id
                """, logger: logger
            ).decode(String.self) {
                inserted.insert(id)
            }
            newEvents = state.events.filter { inserted.contains($0.eventID) }
            if !newEvents.isEmpty, !batch.webhookURLs.isEmpty {
                try await connection.query(
                    """
                    INSERT INTO ent_webhook_deliveries (event_id, url, attempts, next_attempt_at)
                    SELECT e, u, 0, \(recordedAt) FROM unnest(\(newEvents.map(\.eventID))::text[]) AS e
                    CROSS JOIN unnest(\(batch.webhookURLs)::text[]) AS u
                    ON CONFLICT DO NOTHING
                    """, logger: logger)
            }
        }
        if !batch.positions.isEmpty {
            let rows = Self.rows(batch.positions) { p, writer in
                writer.field("topic", p.topic)
                writer.field("partition", Int(p.partition))
                writer.field("next_offset", p.nextOffset)
                writer.field("record_time", p.recordTime)
            }
            try await connection.query(
                """
                INSERT INTO ent_positions (topic, partition, next_offset, record_time, updated_at)
                SELECT topic, partition, next_offset, record_time, \(recordedAt)
                FROM jsonb_to_recordset(\(rows)::jsonb)
                    AS x(topic text, partition integer, next_offset bigint, record_time timestamptz)
                ON CONFLICT (topic, partition) DO UPDATE SET
                    next_offset = GREATEST(ent_positions.next_offset, excluded.next_offset),
                    record_time = GREATEST(ent_positions.record_time, excluded.record_time),
                    updated_at = excluded.updated_at
                """, logger: logger)
        }
        return newEvents
    }

    // MARK: Reads

    public func account(_ accountID: String) async throws -> AccountRecord? {
        try await operation("account") { connection, logger in
            var header: (Date, Date?)?
            for try await row in try await connection.query(
                "SELECT first_seen, last_decided_at FROM ent_accounts WHERE account_id = \(accountID)", logger: logger
            ).decode((Date, Date?).self) {
                header = row
            }
            guard let header else { return nil }
            var transactions: [ProjectedTransaction] = []
            for try await row in try await connection.query(
                "SELECT \(unescaped: Self.columns) FROM ent_transactions WHERE account_id = \(accountID)",
                logger: logger)
            {
                transactions.append(try Self.transaction(row.makeRandomAccess()))
            }
            var consumables: [ConsumableProduct: Int] = [:]
            for try await (storeName, product, units) in try await connection.query(
                "SELECT store, product_id, units FROM ent_consumables WHERE account_id = \(accountID)", logger: logger
            ).decode((String, String, Int64).self) {
                guard let store = Store(rawValue: storeName) else {
                    throw EntitlementStoreError(.corrupt, "an ent_consumables row has an unknown store")
                }
                consumables[ConsumableProduct(store: store, productID: product)] = Int(units)
            }
            return AccountRecord(
                accountID: accountID, firstSeen: header.0, lastDecidedAt: header.1 ?? header.0,
                transactions: transactions, consumables: consumables)
        }
    }

    public func history(of accountID: String, before: Int64?, limit: Int) async throws -> [HistoryEntry] {
        try await operation("history") { connection, logger in
            var entries: [HistoryEntry] = []
            for try await (sequence, json) in try await connection.query(
                """
                SELECT sequence, entry_json FROM ent_history WHERE account_id = \(accountID) AND sequence < \(before ?? Int64.max)
                ORDER BY sequence DESC LIMIT \(limit)
                """, logger: logger
            ).decode((Int64, String).self) {
                var entry = try StoredJSON.decode(HistoryEntry.self, json)
                entry.sequence = sequence
                entries.append(entry)
            }
            return entries
        }
    }

    public func transactions(matching id: String) async throws -> [ProjectedTransaction] {
        try await operation("transactions") { connection, logger in
            var found: [ProjectedTransaction] = []
            for try await row in try await connection.query(
                """
                SELECT \(unescaped: Self.columns) FROM ent_transactions
                WHERE transaction_id = \(id) OR original_transaction_id = \(id) OR order_id = \(id)
                    OR purchase_token = \(id)
                """, logger: logger)
            {
                found.append(try Self.transaction(row.makeRandomAccess()))
            }
            return TransactionMatch.best(found, for: id)
        }
    }

    public func progress() async throws -> ProjectionProgress {
        try await operation("progress") { connection, logger in
            var positions: [TopicPosition] = []
            for try await (topic, partition, offset, time) in try await connection.query(
                "SELECT topic, partition, next_offset, record_time FROM ent_positions ORDER BY topic, partition",
                logger: logger
            ).decode((String, Int32, Int64, Date?).self) {
                positions.append(
                    TopicPosition(topic: topic, partition: partition, nextOffset: offset, recordTime: time))
            }
            return ProjectionProgress(positions: positions)
        }
    }

    public func unpublishedEvents(limit: Int) async throws -> [LifecycleEvent] {
        try await operation("unpublished events") { connection, logger in
            var events: [LifecycleEvent] = []
            for try await json in try await connection.query(
                "SELECT event_json FROM ent_events WHERE published_at IS NULL ORDER BY sequence LIMIT \(limit)",
                logger: logger
            ).decode(String.self) {
                events.append(try StoredJSON.decode(LifecycleEvent.self, json))
            }
            return events
        }
    }

    public func markPublished(_ eventIDs: [String], at instant: Date) async throws {
        try await operation("mark published") { connection, logger in
            _ = try await connection.query(
                "UPDATE ent_events SET published_at = \(instant) WHERE event_id = ANY(\(eventIDs)) AND published_at IS NULL",
                logger: logger)
        }
    }

    public func dueWebhookDeliveries(at instant: Date, limit: Int) async throws -> [WebhookDelivery] {
        try await operation("due webhooks") { connection, logger in
            var deliveries: [WebhookDelivery] = []
            for try await (json, url, attempts) in try await connection.query(
                """
                SELECT e.event_json, d.url, d.attempts FROM ent_webhook_deliveries d
                JOIN ent_events e ON e.event_id = d.event_id
                WHERE d.delivered_at IS NULL AND d.next_attempt_at IS NOT NULL AND d.next_attempt_at <= \(instant)
                ORDER BY d.next_attempt_at LIMIT \(limit)
                """, logger: logger
            ).decode((String, String, Int).self) {
                deliveries.append(
                    WebhookDelivery(
                        event: try StoredJSON.decode(LifecycleEvent.self, json), url: url, attempts: attempts))
            }
            return deliveries
        }
    }

    public func recordWebhookAttempt(
        _ delivery: WebhookDelivery, delivered: Bool, nextAttempt: Date?, at instant: Date
    ) async throws {
        let deliveredAt: Date? = delivered ? instant : nil
        let next: Date? = delivered ? nil : nextAttempt
        try await operation("webhook attempt") { connection, logger in
            _ = try await connection.query(
                """
                UPDATE ent_webhook_deliveries SET attempts = attempts + 1, delivered_at = \(deliveredAt),
                    next_attempt_at = \(next)
                WHERE event_id = \(delivery.event.eventID) AND url = \(delivery.url)
                """, logger: logger)
        }
    }

    public func accountsWithExpiries(
        in window: ClosedRange<Date>, after account: String, limit: Int
    ) async throws -> [String] {
        try await operation("expiries") { connection, logger in
            var accounts: [String] = []
            for try await account in try await connection.query(
                """
                SELECT DISTINCT account_id FROM ent_transactions
                WHERE revoked_at IS NULL AND expires_date > \(window.lowerBound) AND expires_date <= \(window.upperBound)
                    AND product_type IN ('auto_renewable', 'non_renewing') AND account_id > \(account)
                ORDER BY account_id LIMIT \(limit)
                """, logger: logger
            ).decode(String.self) {
                accounts.append(account)
            }
            return accounts
        }
    }

    public func record(
        events: [LifecycleEvent], webhookURLs: [String], recordedAt: Date
    ) async throws -> [LifecycleEvent] {
        guard !events.isEmpty else { return [] }
        return try await operation("record events") { connection, logger in
            try await Self.inTransaction(connection, logger: logger) {
                try await Self.write(
                    ProjectionState(recording: events, at: recordedAt),
                    batch: ProjectionBatch(inputs: [], webhookURLs: webhookURLs), recordedAt: recordedAt,
                    connection: connection, logger: logger)
            }
        }
    }

    public func ping() async throws {
        try await operation("ping") { connection, logger in
            _ = try await connection.query("SELECT 1", logger: logger)
        }
    }

    // MARK: Plumbing

    static let columns = SQLiteEntitlementStore.columns

    static func transaction(_ cells: PostgresRandomAccessRow) throws -> ProjectedTransaction {
        guard let type = ProductType(rawValue: try cells[4].decode(String.self)) else {
            throw EntitlementStoreError(.corrupt, "an ent_transactions row has an unknown product_type")
        }
        guard let store = Store(rawValue: try cells[16].decode(String.self)) else {
            throw EntitlementStoreError(.corrupt, "an ent_transactions row has an unknown store")
        }
        return ProjectedTransaction(
            transactionID: try cells[0].decode(String.self), originalTransactionID: try cells[1].decode(String.self),
            accountID: try cells[2].decode(String.self), productID: try cells[3].decode(String.self), productType: type,
            environment: try cells[5].decode(String?.self), purchaseDate: try cells[6].decode(Date?.self),
            expiresDate: try cells[7].decode(Date?.self), revokedAt: try cells[8].decode(Date?.self),
            quantity: try cells[9].decode(Int.self), inBillingRetry: try cells[10].decode(Bool.self),
            inGracePeriod: try cells[11].decode(Bool.self), paused: try cells[19].decode(Bool.self),
            ownerSince: try cells[12].decode(Date.self), decidedAt: try cells[13].decode(Date.self),
            verdictID: try cells[14].decode(String.self), updatedAt: try cells[15].decode(Date.self), store: store,
            orderID: try cells[17].decode(String?.self), purchaseToken: try cells[18].decode(String?.self))
    }

    /// BEGIN … COMMIT, or ROLLBACK when `body` throws.
    private static func inTransaction<T>(
        _ connection: PostgresConnection, logger: Logger, serializable: Bool = false, _ body: () async throws -> T
    ) async throws -> T {
        try await connection.query(
            serializable ? "BEGIN ISOLATION LEVEL SERIALIZABLE" : "BEGIN", logger: logger)
        do {
            let result = try await body()
            try await connection.query("COMMIT", logger: logger)
            return result
        } catch {
            _ = try? await connection.query("ROLLBACK", logger: logger)
            throw error
        }
    }

    /// Runs one operation on a pooled connection with its deadlines, every failure as an ``EntitlementStoreError``.
    private func operation<T: Sendable>(
        _ what: String, _ body: @escaping @Sendable (PostgresConnection, Logger) async throws -> T
    ) async throws -> T {
        let logger = self.logger
        return try await pool.operation(what, failure: { Self.storeError($0, what) }) { lease in
            try await lease.withConnection { connection in try await body(connection, logger) }
        }
    }

    static func storeError(_ error: any Error, _ what: String) -> EntitlementStoreError {
        if let failure = PostgresFailure(error, what) {
            // The projection retries a batch on any of these, so a lost race is one more busy moment and a refusal
            // of the values one more database error.
            let code: EntitlementStoreError.Code =
                switch failure.kind {
                case .timeout: .timeout
                case .busy, .uniqueViolation: .busy
                case .refused, .database: .database
                case .unavailable: .unavailable
                case .corrupt: .corrupt
                }
            return EntitlementStoreError(code, failure.detail)
        }
        return EntitlementStoreError(.unavailable, "PostgreSQL \(what) failed: \(String(describing: error))")
    }
}
