import CodedErrors
import Decision
import Foundation
import Logging
import Messages
import Observability
import PostgresNIO
import PostgresSettings
import SQLiteStorage
import Synchronization

/// The cluster ledger (`postgres://user[:password]@host[:port]/database[?sslmode=MODE][&sslrootcert=PATH][&schema=NAME]`,
/// read by ``PostgresURL``),
/// shared by every worker through a pool of connections (postgres-nio's `PostgresClient`).
///
/// ``run()`` runs the pool and must keep running while the ledger is used (run it in a task, or as a service of
/// the worker's ServiceGroup); operations started without it fail at their timeout, they never hang.
/// Every operation has a deadline (``LedgerConfiguration/operationTimeout``, and `statement_timeout` on the
/// server); a database that is down gives ``LedgerError/Code/unavailable`` within the connect timeout.
public final class PostgresLedger: Ledger {
    private let pool: PostgresPool
    private let logger: Logger
    private let codec = MessageCodec()
    /// The database named by the URL, for logs (never the password).
    public var target: String { pool.target }
    /// The schema holding the tables (`schema=` in the URL); `nil` means the user's default search path.
    public let schema: String?
    /// Tests only: SQL to run on the transaction's own connection at a labelled point of `apply`
    /// (`verdict`, `claim`), to make the database go away mid-transaction.
    private let faultHook = Mutex<(@Sendable (String) -> String?)?>(nil)

    /// Key of the advisory lock that serializes migrations across workers ("vw-ledgr" in ASCII).
    static let migrationLockKey: Int64 = 0x7677_2D6C_6564_6772

    /// The migration lock of one schema: ledgers in other schemas of the same database (other deployments, parallel
    /// tests) have tables of their own and need not wait for each other. The base key mixed with the FNV-1a hash of
    /// the schema's name (none: the base key, as before).
    static func migrationLockKey(schema: String?) -> Int64 {
        guard let schema else { return migrationLockKey }
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in schema.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01B3
        }
        return migrationLockKey ^ Int64(bitPattern: hash)
    }

    public init(url: String, configuration: LedgerConfiguration = .init(), logger: Logger) throws {
        do {
            pool = try PostgresPool(
                url: url, noun: "ledger URL", storeName: "ledger", connectTimeout: configuration.connectTimeout,
                maximumConnections: configuration.maximumConnections, operationTimeout: configuration.operationTimeout,
                applicationName: "verify-worker", logger: logger)
        } catch {
            throw LedgerError(.invalidConfiguration, error.message)
        }
        self.schema = pool.url.schema
        self.logger = logger
    }

    public func run() async throws {
        await pool.run()
    }

    public func migrate() async throws {
        if let refusal = await pool.certificateRefusal(logger: logger) {
            throw LedgerError(.invalidConfiguration, refusal)
        }
        let schema = self.schema
        let applied = try await operation("migrate") { pool, logger in
            try await pool.withConnection { connection in
                try await Self.inTransaction(connection, logger: logger) {
                    // One worker migrates a schema at a time; the others wait here, then find nothing left to do.
                    let lockKey = Self.migrationLockKey(schema: schema)
                    try await connection.query("SELECT pg_advisory_xact_lock(\(lockKey))", logger: logger)
                    if let schema {
                        try await connection.query(
                            PostgresQuery(unsafeSQL: "CREATE SCHEMA IF NOT EXISTS \(schema)"), logger: logger)
                    }
                    try await connection.query(
                        """
                        CREATE TABLE IF NOT EXISTS ledger_migrations (
                            version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL)
                        """, logger: logger)
                    var done: Set<Int> = []
                    for try await version in try await connection.query(
                        "SELECT version FROM ledger_migrations", logger: logger
                    ).decode(Int.self) {
                        done.insert(version)
                    }
                    var applied: [Int] = []
                    for migration in try LedgerSchema.pending(LedgerSchema.postgres, done: done) {
                        for statement in migration.statements {
                            try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                        }
                        try await connection.query(
                            """
                            INSERT INTO ledger_migrations (version, name, applied_at)
                            VALUES (\(migration.version), \(migration.name), now())
                            """, logger: logger)
                        applied.append(migration.version)
                    }
                    return (applied, commit: true)
                }
            }
        }
        LedgerSchema.logApplied(applied, store: target, logger: logger)
    }

    public func snapshot(
        jobID: String, transactionIDs: [String], originalTransactionIDs: [String]
    ) async throws
        -> LedgerSnapshot
    {
        let codec = self.codec
        return try await operation("snapshot") { pool, logger in
            try await pool.withConnection { connection in
                // One round trip: the job's verdict and the claims, as one statement (one consistent snapshot).
                let rows = try await connection.query(
                    """
                    SELECT NULL::text AS verdict_json, \(unescaped: Self.claimColumns)
                    FROM transaction_claims
                    WHERE transaction_id = ANY(\(transactionIDs)) OR original_transaction_id = ANY(\(originalTransactionIDs))
                    UNION ALL
                    SELECT verdict_json, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                        NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
                    FROM job_verdicts WHERE job_id = \(jobID)
                    """, logger: logger)
                var snapshot = LedgerSnapshot()
                for try await row in rows {
                    let cells = row.makeRandomAccess()
                    if let json = try cells[0].decode(String?.self) {
                        snapshot.priorVerdict = try SQLiteLedger.decodeVerdict(json, codec: codec)
                    } else {
                        snapshot.claims.append(try Self.claim(cells, offset: 1))
                    }
                }
                return snapshot
            }
        }
    }

    public func apply(_ decision: LedgerDecision) async throws -> ApplyResult {
        if decision.isRecorded { return .alreadyDecided(decision.verdict) }
        let codec = self.codec
        let json = String(decoding: codec.encode(decision.verdict), as: UTF8.self)
        let verdict = try SQLiteLedger.decodeVerdict(json, codec: codec)
        let faultHook = self.faultHook.withLock { $0 }
        let result = try await operation("apply") { pool, logger in
            try await pool.withConnection { connection in
                try await Self.inTransaction(connection, logger: logger) { () -> (ApplyResult?, commit: Bool) in
                    if let sql = faultHook?("verdict") {
                        try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger)
                    }
                    let inserted = try await connection.query(
                        """
                        INSERT INTO job_verdicts
                            (job_id, verdict_id, account_id, outcome, reason, verdict_json, decided_at, created_at)
                        VALUES (\(verdict.jobID), \(verdict.verdictID), \(verdict.accountID), \(verdict.outcome.rawValue),
                            \(verdict.reason?.rawValue), \(json), \(verdict.decidedAt), now())
                        ON CONFLICT (job_id) DO NOTHING RETURNING job_id
                        """, logger: logger
                    ).collect()
                    // Another delivery recorded this job first: roll back, then read its verdict below.
                    guard !inserted.isEmpty else { return (nil, commit: false) }
                    if let sql = faultHook?("claim") {
                        try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger)
                    }
                    let ok = try await Self.write(decision.writes, connection: connection, logger: logger)
                    return ok ? (.applied(verdict), commit: true) : (.raceLost, commit: false)
                }
            }
        }
        if let result { return result }
        let stored = try await snapshot(jobID: verdict.jobID, transactionIDs: [], originalTransactionIDs: [])
        guard let prior = stored.priorVerdict else {
            throw LedgerError(.database, "job verdict conflicted but could not be read back")
        }
        return .alreadyDecided(prior)
    }

    public func perform(_ writes: [LedgerWrite]) async throws -> Bool {
        try await operation("perform") { pool, logger in
            try await pool.withConnection { connection in
                try await Self.inTransaction(connection, logger: logger) {
                    let ok = try await Self.write(writes, connection: connection, logger: logger)
                    return (ok, commit: ok)
                }
            }
        }
    }

    public func schemaVersions() async throws -> [Int] {
        try await operation("schema versions") { pool, logger in
            try await pool.withConnection { connection in
                try await connection.query("SELECT version FROM ledger_migrations ORDER BY version", logger: logger)
                    .decode(Int.self).collected()
            }
        }
    }

    /// Tests only: see `faultHook`.
    func injectFault(_ hook: (@Sendable (String) -> String?)?) {
        faultHook.withLock { $0 = hook }
    }

    /// Tests only: runs one statement (for example `pg_terminate_backend`) through the pool.
    func execute(unsafeSQL sql: String) async throws {
        try await operation("execute") { pool, logger in
            try await pool.withConnection { connection in
                _ = try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger).collect()
            }
        }
    }

    // MARK: Statements

    private static func write(
        _ writes: [LedgerWrite], connection: PostgresConnection, logger: Logger
    ) async throws
        -> Bool
    {
        for write in writes {
            switch write {
            case .claim(let c):
                // Atomic claim in one round trip: insert, or report the existing owner. No read-then-write race.
                // (Under READ COMMITTED a row committed by a concurrent claim after this statement's snapshot
                // yields no row at all: that too is a lost race, and the caller reads again.)
                let rows = try await connection.query(
                    """
                    WITH inserted AS (
                        INSERT INTO transaction_claims (\(unescaped: claimColumns))
                        VALUES (\(c.transactionID), \(c.originalTransactionID), \(c.accountID), \(c.productID),
                            \(c.productType.rawValue), \(c.bundleID), \(c.environment), \(c.purchaseDate),
                            \(c.expiresDate), \(c.gracePeriodExpiresDate), \(c.revokedAt), \(c.grantedJobID),
                            \(c.verdictID), now(), now(), \(c.autoRenew), \(c.notificationSignedAt),
                            \(c.revocation?.type?.rawValue), \(c.revocation?.percentage), \(c.revocation?.reason),
                            \(c.ownershipType?.rawValue), \(c.storefront))
                        ON CONFLICT (transaction_id) DO NOTHING
                        RETURNING account_id
                    )
                    SELECT true, account_id FROM inserted
                    UNION ALL
                    SELECT false, account_id FROM transaction_claims
                    WHERE transaction_id = \(c.transactionID) AND NOT EXISTS (SELECT 1 FROM inserted)
                    """, logger: logger
                ).decode((Bool, String).self).collected()
                guard rows.first?.0 == true else {
                    logger.debug(
                        "claim lost a race",
                        metadata: [
                            LogKeys.transactionID: "\(c.transactionID)", LogKeys.owner: "\(rows.first?.1 ?? "?")",
                        ])
                    return false
                }
            case .revoke(let transactionID, let revokedAt, let revocation):
                if let revocation {
                    // How Apple revoked it goes with the first revocation, or onto a revoked claim that lacks it.
                    try await connection.query(
                        """
                        UPDATE transaction_claims
                        SET revocation_type = \(revocation.type?.rawValue),
                            revocation_percentage = \(revocation.percentage), revocation_reason = \(revocation.reason)
                        WHERE transaction_id = \(transactionID) AND (revoked_at IS NULL OR (revocation_type IS NULL
                            AND revocation_percentage IS NULL AND revocation_reason IS NULL))
                        """, logger: logger)
                }
                try await connection.query(
                    """
                    UPDATE transaction_claims SET revoked_at = COALESCE(revoked_at, \(revokedAt)), updated_at = now()
                    WHERE transaction_id = \(transactionID)
                    """, logger: logger)
            case .moveSubscription(let original, let from, let to, let expected):
                let moved = try await connection.query(
                    """
                    UPDATE transaction_claims SET account_id = \(to), updated_at = now()
                    WHERE original_transaction_id = \(original) AND account_id = \(from)
                    RETURNING transaction_id
                    """, logger: logger
                ).decode(String.self).collected()
                if moved.sorted() != expected.sorted() { return false }
            case .extendSubscription(let transactionID, let expiresDate, let graceDate):
                try await connection.query(
                    """
                    UPDATE transaction_claims SET
                        expires_date = GREATEST(expires_date, \(expiresDate)),
                        grace_period_expires_date = GREATEST(grace_period_expires_date, \(graceDate)),
                        updated_at = now()
                    WHERE transaction_id = \(transactionID)
                    """, logger: logger)
            case .reinstate(let transactionID):
                try await connection.query(
                    """
                    UPDATE transaction_claims SET revoked_at = NULL, revocation_type = NULL,
                        revocation_percentage = NULL, revocation_reason = NULL, updated_at = now()
                    WHERE transaction_id = \(transactionID)
                    """, logger: logger)
            case .recordNotification(let original, let signedAt, let autoRenew, let familyShared):
                // A family member's claims and the purchaser's are ordered apart (``LedgerWrite``).
                if let signedAt {
                    // Update first: the rows a concurrent newer notification holds are waited for, so the check
                    // below sees its commit. A newer one found means this one is late: roll back, decide again.
                    try await connection.query(
                        """
                        UPDATE transaction_claims SET notification_signed_at = \(signedAt), updated_at = now()
                        WHERE original_transaction_id = \(original)
                            AND (COALESCE(ownership_type, '') = 'FAMILY_SHARED') = \(familyShared)
                            AND (notification_signed_at IS NULL OR notification_signed_at < \(signedAt))
                        """, logger: logger)
                    let newer = try await connection.query(
                        """
                        SELECT 1 FROM transaction_claims
                        WHERE original_transaction_id = \(original) AND notification_signed_at > \(signedAt)
                            AND (COALESCE(ownership_type, '') = 'FAMILY_SHARED') = \(familyShared)
                        LIMIT 1
                        """, logger: logger
                    ).collect()
                    if !newer.isEmpty { return false }
                }
                if let autoRenew {
                    try await connection.query(
                        """
                        UPDATE transaction_claims SET auto_renew = \(autoRenew), updated_at = now()
                        WHERE original_transaction_id = \(original)
                            AND (COALESCE(ownership_type, '') = 'FAMILY_SHARED') = \(familyShared)
                        """, logger: logger)
                }
            case .endSubscription(let original, let at):
                try await connection.query(
                    """
                    UPDATE transaction_claims SET
                        expires_date = CASE WHEN expires_date > \(at) THEN \(at) ELSE expires_date END,
                        grace_period_expires_date = CASE WHEN grace_period_expires_date > \(at) THEN \(at)
                            ELSE grace_period_expires_date END,
                        updated_at = now()
                    WHERE original_transaction_id = \(original)
                        AND (expires_date > \(at) OR grace_period_expires_date > \(at))
                    """, logger: logger)
            case .recordPendingPurchase(let pending):
                try await connection.query(
                    """
                    INSERT INTO play_pending_purchases
                        (purchase_token, account_id, job_id, package_name, product_id, created_at)
                    VALUES (\(pending.purchaseToken), \(pending.accountID), \(pending.jobID), \(pending.packageName),
                        \(pending.productID), \(pending.recordedAt))
                    ON CONFLICT (purchase_token) DO NOTHING
                    """, logger: logger)
            case .recordRefundReview(let review):
                try await connection.query(
                    """
                    INSERT INTO play_refund_reviews (pending_refund_token, purchase_token, order_id, package_name,
                        event_at, deadline, job_id, created_at)
                    VALUES (\(review.pendingRefundToken), \(review.purchaseToken), \(review.orderID),
                        \(review.packageName), \(review.eventAt), \(review.deadline), \(review.jobID), now())
                    ON CONFLICT (pending_refund_token) DO NOTHING
                    """, logger: logger)
            }
        }
        return true
    }

    /// BEGIN … COMMIT, or ROLLBACK when `body` throws or returns `commit: false`.
    private static func inTransaction<T>(
        _ connection: PostgresConnection, logger: Logger, _ body: () async throws -> (T, commit: Bool)
    ) async throws -> T {
        try await connection.query("BEGIN", logger: logger)
        do {
            let (result, commit) = try await body()
            try await connection.query(commit ? "COMMIT" : "ROLLBACK", logger: logger)
            return result
        } catch {
            _ = try? await connection.query("ROLLBACK", logger: logger)
            throw error
        }
    }

    /// Runs one ledger operation with its deadlines (``PostgresPool/operation(_:failure:_:)``: no connection within
    /// ``LedgerConfiguration/connectTimeout`` gives ``LedgerError/Code/unavailable``, the whole operation taking longer
    /// than ``LedgerConfiguration/operationTimeout`` ``LedgerError/Code/timeout``), every failure a ``LedgerError``.
    func operation<T: Sendable>(
        _ what: String, _ body: @escaping @Sendable (PostgresLease, Logger) async throws -> T
    ) async throws -> T {
        let logger = self.logger
        return try await pool.operation(what, failure: { Self.ledgerError($0, what) }) { lease in
            try await body(lease, logger)
        }
    }

    static func ledgerError(_ error: any Error, _ what: String) -> LedgerError {
        if let failure = PostgresFailure(error, what) {
            let code: LedgerError.Code =
                switch failure.kind {
                case .timeout: .timeout
                case .busy: .busy
                case .uniqueViolation: .contention  // a race with another writer
                case .refused: .refused
                case .unavailable: .unavailable
                case .corrupt: .corrupt
                case .database: .database
                }
            return LedgerError(code, failure.detail)
        }
        if let error = error as? PostgresTransactionError {
            return ledgerError(error.beginError ?? error.closureError ?? error.commitError ?? error, what)
        }
        if let error = error as? LedgerError { return error }
        let text = String(describing: error)
        if text.contains("circuitBreaker") || text.contains("connectionCreation") || text.contains("poolShutdown") {
            return LedgerError(.unavailable, "PostgreSQL \(what): cannot connect (\(text))")
        }
        return LedgerError(.unavailable, "PostgreSQL \(what) failed: \(text)")
    }

    static let claimColumns = SQLiteLedger.claimColumns

    static func claim(_ cells: PostgresRandomAccessRow, offset: Int) throws -> TransactionClaim {
        guard let type = ProductType(rawValue: try cells[offset + 4].decode(String.self)) else {
            throw LedgerError(.corrupt, "a transaction_claims row has an unknown product_type")
        }
        return TransactionClaim(
            transactionID: try cells[offset].decode(String.self),
            originalTransactionID: try cells[offset + 1].decode(String.self),
            accountID: try cells[offset + 2].decode(String.self),
            productID: try cells[offset + 3].decode(String.self), productType: type,
            bundleID: try cells[offset + 5].decode(String?.self),
            environment: try cells[offset + 6].decode(String?.self),
            purchaseDate: try cells[offset + 7].decode(Date?.self),
            expiresDate: try cells[offset + 8].decode(Date?.self),
            gracePeriodExpiresDate: try cells[offset + 9].decode(Date?.self),
            revokedAt: try cells[offset + 10].decode(Date?.self),
            grantedJobID: try cells[offset + 11].decode(String.self),
            verdictID: try cells[offset + 12].decode(String.self),
            createdAt: try cells[offset + 13].decode(Date.self),
            updatedAt: try cells[offset + 14].decode(Date.self),
            autoRenew: try cells[offset + 15].decode(Bool?.self),
            notificationSignedAt: try cells[offset + 16].decode(Date?.self),
            revocation: Revocation(
                type: try cells[offset + 17].decode(String?.self).map { Revocation.Kind($0) },
                percentage: try cells[offset + 18].decode(Int?.self), reason: try cells[offset + 19].decode(Int?.self)),
            ownershipType: try cells[offset + 20].decode(String?.self).map { OwnershipType($0) },
            storefront: try cells[offset + 21].decode(String?.self))
    }
}

extension AsyncSequence {
    /// Every element, in order (postgres-nio's `collect()` exists only on undecoded rows).
    func collected() async throws -> [Element] {
        var elements: [Element] = []
        for try await element in self { elements.append(element) }
        return elements
    }
}
