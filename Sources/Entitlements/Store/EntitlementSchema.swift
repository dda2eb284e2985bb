import CodedErrors
import Logging
import Observability
import SQLiteStorage

/// The entitlement store's schema, numbered and append-only, one list per backend (dates: `timestamptz` in
/// PostgreSQL, milliseconds since 1970 in SQLite). Tables are prefixed `ent_` so the store can share a database
/// with the worker's ledger.
enum EntitlementSchema {
    static let sqlite: [SchemaMigration] = [
        SchemaMigration(
            version: 1, name: "projection",
            statements: [
                """
                CREATE TABLE ent_transactions (
                    transaction_id TEXT PRIMARY KEY NOT NULL, original_transaction_id TEXT NOT NULL,
                    account_id TEXT NOT NULL, product_id TEXT NOT NULL, product_type TEXT NOT NULL, environment TEXT,
                    purchase_date INTEGER, expires_date INTEGER, revoked_at INTEGER, quantity INTEGER NOT NULL,
                    in_billing_retry INTEGER NOT NULL, in_grace_period INTEGER NOT NULL, owner_since INTEGER NOT NULL,
                    decided_at INTEGER NOT NULL, verdict_id TEXT NOT NULL, updated_at INTEGER NOT NULL)
                """,
                "CREATE INDEX ent_transactions_original ON ent_transactions (original_transaction_id)",
                "CREATE INDEX ent_transactions_account ON ent_transactions (account_id)",
                """
                CREATE TABLE ent_applied (
                    id TEXT PRIMARY KEY NOT NULL, account_id TEXT, outcome TEXT, decided_at INTEGER,
                    applied_at INTEGER NOT NULL) WITHOUT ROWID
                """,
                """
                CREATE TABLE ent_accounts (
                    account_id TEXT PRIMARY KEY NOT NULL, first_seen INTEGER NOT NULL, last_decided_at INTEGER,
                    updated_at INTEGER NOT NULL) WITHOUT ROWID
                """,
                """
                CREATE TABLE ent_consumables (
                    account_id TEXT NOT NULL, product_id TEXT NOT NULL, units INTEGER NOT NULL,
                    PRIMARY KEY (account_id, product_id)) WITHOUT ROWID
                """,
                """
                CREATE TABLE ent_history (
                    sequence INTEGER PRIMARY KEY AUTOINCREMENT, account_id TEXT NOT NULL, event_id TEXT UNIQUE,
                    entry_json TEXT NOT NULL)
                """,
                "CREATE INDEX ent_history_account ON ent_history (account_id, sequence)",
                """
                CREATE TABLE ent_events (
                    sequence INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT NOT NULL UNIQUE,
                    account_id TEXT NOT NULL, event_json TEXT NOT NULL, created_at INTEGER NOT NULL,
                    published_at INTEGER)
                """,
                "CREATE INDEX ent_events_unpublished ON ent_events (sequence) WHERE published_at IS NULL",
                """
                CREATE TABLE ent_webhook_deliveries (
                    event_id TEXT NOT NULL, url TEXT NOT NULL, attempts INTEGER NOT NULL,
                    next_attempt_at INTEGER, delivered_at INTEGER, PRIMARY KEY (event_id, url)) WITHOUT ROWID
                """,
                """
                CREATE INDEX ent_webhook_due ON ent_webhook_deliveries (next_attempt_at)
                WHERE delivered_at IS NULL AND next_attempt_at IS NOT NULL
                """,
                """
                CREATE TABLE ent_positions (
                    topic TEXT NOT NULL, partition INTEGER NOT NULL, next_offset INTEGER NOT NULL,
                    record_time INTEGER, updated_at INTEGER NOT NULL, PRIMARY KEY (topic, partition)) WITHOUT ROWID
                """,
            ]),
        expiries,
        // Rows written before both stores were projected are all the App Store's. SQLite cannot change a primary
        // key in place, so the consumables table is copied into one keyed by store too.
        SchemaMigration(
            version: 3, name: "stores",
            statements: [
                "ALTER TABLE ent_transactions ADD COLUMN store TEXT NOT NULL DEFAULT 'app_store'",
                "ALTER TABLE ent_transactions ADD COLUMN order_id TEXT",
                "ALTER TABLE ent_transactions ADD COLUMN purchase_token TEXT",
                """
                CREATE TABLE ent_consumables_by_store (
                    account_id TEXT NOT NULL, store TEXT NOT NULL, product_id TEXT NOT NULL, units INTEGER NOT NULL,
                    PRIMARY KEY (account_id, store, product_id)) WITHOUT ROWID
                """,
                """
                INSERT INTO ent_consumables_by_store (account_id, store, product_id, units)
                SELECT account_id, 'app_store', product_id, units FROM ent_consumables
                """,
                "DROP TABLE ent_consumables",
                "ALTER TABLE ent_consumables_by_store RENAME TO ent_consumables",
            ]),
        // A rejection (a verdict that granted and changed nothing, or an ignored message) is kept as one of the
        // account's newest N: the flag lets a write find the older ones to drop. Rows written before are flagged from
        // their JSON. Order ids and purchase tokens are looked up by support.
        SchemaMigration(
            version: 4, name: "rejections",
            statements: [
                "ALTER TABLE ent_history ADD COLUMN rejection INTEGER NOT NULL DEFAULT 0",
                """
                UPDATE ent_history SET rejection = 1
                WHERE json_extract(entry_json, '$.kind') = 'ignored'
                    OR (json_extract(entry_json, '$.kind') = 'verdict'
                        AND json_extract(entry_json, '$.outcome') NOT IN ('granted', 'already_granted')
                        AND COALESCE(json_extract(entry_json, '$.effect'), '') <> 'applied')
                """,
                "CREATE INDEX ent_history_rejections ON ent_history (account_id, sequence) WHERE rejection = 1",
            ] + supportLookups),
        SchemaMigration(
            version: 5, name: "paused",
            statements: ["ALTER TABLE ent_transactions ADD COLUMN paused INTEGER NOT NULL DEFAULT 0"]),
    ]

    static let postgres: [SchemaMigration] = [
        SchemaMigration(
            version: 1, name: "projection",
            statements: [
                """
                CREATE TABLE ent_transactions (
                    transaction_id text PRIMARY KEY, original_transaction_id text NOT NULL, account_id text NOT NULL,
                    product_id text NOT NULL, product_type text NOT NULL, environment text,
                    purchase_date timestamptz, expires_date timestamptz, revoked_at timestamptz,
                    quantity integer NOT NULL, in_billing_retry boolean NOT NULL, in_grace_period boolean NOT NULL,
                    owner_since timestamptz NOT NULL, decided_at timestamptz NOT NULL, verdict_id text NOT NULL,
                    updated_at timestamptz NOT NULL)
                """,
                "CREATE INDEX ent_transactions_original ON ent_transactions (original_transaction_id)",
                "CREATE INDEX ent_transactions_account ON ent_transactions (account_id)",
                """
                CREATE TABLE ent_applied (
                    id text PRIMARY KEY, account_id text, outcome text, decided_at timestamptz,
                    applied_at timestamptz NOT NULL)
                """,
                """
                CREATE TABLE ent_accounts (
                    account_id text PRIMARY KEY, first_seen timestamptz NOT NULL, last_decided_at timestamptz,
                    updated_at timestamptz NOT NULL)
                """,
                """
                CREATE TABLE ent_consumables (
                    account_id text NOT NULL, product_id text NOT NULL, units bigint NOT NULL,
                    PRIMARY KEY (account_id, product_id))
                """,
                """
                CREATE TABLE ent_history (
                    sequence bigserial PRIMARY KEY, account_id text NOT NULL, event_id text UNIQUE,
                    entry_json text NOT NULL)
                """,
                "CREATE INDEX ent_history_account ON ent_history (account_id, sequence)",
                """
                CREATE TABLE ent_events (
                    sequence bigserial PRIMARY KEY, event_id text NOT NULL UNIQUE, account_id text NOT NULL,
                    event_json text NOT NULL, created_at timestamptz NOT NULL, published_at timestamptz)
                """,
                "CREATE INDEX ent_events_unpublished ON ent_events (sequence) WHERE published_at IS NULL",
                """
                CREATE TABLE ent_webhook_deliveries (
                    event_id text NOT NULL, url text NOT NULL, attempts integer NOT NULL,
                    next_attempt_at timestamptz, delivered_at timestamptz, PRIMARY KEY (event_id, url))
                """,
                """
                CREATE INDEX ent_webhook_due ON ent_webhook_deliveries (next_attempt_at)
                WHERE delivered_at IS NULL AND next_attempt_at IS NOT NULL
                """,
                """
                CREATE TABLE ent_positions (
                    topic text NOT NULL, partition integer NOT NULL, next_offset bigint NOT NULL,
                    record_time timestamptz, updated_at timestamptz NOT NULL, PRIMARY KEY (topic, partition))
                """,
            ]),
        expiries,
        // Rows written before both stores were projected are all the App Store's.
        SchemaMigration(
            version: 3, name: "stores",
            statements: [
                "ALTER TABLE ent_transactions ADD COLUMN store text NOT NULL DEFAULT 'app_store'",
                "ALTER TABLE ent_transactions ADD COLUMN order_id text",
                "ALTER TABLE ent_transactions ADD COLUMN purchase_token text",
                "ALTER TABLE ent_consumables ADD COLUMN store text NOT NULL DEFAULT 'app_store'",
                "ALTER TABLE ent_consumables DROP CONSTRAINT ent_consumables_pkey",
                "ALTER TABLE ent_consumables ADD PRIMARY KEY (account_id, store, product_id)",
            ]),
        // As SQLite's version 4.
        SchemaMigration(
            version: 4, name: "rejections",
            statements: [
                "ALTER TABLE ent_history ADD COLUMN rejection boolean NOT NULL DEFAULT false",
                """
                UPDATE ent_history SET rejection = true
                WHERE entry_json::jsonb ->> 'kind' = 'ignored'
                    OR (entry_json::jsonb ->> 'kind' = 'verdict'
                        AND entry_json::jsonb ->> 'outcome' NOT IN ('granted', 'already_granted')
                        AND COALESCE(entry_json::jsonb ->> 'effect', '') <> 'applied')
                """,
                "CREATE INDEX ent_history_rejections ON ent_history (account_id, sequence) WHERE rejection",
            ] + supportLookups),
        SchemaMigration(
            version: 5, name: "paused",
            statements: ["ALTER TABLE ent_transactions ADD COLUMN paused boolean NOT NULL DEFAULT false"]),
    ]
}

extension EntitlementSchema {
    /// Version 2, the same SQL in both backends: unrevoked transactions indexed by their expiry.
    static let expiries = SchemaMigration(
        version: 2, name: "expiries",
        statements: [
            "CREATE INDEX ent_transactions_expires ON ent_transactions (expires_date) WHERE revoked_at IS NULL"
        ])

    /// Part of version 4, the same SQL in both backends: support looks transactions up by order id and purchase
    /// token.
    static let supportLookups = [
        "CREATE INDEX ent_transactions_order ON ent_transactions (order_id) WHERE order_id IS NOT NULL",
        """
        CREATE INDEX ent_transactions_token ON ent_transactions (purchase_token)
        WHERE purchase_token IS NOT NULL
        """,
    ]

    /// What a projected transaction's row takes from a newer projection of it: the same SQL in both backends.
    static let transactionUpsert = """
        ON CONFLICT (transaction_id) DO UPDATE SET
            original_transaction_id = excluded.original_transaction_id, account_id = excluded.account_id,
            product_id = excluded.product_id, product_type = excluded.product_type,
            environment = excluded.environment, purchase_date = excluded.purchase_date,
            expires_date = excluded.expires_date, revoked_at = excluded.revoked_at,
            quantity = excluded.quantity, in_billing_retry = excluded.in_billing_retry,
            in_grace_period = excluded.in_grace_period, owner_since = excluded.owner_since,
            decided_at = excluded.decided_at, verdict_id = excluded.verdict_id, updated_at = excluded.updated_at,
            store = excluded.store, order_id = excluded.order_id, purchase_token = excluded.purchase_token,
            paused = excluded.paused
        """

    /// The migrations of `all` after version `current`; a database newer than this build is refused.
    static func pending(_ all: [SchemaMigration], after current: Int) throws(EntitlementStoreError) -> [SchemaMigration]
    {
        let latest = all.last?.version ?? 0
        guard current <= latest else {
            throw EntitlementStoreError(
                .schema, "database schema version \(current) is newer than this build's \(latest)")
        }
        return all.filter { $0.version > current }
    }

    /// One line for the migrations a start applied; none, no line.
    static func logApplied(_ applied: [Int], store: String, logger: Logger) {
        guard !applied.isEmpty else { return }
        logger.info(
            "entitlement store schema migrated",
            metadata: [LogKeys.migrations: "\(applied)", LogKeys.store: "\(store)"])
    }
}
