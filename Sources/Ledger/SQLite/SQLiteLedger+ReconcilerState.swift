import Foundation
import SQLiteStorage

/// The reconciler's lease and checkpoint (docs/LEDGER.md): each operation one transaction on the ledger's one
/// connection, so two replicas on one SQLite file never both take the lease.
extension SQLiteLedger {
    public func acquireReconcilerLease(
        name: String, holder: String, now: Date, duration: Duration
    ) async throws -> ReconcilerLease? {
        let expiresAt = now.adding(duration)
        return try await executor.run { connection, _ in
            try connection.writeTransaction { () throws -> (ReconcilerLease?, commit: Bool) in
                let row = try connection.query(
                    "SELECT holder, lease_expires_at, checkpoint FROM reconciler_state WHERE name = ?", [.text(name)]
                ).first
                if let row, let owner = row[0].text, owner != holder, let until = row[1].date, until > now {
                    return (nil, false)
                }
                let checkpoint = row?[2].date
                try connection.query(
                    """
                    INSERT INTO reconciler_state (name, holder, lease_expires_at, checkpoint, updated_at)
                    VALUES (?, ?, ?, NULL, ?)
                    ON CONFLICT (name) DO UPDATE SET
                        holder = excluded.holder, lease_expires_at = excluded.lease_expires_at,
                        updated_at = excluded.updated_at
                    """,
                    [.text(name), .text(holder), SQLiteValue(expiresAt), SQLiteValue(now)])
                return (ReconcilerLease(expiresAt: expiresAt, checkpoint: checkpoint), true)
            }
        }
    }

    public func advanceReconcilerCheckpoint(
        name: String, holder: String, checkpoint: Date, now: Date
    ) async throws -> Bool {
        try await executor.run { connection, _ in
            try connection.writeTransaction { () throws -> (Bool, commit: Bool) in
                try connection.query(
                    """
                    UPDATE reconciler_state
                    SET checkpoint = MAX(COALESCE(checkpoint, ?), ?), updated_at = ?
                    WHERE name = ? AND holder = ? AND lease_expires_at > ?
                    """,
                    [
                        SQLiteValue(checkpoint), SQLiteValue(checkpoint), SQLiteValue(now), .text(name), .text(holder),
                        SQLiteValue(now),
                    ])
                return (connection.changes == 1, true)
            }
        }
    }

    public func releaseReconcilerLease(name: String, holder: String, now: Date) async throws {
        try await executor.run { connection, _ in
            try connection.writeTransaction { () throws -> (Void, commit: Bool) in
                try connection.query(
                    "UPDATE reconciler_state SET lease_expires_at = ?, updated_at = ? WHERE name = ? AND holder = ?",
                    [SQLiteValue(now), SQLiteValue(now), .text(name), .text(holder)])
                return ((), true)
            }
        }
    }
}
