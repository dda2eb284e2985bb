import CodedErrors
import Logging
import Observability
import SQLiteStorage

/// The ledger's schema, one list of migrations per backend, same tables and meaning (docs/LEDGER.md).
/// A migration is never edited once released: changes are new versions appended at the end.
enum LedgerSchema {
    static let sqlite: [SchemaMigration] = [
        SchemaMigration(
            version: 1, name: "claims and job verdicts",
            statements: [
                """
                CREATE TABLE transaction_claims (
                    transaction_id TEXT PRIMARY KEY NOT NULL,
                    original_transaction_id TEXT NOT NULL,
                    account_id TEXT NOT NULL,
                    product_id TEXT NOT NULL,
                    product_type TEXT NOT NULL,
                    bundle_id TEXT,
                    environment TEXT,
                    purchase_date INTEGER,
                    expires_date INTEGER,
                    grace_period_expires_date INTEGER,
                    revoked_at INTEGER,
                    granted_job_id TEXT NOT NULL,
                    verdict_id TEXT NOT NULL,
                    created_at INTEGER NOT NULL,
                    updated_at INTEGER NOT NULL
                ) WITHOUT ROWID
                """,
                "CREATE INDEX transaction_claims_original ON transaction_claims (original_transaction_id)",
                "CREATE INDEX transaction_claims_account ON transaction_claims (account_id)",
                """
                CREATE TABLE job_verdicts (
                    job_id TEXT PRIMARY KEY NOT NULL,
                    verdict_id TEXT NOT NULL,
                    account_id TEXT NOT NULL,
                    outcome TEXT NOT NULL,
                    reason TEXT,
                    verdict_json TEXT NOT NULL,
                    decided_at INTEGER NOT NULL,
                    created_at INTEGER NOT NULL
                ) WITHOUT ROWID
                """,
            ]),
        SchemaMigration(
            version: 2, name: "verification leases",
            statements: [
                // One row per proof a worker is asking Apple about, and Apple's answer for a few seconds after
                // (docs/LEDGER.md, "Verification leases"). Dates in milliseconds since 1970, like the rest.
                """
                CREATE TABLE verification_leases (
                    lease_key TEXT PRIMARY KEY NOT NULL,
                    holder TEXT NOT NULL,
                    expires_at INTEGER NOT NULL,
                    evidence_json TEXT,
                    updated_at INTEGER NOT NULL
                ) WITHOUT ROWID
                """
            ]),
        SchemaMigration(
            version: 3, name: "notification order and auto-renew",
            statements: [
                // Nullable: rows written before stay valid (no notification applied, auto-renew unknown).
                "ALTER TABLE transaction_claims ADD COLUMN auto_renew INTEGER",
                "ALTER TABLE transaction_claims ADD COLUMN notification_signed_at INTEGER",
            ]),
        SchemaMigration(
            version: 4, name: "reconciler state",
            statements: [
                // The reconciler's lease and checkpoint (docs/LEDGER.md, "Reconciler state"); milliseconds since 1970.
                """
                CREATE TABLE reconciler_state (
                    name TEXT PRIMARY KEY NOT NULL,
                    holder TEXT NOT NULL,
                    lease_expires_at INTEGER NOT NULL,
                    checkpoint INTEGER,
                    updated_at INTEGER NOT NULL
                ) WITHOUT ROWID
                """
            ]),
        SchemaMigration(
            version: 5, name: "apple call records",
            statements: [
                // One row per follow-up call to Apple (Finish Transaction per transaction, a consumption answer per
                // CONSUMPTION_REQUEST), so a redelivery or another worker never calls twice (docs/LEDGER.md).
                // Dates in milliseconds since 1970.
                """
                CREATE TABLE apple_call_records (
                    kind TEXT NOT NULL,
                    call_key TEXT NOT NULL,
                    transaction_id TEXT NOT NULL,
                    environment TEXT,
                    state TEXT NOT NULL,
                    holder TEXT,
                    due_at INTEGER NOT NULL,
                    attempts INTEGER NOT NULL,
                    detail TEXT,
                    created_at INTEGER NOT NULL,
                    updated_at INTEGER NOT NULL,
                    PRIMARY KEY (kind, call_key)
                ) WITHOUT ROWID
                """,
                "CREATE INDEX apple_call_records_due ON apple_call_records (state, due_at)",
            ]),
        SchemaMigration(
            version: 6, name: "subscription re-reads",
            statements: [
                // When the reconciler last read the history of a subscription the ledger is unsure of, and Apple's
                // revision then (docs/LEDGER.md, "Subscription re-reads"). Milliseconds since 1970.
                """
                CREATE TABLE subscription_rereads (
                    original_transaction_id TEXT PRIMARY KEY NOT NULL,
                    reread_at INTEGER NOT NULL,
                    revision TEXT,
                    updated_at INTEGER NOT NULL
                ) WITHOUT ROWID
                """,
                // The re-read looks for periods that ended recently: without it, a scan of every claim per batch.
                "CREATE INDEX transaction_claims_expires ON transaction_claims (expires_date)",
                // And for notifications about a transaction no account had (a refund before its purchase was
                // decided): few rows, read every pass.
                "CREATE INDEX job_verdicts_unclaimed ON job_verdicts (decided_at) WHERE reason = 'unclaimed'",
            ]),
        SchemaMigration(
            version: 7, name: "google play purchase records",
            statements: [
                // Who sent a pending Google Play purchase (its completion is granted to that account), and the refund
                // reviews Google asks an answer to (docs/LEDGER.md, "Google Play notifications").
                """
                CREATE TABLE play_pending_purchases (
                    purchase_token TEXT PRIMARY KEY NOT NULL,
                    account_id TEXT NOT NULL,
                    job_id TEXT NOT NULL,
                    package_name TEXT NOT NULL,
                    product_id TEXT NOT NULL,
                    created_at INTEGER NOT NULL
                ) WITHOUT ROWID
                """,
                """
                CREATE TABLE play_refund_reviews (
                    pending_refund_token TEXT PRIMARY KEY NOT NULL,
                    purchase_token TEXT NOT NULL,
                    order_id TEXT NOT NULL,
                    package_name TEXT NOT NULL,
                    event_at INTEGER NOT NULL,
                    deadline INTEGER NOT NULL,
                    job_id TEXT NOT NULL,
                    created_at INTEGER NOT NULL
                ) WITHOUT ROWID
                """,
                "CREATE INDEX play_refund_reviews_deadline ON play_refund_reviews (deadline)",
            ]),
        SchemaMigration(
            version: 8, name: "revocation detail and family sharing",
            statements: [
                // Nullable: rows written before stay valid (how Apple revoked them unknown; the purchaser's own).
                "ALTER TABLE transaction_claims ADD COLUMN revocation_type TEXT",
                "ALTER TABLE transaction_claims ADD COLUMN revocation_percentage INTEGER",
                "ALTER TABLE transaction_claims ADD COLUMN revocation_reason INTEGER",
                "ALTER TABLE transaction_claims ADD COLUMN ownership_type TEXT",
            ]),
        SchemaMigration(
            version: 9, name: "storefront country",
            statements: [
                // Nullable: a claim written before, or from a legacy receipt, has no known storefront.
                "ALTER TABLE transaction_claims ADD COLUMN storefront TEXT"
            ]),
    ]

    static let postgres: [SchemaMigration] = [
        SchemaMigration(
            version: 1, name: "claims and job verdicts",
            statements: [
                """
                CREATE TABLE transaction_claims (
                    transaction_id text PRIMARY KEY,
                    original_transaction_id text NOT NULL,
                    account_id text NOT NULL,
                    product_id text NOT NULL,
                    product_type text NOT NULL,
                    bundle_id text,
                    environment text,
                    purchase_date timestamptz,
                    expires_date timestamptz,
                    grace_period_expires_date timestamptz,
                    revoked_at timestamptz,
                    granted_job_id text NOT NULL,
                    verdict_id text NOT NULL,
                    created_at timestamptz NOT NULL,
                    updated_at timestamptz NOT NULL
                )
                """,
                "CREATE INDEX transaction_claims_original ON transaction_claims (original_transaction_id)",
                "CREATE INDEX transaction_claims_account ON transaction_claims (account_id)",
                """
                CREATE TABLE job_verdicts (
                    job_id text PRIMARY KEY,
                    verdict_id text NOT NULL,
                    account_id text NOT NULL,
                    outcome text NOT NULL,
                    reason text,
                    verdict_json text NOT NULL,
                    decided_at timestamptz NOT NULL,
                    created_at timestamptz NOT NULL
                )
                """,
            ]),
        SchemaMigration(
            version: 2, name: "verification leases",
            statements: [
                // UNLOGGED: a lease lives seconds and only saves Apple calls; after a server crash the table is
                // empty, which costs at most one call per receipt, and every write skips the WAL.
                """
                CREATE UNLOGGED TABLE verification_leases (
                    lease_key text PRIMARY KEY,
                    holder text NOT NULL,
                    expires_at timestamptz NOT NULL,
                    evidence_json text,
                    updated_at timestamptz NOT NULL
                )
                """
            ]),
        SchemaMigration(
            version: 3, name: "notification order and auto-renew",
            statements: [
                // Nullable: rows written before stay valid (no notification applied, auto-renew unknown).
                "ALTER TABLE transaction_claims ADD COLUMN auto_renew boolean",
                "ALTER TABLE transaction_claims ADD COLUMN notification_signed_at timestamptz",
            ]),
        SchemaMigration(
            version: 4, name: "reconciler state",
            statements: [
                // Logged, unlike the verification leases: the checkpoint must survive a crash of the server.
                """
                CREATE TABLE reconciler_state (
                    name text PRIMARY KEY,
                    holder text NOT NULL,
                    lease_expires_at timestamptz NOT NULL,
                    checkpoint timestamptz,
                    updated_at timestamptz NOT NULL
                )
                """
            ]),
        SchemaMigration(
            version: 5, name: "apple call records",
            statements: [
                """
                CREATE TABLE apple_call_records (
                    kind text NOT NULL,
                    call_key text NOT NULL,
                    transaction_id text NOT NULL,
                    environment text,
                    state text NOT NULL,
                    holder text,
                    due_at timestamptz NOT NULL,
                    attempts integer NOT NULL,
                    detail text,
                    created_at timestamptz NOT NULL,
                    updated_at timestamptz NOT NULL,
                    PRIMARY KEY (kind, call_key)
                )
                """,
                "CREATE INDEX apple_call_records_due ON apple_call_records (state, due_at)",
            ]),
        SchemaMigration(
            version: 6, name: "subscription re-reads",
            statements: [
                """
                CREATE TABLE subscription_rereads (
                    original_transaction_id text PRIMARY KEY,
                    reread_at timestamptz NOT NULL,
                    revision text,
                    updated_at timestamptz NOT NULL
                )
                """,
                "CREATE INDEX transaction_claims_expires ON transaction_claims (expires_date)",
                "CREATE INDEX job_verdicts_unclaimed ON job_verdicts (decided_at) WHERE reason = 'unclaimed'",
            ]),
        SchemaMigration(
            version: 7, name: "google play purchase records",
            statements: [
                """
                CREATE TABLE play_pending_purchases (
                    purchase_token text PRIMARY KEY,
                    account_id text NOT NULL,
                    job_id text NOT NULL,
                    package_name text NOT NULL,
                    product_id text NOT NULL,
                    created_at timestamptz NOT NULL
                )
                """,
                """
                CREATE TABLE play_refund_reviews (
                    pending_refund_token text PRIMARY KEY,
                    purchase_token text NOT NULL,
                    order_id text NOT NULL,
                    package_name text NOT NULL,
                    event_at timestamptz NOT NULL,
                    deadline timestamptz NOT NULL,
                    job_id text NOT NULL,
                    created_at timestamptz NOT NULL
                )
                """,
                "CREATE INDEX play_refund_reviews_deadline ON play_refund_reviews (deadline)",
            ]),
        SchemaMigration(
            version: 8, name: "revocation detail and family sharing",
            statements: [
                "ALTER TABLE transaction_claims ADD COLUMN revocation_type text",
                "ALTER TABLE transaction_claims ADD COLUMN revocation_percentage integer",
                "ALTER TABLE transaction_claims ADD COLUMN revocation_reason integer",
                "ALTER TABLE transaction_claims ADD COLUMN ownership_type text",
            ]),
        SchemaMigration(
            version: 9, name: "storefront country",
            statements: [
                "ALTER TABLE transaction_claims ADD COLUMN storefront text"
            ]),
    ]
}

extension LedgerSchema {
    /// The migrations of `all` not applied yet (`done`), a gap included (branches that added versions in another
    /// order); a database newer than this build is refused.
    static func pending(_ all: [SchemaMigration], done: Set<Int>) throws(LedgerError) -> [SchemaMigration] {
        let current = done.max() ?? 0
        let latest = all.last?.version ?? 0
        guard current <= latest else {
            throw LedgerError(.schema, "database schema version \(current) is newer than this build's \(latest)")
        }
        return all.filter { !done.contains($0.version) }
    }

    /// One line for the migrations a start applied; none, no line.
    static func logApplied(_ applied: [Int], store: String, logger: Logger) {
        guard !applied.isEmpty else { return }
        logger.info("ledger schema migrated", metadata: [LogKeys.migrations: "\(applied)", LogKeys.store: "\(store)"])
    }
}
