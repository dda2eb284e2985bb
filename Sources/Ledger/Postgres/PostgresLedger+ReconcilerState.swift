import Foundation
import PostgresNIO
import PostgresSettings

/// The reconciler's lease and checkpoint (docs/LEDGER.md): single statements, atomic under READ COMMITTED.
extension PostgresLedger {
    public func acquireReconcilerLease(
        name: String, holder: String, now: Date, duration: Duration
    ) async throws -> ReconcilerLease? {
        let expiresAt = now.adding(duration)
        let row = try await operation("acquire reconciler lease") { pool, logger in
            try await pool.withConnection { connection in
                // Insert, renew this holder's lease or take over an expired one; a live lease of another holder
                // makes the update a no-op and nothing is returned. Concurrent inserts serialize on the key.
                try await connection.query(
                    """
                    INSERT INTO reconciler_state AS r (name, holder, lease_expires_at, checkpoint, updated_at)
                    VALUES (\(name), \(holder), \(expiresAt), NULL, \(now))
                    ON CONFLICT (name) DO UPDATE SET
                        holder = EXCLUDED.holder, lease_expires_at = EXCLUDED.lease_expires_at,
                        updated_at = EXCLUDED.updated_at
                    WHERE r.holder = EXCLUDED.holder OR r.lease_expires_at <= EXCLUDED.updated_at
                    RETURNING r.lease_expires_at, r.checkpoint
                    """, logger: logger
                ).decode((Date, Date?).self).collected().first
            }
        }
        return row.map { ReconcilerLease(expiresAt: $0.0, checkpoint: $0.1) }
    }

    public func advanceReconcilerCheckpoint(
        name: String, holder: String, checkpoint: Date, now: Date
    ) async throws -> Bool {
        let rows = try await operation("advance reconciler checkpoint") { pool, logger in
            try await pool.withConnection { connection in
                try await connection.query(
                    """
                    UPDATE reconciler_state
                    SET checkpoint = GREATEST(COALESCE(checkpoint, \(checkpoint)), \(checkpoint)), updated_at = \(now)
                    WHERE name = \(name) AND holder = \(holder) AND lease_expires_at > \(now)
                    RETURNING 1
                    """, logger: logger
                ).decode(Int.self).collected()
            }
        }
        return rows.count == 1
    }

    public func releaseReconcilerLease(name: String, holder: String, now: Date) async throws {
        try await operation("release reconciler lease") { pool, logger in
            try await pool.withConnection { connection in
                _ = try await connection.query(
                    """
                    UPDATE reconciler_state SET lease_expires_at = \(now), updated_at = \(now)
                    WHERE name = \(name) AND holder = \(holder)
                    """, logger: logger
                ).collect()
            }
        }
    }
}
