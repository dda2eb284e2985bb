import Foundation
import PostgresNIO
import PostgresSettings

/// The reconciler's list of subscriptions to re-read, and its record of re-reads (docs/LEDGER.md).
extension PostgresLedger {
    public func unsureSubscriptions(
        bundleID: String?, now: Date, lapsedSince: Date, rereadBefore: Date, limit: Int
    ) async throws -> [UnsureSubscription] {
        let limit = max(limit, 0)
        // A refunded period is awaited for a reversal while it ends within the window either side of now.
        let refundedUntil = now.addingTimeInterval(now.timeIntervalSince(lapsedSince))
        let named = try await operation("subscriptions named while unclaimed") { pool, logger in
            try await pool.withConnection { connection in
                // Claims made after a notification about their transaction found none: read the whole history once.
                try await connection.query(
                    """
                    SELECT c.original_transaction_id, MAX(c.environment), r.reread_at, MAX(c.bundle_id)
                    FROM job_verdicts v
                    CROSS JOIN LATERAL jsonb_array_elements(
                        CASE WHEN jsonb_typeof(v.verdict_json::jsonb -> 'transactions') = 'array'
                            THEN v.verdict_json::jsonb -> 'transactions' ELSE '[]'::jsonb END) t(value)
                    JOIN transaction_claims c ON c.transaction_id = t.value ->> 'transaction_id'
                    LEFT JOIN subscription_rereads r ON r.original_transaction_id = c.original_transaction_id
                    LEFT JOIN job_verdicts g ON g.job_id = c.granted_job_id
                    WHERE v.reason = 'unclaimed' AND v.decided_at > \(lapsedSince) AND c.revoked_at IS NULL
                        AND (r.reread_at IS NULL OR r.reread_at < v.decided_at)
                        AND (\(bundleID)::text IS NULL OR c.bundle_id = \(bundleID))
                        AND COALESCE(g.verdict_json::jsonb ->> 'store', 'app_store') = 'app_store'
                    GROUP BY c.original_transaction_id, r.reread_at
                    ORDER BY MIN(v.decided_at), c.original_transaction_id
                    LIMIT \(limit)
                    """, logger: logger
                ).decode((String, String?, Date?, String?).self).collected()
            }
        }
        let rows = try await operation("unsure subscriptions") { pool, logger in
            try await pool.withConnection { connection in
                // `c` is the subscription's latest claim (no sibling purchased later, or as late and ending later),
                // whose state is the subscription's: its period ended in the window, it is not revoked, and
                // auto-renew was not turned off (Apple retries billing only with it on); or it was revoked in the
                // window (a refund Apple may reverse), read from the start since a reversal changes a transaction
                // read before. A claim granted by a Google Play verdict is the Play re-reads', whatever its package.
                try await connection.query(
                    """
                    SELECT c.original_transaction_id, MAX(c.environment), r.reread_at,
                        CASE WHEN MAX(c.revoked_at) IS NULL THEN r.revision END, MAX(c.bundle_id)
                    FROM transaction_claims c
                    LEFT JOIN subscription_rereads r ON r.original_transaction_id = c.original_transaction_id
                    LEFT JOIN job_verdicts g ON g.job_id = c.granted_job_id
                    WHERE c.product_type = 'auto_renewable' AND c.expires_date > \(lapsedSince)
                        AND c.expires_date <= \(refundedUntil)
                        AND ((c.expires_date <= \(now) AND c.revoked_at IS NULL
                                AND c.auto_renew IS DISTINCT FROM false)
                            OR (c.revoked_at > \(lapsedSince) AND c.revoked_at <= \(now)))
                        AND \(unescaped: LedgerSchema.isLatestClaim)
                        AND (r.reread_at IS NULL OR r.reread_at <= \(rereadBefore))
                        AND (\(bundleID)::text IS NULL OR c.bundle_id = \(bundleID))
                        AND COALESCE(g.verdict_json::jsonb ->> 'store', 'app_store') = 'app_store'
                    GROUP BY c.original_transaction_id, r.reread_at, r.revision
                    ORDER BY r.reread_at NULLS FIRST, c.original_transaction_id
                    LIMIT \(limit)
                    """, logger: logger
                ).decode((String, String?, Date?, String?, String?).self).collected()
            }
        }
        return UnsureSubscription.merged(
            named.map {
                UnsureSubscription(
                    originalTransactionID: $0.0, environment: $0.1, rereadAt: $0.2, revision: nil, bundleID: $0.3)
            },
            rows.map {
                UnsureSubscription(
                    originalTransactionID: $0.0, environment: $0.1, rereadAt: $0.2, revision: $0.3, bundleID: $0.4)
            }, limit: limit)
    }

    public func recordSubscriptionReread(originalTransactionID: String, revision: String?, at: Date) async throws {
        try await operation("record subscription re-read") { pool, logger in
            try await pool.withConnection { connection in
                _ = try await connection.query(
                    """
                    INSERT INTO subscription_rereads AS r (original_transaction_id, reread_at, revision, updated_at)
                    VALUES (\(originalTransactionID), \(at), \(revision), \(at))
                    ON CONFLICT (original_transaction_id) DO UPDATE SET
                        reread_at = EXCLUDED.reread_at, revision = COALESCE(EXCLUDED.revision, r.revision),
                        updated_at = EXCLUDED.updated_at
                    """, logger: logger
                ).collect()
            }
        }
    }
}

/// The reconciler's list of Play subscriptions to re-read (docs/LEDGER.md).
extension PostgresLedger {
    public func unsurePlaySubscriptions(
        packages: [String], from: Date, to: Date, rereadBefore: Date, limit: Int
    ) async throws -> [UnsurePlaySubscription] {
        guard !packages.isEmpty, limit > 0 else { return [] }
        let rows = try await operation("unsure play subscriptions") { pool, logger in
            try await pool.withConnection { connection in
                // `c` is the token's latest claim (no sibling purchased later, or as late and ending later), whose
                // dates are the subscription's. A claim an App Store verdict granted is not Google's, even when an
                // App Store bundle id is also a Play package name; one without a recorded verdict is judged by its
                // package.
                try await connection.query(
                    """
                    SELECT c.original_transaction_id, c.bundle_id, c.expires_date, c.grace_period_expires_date,
                        r.reread_at
                    FROM transaction_claims c
                    LEFT JOIN subscription_rereads r ON r.original_transaction_id = c.original_transaction_id
                    LEFT JOIN job_verdicts g ON g.job_id = c.granted_job_id
                    WHERE c.product_type = 'auto_renewable' AND c.bundle_id = ANY(\(packages))
                        AND (g.job_id IS NULL OR g.verdict_json::jsonb ->> 'store' = 'google_play')
                        AND c.revoked_at IS NULL AND c.auto_renew IS DISTINCT FROM false
                        AND ((c.expires_date > \(from) AND c.expires_date <= \(to))
                            OR (c.grace_period_expires_date > \(from) AND c.grace_period_expires_date <= \(to)))
                        AND \(unescaped: LedgerSchema.isLatestClaim)
                        AND (r.reread_at IS NULL OR r.reread_at <= \(rereadBefore))
                    ORDER BY r.reread_at NULLS FIRST, COALESCE(c.grace_period_expires_date, c.expires_date),
                        c.original_transaction_id
                    LIMIT \(limit)
                    """, logger: logger
                ).decode((String, String, Date?, Date?, Date?).self).collected()
            }
        }
        return rows.map {
            UnsurePlaySubscription(
                purchaseToken: $0.0, packageName: $0.1, expiresDate: $0.2, gracePeriodExpiresDate: $0.3, rereadAt: $0.4)
        }
    }
}
