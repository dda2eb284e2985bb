import CodedErrors
import Decision
import Foundation
import PostgresNIO
import PostgresSettings

/// The cluster's verification leases (docs/LEDGER.md): single statements, atomic under READ COMMITTED, one round
/// trip each in the common case.
extension PostgresLedger {
    public func acquireVerificationLease(
        key: String, holder: String, now: Date, duration: Duration
    ) async throws -> VerificationLeaseState {
        let expiresAt = now.adding(duration)
        // A row released or swept between the insert and the read is found by neither: try again (rare).
        for _ in 0..<4 {
            let row = try await operation("acquire lease") { pool, logger in
                try await pool.withConnection { connection in
                    // Insert, or take over an expired lease (or this holder's own, unanswered), or report the row as
                    // it is. The union's second half sees rows committed before this statement began; a lease
                    // committed while the insert waited for it is read by the next attempt.
                    try await connection.query(
                        """
                        WITH taken AS (
                            INSERT INTO verification_leases AS l (lease_key, holder, expires_at, evidence_json, updated_at)
                            VALUES (\(key), \(holder), \(expiresAt), NULL, \(now))
                            ON CONFLICT (lease_key) DO UPDATE SET
                                holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at, evidence_json = NULL,
                                updated_at = EXCLUDED.updated_at
                            WHERE l.expires_at <= EXCLUDED.updated_at
                                OR (l.holder = EXCLUDED.holder AND l.evidence_json IS NULL)
                            RETURNING l.holder, l.expires_at
                        )
                        SELECT true, holder, expires_at, NULL::text FROM taken
                        UNION ALL
                        SELECT false, holder, expires_at, evidence_json FROM verification_leases
                        WHERE lease_key = \(key) AND NOT EXISTS (SELECT 1 FROM taken)
                        """, logger: logger
                    ).decode((Bool, String, Date, String?).self).collected().first
                }
            }
            guard let (taken, owner, until, json) = row else { continue }
            if taken { return .acquired(expiresAt: until) }
            if let json {
                // An answer this build cannot read counts as none: ask Apple, holding nothing.
                return PurchaseEvidence(jsonText: json).map { .answered($0) } ?? .acquired(expiresAt: now)
            }
            return .held(by: owner, until: until)
        }
        throw LedgerError(.contention, "verification lease: the row kept changing under four attempts")
    }

    public func recordVerificationAnswer(
        key: String, holder: String, evidence: PurchaseEvidence, now: Date, keepFor: Duration
    ) async throws {
        let json = evidence.jsonText()
        let expiresAt = now.adding(keepFor)
        try await operation("record lease answer") { pool, logger in
            try await pool.withConnection { connection in
                // Not over another holder's live answer: the first answer stands for its lifetime.
                _ = try await connection.query(
                    """
                    INSERT INTO verification_leases AS l (lease_key, holder, expires_at, evidence_json, updated_at)
                    VALUES (\(key), \(holder), \(expiresAt), \(json), \(now))
                    ON CONFLICT (lease_key) DO UPDATE SET
                        holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at,
                        evidence_json = EXCLUDED.evidence_json, updated_at = EXCLUDED.updated_at
                    WHERE l.holder = EXCLUDED.holder OR l.evidence_json IS NULL
                        OR l.expires_at <= EXCLUDED.updated_at
                    """, logger: logger
                ).collect()
            }
        }
    }

    public func releaseVerificationLease(key: String, holder: String) async throws {
        try await operation("release lease") { pool, logger in
            try await pool.withConnection { connection in
                _ = try await connection.query(
                    """
                    DELETE FROM verification_leases
                    WHERE lease_key = \(key) AND holder = \(holder) AND evidence_json IS NULL
                    """, logger: logger
                ).collect()
            }
        }
    }

    public func removeExpiredVerificationLeases(before now: Date) async throws -> Int {
        try await operation("remove expired leases") { pool, logger in
            try await pool.withConnection { connection in
                try await connection.query(
                    """
                    WITH removed AS (DELETE FROM verification_leases WHERE expires_at <= \(now) RETURNING 1)
                    SELECT count(*)::bigint FROM removed
                    """, logger: logger
                ).decode(Int64.self).collected().first.map(Int.init) ?? 0
            }
        }
    }
}
