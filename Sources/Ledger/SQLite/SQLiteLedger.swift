import CodedErrors
import Decision
import Foundation
import Logging
import Messages
import Observability
import SQLiteStorage

/// The embedded ledger for a single node (`sqlite:PATH`): one SQLite file in WAL mode, one connection owned by
/// one serial queue (``SQLiteExecutor``), writes in `BEGIN IMMEDIATE` transactions so that several processes
/// sharing the file wait for each other (up to the busy timeout) instead of failing or racing.
///
/// ``run()`` only waits for cancellation and then closes the file: SQLite needs no background work, but the
/// ledger is run like every other service so the two backends are used the same way.
public final class SQLiteLedger: Ledger {
    let executor: SQLiteExecutor<LedgerError>
    private let logger: Logger
    private let codec = MessageCodec()
    public let path: String

    public init(path: String, configuration: LedgerConfiguration = .init(), logger: Logger) throws {
        self.path = path
        self.logger = logger
        executor = try SQLiteExecutor(
            path: path, busyTimeout: configuration.busyTimeout, setup: LedgerSQLiteConnection.setup,
            label: "verify.ledger.sqlite")
    }

    public func run() async throws {
        // Nothing to do in the background: wait for cancellation (sleep throws then), then close the file.
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(3600))
        }
        await executor.close()
    }

    public func close() async { await executor.close() }

    public func migrate() async throws {
        let applied = try await executor.run { connection, _ in
            try connection.inWriteTransaction { () throws -> [Int] in
                try connection.execute(
                    """
                    CREATE TABLE IF NOT EXISTS ledger_migrations (
                        version INTEGER PRIMARY KEY NOT NULL, name TEXT NOT NULL, applied_at INTEGER NOT NULL)
                    """)
                let done = Set(
                    try connection.query("SELECT version FROM ledger_migrations").compactMap {
                        $0.first?.integer.map(Int.init)
                    })
                var applied: [Int] = []
                for migration in try LedgerSchema.pending(LedgerSchema.sqlite, done: done) {
                    for statement in migration.statements { try connection.execute(statement) }
                    try connection.query(
                        "INSERT INTO ledger_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                        [.integer(Int64(migration.version)), .text(migration.name), SQLiteValue(Date())])
                    applied.append(migration.version)
                }
                return applied
            }
        }
        LedgerSchema.logApplied(applied, store: path, logger: logger)
    }

    public func snapshot(
        jobID: String, transactionIDs: [String], originalTransactionIDs: [String]
    ) async throws
        -> LedgerSnapshot
    {
        let codec = self.codec
        return try await executor.run { connection, _ in
            // One read transaction, so the verdict and the claims are one consistent view.
            try connection.execute("BEGIN")
            defer { try? connection.execute("COMMIT") }
            var prior: Verdict?
            if let json = try connection.query("SELECT verdict_json FROM job_verdicts WHERE job_id = ?", [.text(jobID)])
                .first?.first?.text
            {
                prior = try Self.decodeVerdict(json, codec: codec)
            }
            var claims: [TransactionClaim] = []
            var seen = Set<String>()
            for id in transactionIDs {
                for row in try connection.query(
                    "SELECT \(Self.claimColumns) FROM transaction_claims WHERE transaction_id = ?", [.text(id)])
                {
                    let claim = try Self.claim(row)
                    if seen.insert(claim.transactionID).inserted { claims.append(claim) }
                }
            }
            for id in originalTransactionIDs {
                for row in try connection.query(
                    "SELECT \(Self.claimColumns) FROM transaction_claims WHERE original_transaction_id = ?", [.text(id)]
                ) {
                    let claim = try Self.claim(row)
                    if seen.insert(claim.transactionID).inserted { claims.append(claim) }
                }
            }
            return LedgerSnapshot(priorVerdict: prior, claims: claims)
        }
    }

    public func apply(_ decision: LedgerDecision) async throws -> ApplyResult {
        if decision.isRecorded { return .alreadyDecided(decision.verdict) }
        let codec = self.codec
        let json = String(decoding: codec.encode(decision.verdict), as: UTF8.self)
        // The verdict as every later delivery will read it back (dates at the JSON's millisecond precision).
        let verdict = try Self.decodeVerdict(json, codec: codec)
        return try await executor.run { connection, fault in
            try connection.writeTransaction { () throws -> (ApplyResult, commit: Bool) in
                let now = SQLiteValue(Date())
                try fault("verdict")
                try connection.query(
                    """
                    INSERT INTO job_verdicts (job_id, verdict_id, account_id, outcome, reason, verdict_json, decided_at, created_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (job_id) DO NOTHING
                    """,
                    [
                        .text(verdict.jobID), .text(verdict.verdictID), .text(verdict.accountID),
                        .text(verdict.outcome.rawValue), SQLiteValue(verdict.reason?.rawValue), .text(json),
                        SQLiteValue(verdict.decidedAt), now,
                    ])
                if connection.changes == 0 {
                    let stored = try connection.query(
                        "SELECT verdict_json FROM job_verdicts WHERE job_id = ?", [.text(verdict.jobID)]
                    ).first?.first?.text
                    guard let stored else { throw LedgerError(.database, "job verdict vanished during apply") }
                    return (.alreadyDecided(try Self.decodeVerdict(stored, codec: codec)), false)
                }
                let ok = try Self.write(decision.writes, connection: connection, fault: fault)
                return ok ? (.applied(verdict), true) : (.raceLost, false)
            }
        }
    }

    public func perform(_ writes: [LedgerWrite]) async throws -> Bool {
        try await executor.run { connection, fault in
            try connection.writeTransaction { () throws -> (Bool, commit: Bool) in
                let ok = try Self.write(writes, connection: connection, fault: fault)
                return (ok, ok)
            }
        }
    }

    public func schemaVersions() async throws -> [Int] {
        try await executor.run { connection, _ in
            try connection.query("SELECT version FROM ledger_migrations ORDER BY version").compactMap {
                $0.first?.integer.map(Int.init)
            }
        }
    }

    /// Tests only: fail the statement labelled `label` (`verdict`, `claim`, `revoke`, `move`, `extend`,
    /// `reinstate`, `notification`).
    func injectFault(_ hook: (@Sendable (String) -> LedgerError?)?) async {
        await executor.setFaultHook(hook)
    }

    // MARK: Statements (run on the executor's queue)

    private static func write(
        _ writes: [LedgerWrite], connection: LedgerSQLiteConnection, fault: FaultPoint
    ) throws -> Bool {
        let now = SQLiteValue(Date())
        for write in writes {
            switch write {
            case .claim(let claim):
                try fault("claim")
                try connection.query(
                    """
                    INSERT INTO transaction_claims (\(claimColumns))
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (transaction_id) DO NOTHING
                    """,
                    [
                        .text(claim.transactionID), .text(claim.originalTransactionID), .text(claim.accountID),
                        .text(claim.productID), .text(claim.productType.rawValue), SQLiteValue(claim.bundleID),
                        SQLiteValue(claim.environment), SQLiteValue(claim.purchaseDate), SQLiteValue(claim.expiresDate),
                        SQLiteValue(claim.gracePeriodExpiresDate), SQLiteValue(claim.revokedAt),
                        .text(claim.grantedJobID), .text(claim.verdictID), now, now,
                        claim.autoRenew.map { SQLiteValue($0) } ?? .null, SQLiteValue(claim.notificationSignedAt),
                        SQLiteValue(claim.revocation?.type?.rawValue),
                        claim.revocation?.percentage.map { .integer(Int64($0)) } ?? .null,
                        claim.revocation?.reason.map { .integer(Int64($0)) } ?? .null,
                        SQLiteValue(claim.ownershipType?.rawValue), SQLiteValue(claim.storefront),
                    ])
                if connection.changes == 0 { return false }
            case .revoke(let transactionID, let revokedAt, let revocation):
                try fault("revoke")
                if let revocation {
                    // How Apple revoked it goes with the first revocation, or onto a revoked claim that lacks it.
                    try connection.query(
                        """
                        UPDATE transaction_claims
                        SET revocation_type = ?, revocation_percentage = ?, revocation_reason = ?
                        WHERE transaction_id = ? AND (revoked_at IS NULL OR (revocation_type IS NULL
                            AND revocation_percentage IS NULL AND revocation_reason IS NULL))
                        """,
                        [
                            SQLiteValue(revocation.type?.rawValue),
                            revocation.percentage.map { .integer(Int64($0)) } ?? .null,
                            revocation.reason.map { .integer(Int64($0)) } ?? .null, .text(transactionID),
                        ])
                }
                try connection.query(
                    """
                    UPDATE transaction_claims SET revoked_at = COALESCE(revoked_at, ?), updated_at = ?
                    WHERE transaction_id = ?
                    """, [SQLiteValue(revokedAt), now, .text(transactionID)])
            case .moveSubscription(let original, let from, let to, let expected):
                try fault("move")
                let owned = try connection.query(
                    """
                    SELECT transaction_id FROM transaction_claims
                    WHERE original_transaction_id = ? AND account_id = ? ORDER BY transaction_id
                    """, [.text(original), .text(from)]
                ).compactMap { $0.first?.text }
                if owned != expected.sorted() { return false }
                try connection.query(
                    """
                    UPDATE transaction_claims SET account_id = ?, updated_at = ?
                    WHERE original_transaction_id = ? AND account_id = ?
                    """, [.text(to), now, .text(original), .text(from)])
            case .extendSubscription(let transactionID, let expiresDate, let graceDate):
                try fault("extend")
                if let expiresDate {
                    try connection.query(
                        """
                        UPDATE transaction_claims SET expires_date = ?, updated_at = ?
                        WHERE transaction_id = ? AND (expires_date IS NULL OR expires_date < ?)
                        """, [SQLiteValue(expiresDate), now, .text(transactionID), SQLiteValue(expiresDate)])
                }
                if let graceDate {
                    try connection.query(
                        """
                        UPDATE transaction_claims SET grace_period_expires_date = ?, updated_at = ?
                        WHERE transaction_id = ? AND (grace_period_expires_date IS NULL OR grace_period_expires_date < ?)
                        """, [SQLiteValue(graceDate), now, .text(transactionID), SQLiteValue(graceDate)])
                }
            case .reinstate(let transactionID):
                try fault("reinstate")
                try connection.query(
                    """
                    UPDATE transaction_claims SET revoked_at = NULL, revocation_type = NULL,
                        revocation_percentage = NULL, revocation_reason = NULL, updated_at = ?
                    WHERE transaction_id = ?
                    """,
                    [now, .text(transactionID)])
            case .recordNotification(let original, let signedAt, let autoRenew, let familyShared):
                try fault("notification")
                // A family member's claims and the purchaser's are ordered apart (``LedgerWrite``).
                let side = "(COALESCE(ownership_type, '') = 'FAMILY_SHARED') = ?"
                if let signedAt {
                    // A newer notification applied since the snapshot: this one is late, decide it again.
                    let newer = try connection.query(
                        """
                        SELECT 1 FROM transaction_claims
                        WHERE original_transaction_id = ? AND notification_signed_at > ? AND \(side) LIMIT 1
                        """, [.text(original), SQLiteValue(signedAt), SQLiteValue(familyShared)])
                    if !newer.isEmpty { return false }
                    try connection.query(
                        """
                        UPDATE transaction_claims SET notification_signed_at = ?, updated_at = ?
                        WHERE original_transaction_id = ? AND \(side)
                            AND (notification_signed_at IS NULL OR notification_signed_at < ?)
                        """,
                        [SQLiteValue(signedAt), now, .text(original), SQLiteValue(familyShared), SQLiteValue(signedAt)])
                }
                if let autoRenew {
                    try connection.query(
                        """
                        UPDATE transaction_claims SET auto_renew = ?, updated_at = ?
                        WHERE original_transaction_id = ? AND \(side)
                        """, [SQLiteValue(autoRenew), now, .text(original), SQLiteValue(familyShared)])
                }
            case .endSubscription(let original, let at):
                try fault("end")
                for column in ["expires_date", "grace_period_expires_date"] {
                    try connection.query(
                        """
                        UPDATE transaction_claims SET \(column) = ?, updated_at = ?
                        WHERE original_transaction_id = ? AND \(column) > ?
                        """, [SQLiteValue(at), now, .text(original), SQLiteValue(at)])
                }
            case .recordPendingPurchase(let pending):
                try fault("pending")
                try connection.query(
                    """
                    INSERT INTO play_pending_purchases
                        (purchase_token, account_id, job_id, package_name, product_id, created_at)
                    VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (purchase_token) DO NOTHING
                    """,
                    [
                        .text(pending.purchaseToken), .text(pending.accountID), .text(pending.jobID),
                        .text(pending.packageName), .text(pending.productID), SQLiteValue(pending.recordedAt),
                    ])
            case .recordRefundReview(let review):
                try fault("review")
                try connection.query(
                    """
                    INSERT INTO play_refund_reviews (pending_refund_token, purchase_token, order_id, package_name,
                        event_at, deadline, job_id, created_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (pending_refund_token) DO NOTHING
                    """,
                    [
                        .text(review.pendingRefundToken), .text(review.purchaseToken), .text(review.orderID),
                        .text(review.packageName), SQLiteValue(review.eventAt), SQLiteValue(review.deadline),
                        .text(review.jobID), now,
                    ])
            }
        }
        return true
    }

    static let claimColumns = """
        transaction_id, original_transaction_id, account_id, product_id, product_type, bundle_id, environment, \
        purchase_date, expires_date, grace_period_expires_date, revoked_at, granted_job_id, verdict_id, created_at, \
        updated_at, auto_renew, notification_signed_at, revocation_type, revocation_percentage, revocation_reason, \
        ownership_type, storefront
        """

    static func claim(_ row: [SQLiteValue]) throws(LedgerError) -> TransactionClaim {
        guard row.count == 22, let id = row[0].text, let original = row[1].text, let account = row[2].text,
            let product = row[3].text, let type = row[4].text.flatMap(ProductType.init(rawValue:)),
            let job = row[11].text, let verdictID = row[12].text, let created = row[13].date,
            let updated = row[14].date
        else { throw LedgerError(.corrupt, "a transaction_claims row could not be read") }
        return TransactionClaim(
            transactionID: id, originalTransactionID: original, accountID: account, productID: product,
            productType: type, bundleID: row[5].text, environment: row[6].text, purchaseDate: row[7].date,
            expiresDate: row[8].date, gracePeriodExpiresDate: row[9].date, revokedAt: row[10].date,
            grantedJobID: job, verdictID: verdictID, createdAt: created, updatedAt: updated,
            autoRenew: row[15].integer.map { $0 != 0 }, notificationSignedAt: row[16].date,
            revocation: Revocation(
                type: row[17].text.map { Revocation.Kind($0) }, percentage: row[18].integer.map { Int($0) },
                reason: row[19].integer.map { Int($0) }),
            ownershipType: row[20].text.map { OwnershipType($0) }, storefront: row[21].text)
    }

    static func decodeVerdict(_ json: String, codec: MessageCodec) throws(LedgerError) -> Verdict {
        do {
            return try codec.decodeVerdict(Array(json.utf8))
        } catch {
            throw LedgerError(.corrupt, "a stored verdict could not be read: \(error)")
        }
    }
}
