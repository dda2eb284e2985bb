import Foundation
import SQLiteStorage

/// The reconciler's list of subscriptions to re-read, and its record of re-reads (docs/LEDGER.md).
extension SQLiteLedger {
    public func unsureSubscriptions(
        bundleID: String?, now: Date, lapsedSince: Date, rereadBefore: Date, limit: Int
    ) async throws -> [UnsureSubscription] {
        // A refunded period is awaited for a reversal while it ends within the window either side of now.
        let refundedUntil = now.addingTimeInterval(now.timeIntervalSince(lapsedSince))
        return try await executor.run { connection, _ in
            // Claims made after a notification about their transaction found none: read the whole history once.
            let named = try connection.query(
                """
                SELECT c.original_transaction_id, MAX(c.environment), r.reread_at, MAX(c.bundle_id)
                FROM job_verdicts v
                JOIN json_each(v.verdict_json, '$.transactions') t
                JOIN transaction_claims c ON c.transaction_id = json_extract(t.value, '$.transaction_id')
                LEFT JOIN subscription_rereads r ON r.original_transaction_id = c.original_transaction_id
                LEFT JOIN job_verdicts g ON g.job_id = c.granted_job_id
                WHERE v.reason = 'unclaimed' AND v.decided_at > ?
                    AND c.revoked_at IS NULL AND (r.reread_at IS NULL OR r.reread_at < v.decided_at)
                    AND (? IS NULL OR c.bundle_id = ?)
                    AND COALESCE(json_extract(g.verdict_json, '$.store'), 'app_store') = 'app_store'
                GROUP BY c.original_transaction_id, r.reread_at
                ORDER BY MIN(v.decided_at), c.original_transaction_id
                LIMIT ?
                """,
                [
                    SQLiteValue(lapsedSince), SQLiteValue(bundleID), SQLiteValue(bundleID),
                    SQLiteValue(max(limit, 0)),
                ]
            ).compactMap { row -> UnsureSubscription? in
                guard let id = row[0].text else { return nil }
                return UnsureSubscription(
                    originalTransactionID: id, environment: row[1].text, rereadAt: row[2].date, revision: nil,
                    bundleID: row[3].text)
            }
            // `c` is the subscription's latest claim (no sibling purchased later, or as late and ending later), whose
            // state is the subscription's: its period ended in the window, it is not revoked, and auto-renew was not
            // turned off (Apple retries billing only with auto-renew on); or it was revoked in the window (a refund
            // Apple may reverse), read from the start since a reversal changes a transaction read before. A claim
            // granted by a Google Play verdict is the Play re-reads', whatever its package is called.
            let lapsed = try connection.query(
                """
                SELECT c.original_transaction_id, MAX(c.environment), r.reread_at,
                    CASE WHEN MAX(c.revoked_at) IS NULL THEN r.revision END, MAX(c.bundle_id)
                FROM transaction_claims c
                LEFT JOIN subscription_rereads r ON r.original_transaction_id = c.original_transaction_id
                LEFT JOIN job_verdicts g ON g.job_id = c.granted_job_id
                WHERE c.product_type = 'auto_renewable' AND c.expires_date > ? AND c.expires_date <= ?
                    AND ((c.expires_date <= ? AND c.revoked_at IS NULL AND (c.auto_renew IS NULL OR c.auto_renew <> 0))
                        OR (c.revoked_at > ? AND c.revoked_at <= ?))
                    AND \(LedgerSchema.isLatestClaim)
                    AND (r.reread_at IS NULL OR r.reread_at <= ?)
                    AND (? IS NULL OR c.bundle_id = ?)
                    AND COALESCE(json_extract(g.verdict_json, '$.store'), 'app_store') = 'app_store'
                GROUP BY c.original_transaction_id, r.reread_at, r.revision
                ORDER BY r.reread_at IS NOT NULL, r.reread_at, c.original_transaction_id
                LIMIT ?
                """,
                [
                    SQLiteValue(lapsedSince), SQLiteValue(refundedUntil), SQLiteValue(now), SQLiteValue(lapsedSince),
                    SQLiteValue(now), SQLiteValue(rereadBefore), SQLiteValue(bundleID), SQLiteValue(bundleID),
                    SQLiteValue(max(limit, 0)),
                ]
            ).compactMap { row -> UnsureSubscription? in
                guard let id = row[0].text else { return nil }
                return UnsureSubscription(
                    originalTransactionID: id, environment: row[1].text, rereadAt: row[2].date, revision: row[3].text,
                    bundleID: row[4].text)
            }
            return UnsureSubscription.merged(named, lapsed, limit: limit)
        }
    }

    public func recordSubscriptionReread(originalTransactionID: String, revision: String?, at: Date) async throws {
        try await executor.run { connection, _ in
            try connection.writeTransaction { () throws -> (Void, commit: Bool) in
                try connection.query(
                    """
                    INSERT INTO subscription_rereads (original_transaction_id, reread_at, revision, updated_at)
                    VALUES (?, ?, ?, ?)
                    ON CONFLICT (original_transaction_id) DO UPDATE SET
                        reread_at = excluded.reread_at, revision = COALESCE(excluded.revision, revision),
                        updated_at = excluded.updated_at
                    """,
                    [.text(originalTransactionID), SQLiteValue(at), SQLiteValue(revision), SQLiteValue(at)])
                return ((), true)
            }
        }
    }
}

/// The reconciler's list of Play subscriptions to re-read (docs/LEDGER.md).
extension SQLiteLedger {
    public func unsurePlaySubscriptions(
        packages: [String], from: Date, to: Date, rereadBefore: Date, limit: Int
    ) async throws -> [UnsurePlaySubscription] {
        guard !packages.isEmpty, limit > 0 else { return [] }
        return try await executor.run { connection, _ in
            let placeholders = Array(repeating: "?", count: packages.count).joined(separator: ", ")
            // `c` is the token's latest claim (no sibling purchased later, or as late and ending later), whose
            // dates are the subscription's. A claim an App Store verdict granted is not Google's, even when an App
            // Store bundle id is also a Play package name; one without a recorded verdict is judged by its package.
            return try connection.query(
                """
                SELECT c.original_transaction_id, c.bundle_id, c.expires_date, c.grace_period_expires_date, r.reread_at
                FROM transaction_claims c
                LEFT JOIN subscription_rereads r ON r.original_transaction_id = c.original_transaction_id
                LEFT JOIN job_verdicts g ON g.job_id = c.granted_job_id
                WHERE c.product_type = 'auto_renewable' AND c.bundle_id IN (\(placeholders))
                    AND (g.job_id IS NULL OR json_extract(g.verdict_json, '$.store') = 'google_play')
                    AND c.revoked_at IS NULL AND (c.auto_renew IS NULL OR c.auto_renew <> 0)
                    AND ((c.expires_date > ? AND c.expires_date <= ?)
                        OR (c.grace_period_expires_date > ? AND c.grace_period_expires_date <= ?))
                    AND \(LedgerSchema.isLatestClaim)
                    AND (r.reread_at IS NULL OR r.reread_at <= ?)
                ORDER BY r.reread_at IS NOT NULL, COALESCE(c.grace_period_expires_date, c.expires_date),
                    c.original_transaction_id
                LIMIT ?
                """,
                packages.map { SQLiteValue.text($0) } + [
                    SQLiteValue(from), SQLiteValue(to), SQLiteValue(from), SQLiteValue(to), SQLiteValue(rereadBefore),
                    SQLiteValue.integer(Int64(limit)),
                ]
            ).compactMap { row -> UnsurePlaySubscription? in
                guard let token = row[0].text, let package = row[1].text else { return nil }
                return UnsurePlaySubscription(
                    purchaseToken: token, packageName: package, expiresDate: row[2].date,
                    gracePeriodExpiresDate: row[3].date, rereadAt: row[4].date)
            }
        }
    }
}
