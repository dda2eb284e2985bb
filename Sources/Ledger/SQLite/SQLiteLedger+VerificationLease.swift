import Decision
import Foundation
import SQLiteStorage

/// The verification leases of one node (docs/LEDGER.md): each operation is one `BEGIN IMMEDIATE` transaction, so
/// processes sharing the file take a lease one at a time.
extension SQLiteLedger {
    public func acquireVerificationLease(
        key: String, holder: String, now: Date, duration: Duration
    ) async throws -> VerificationLeaseState {
        let expiresAt = now.adding(duration)
        return try await executor.run { connection, _ in
            try connection.writeTransaction { () throws -> (VerificationLeaseState, commit: Bool) in
                let row = try connection.query(
                    "SELECT holder, expires_at, evidence_json FROM verification_leases WHERE lease_key = ?",
                    [.text(key)]
                ).first
                if let row, let owner = row[0].text, let until = row[1].date, until > now {
                    if let json = row[2].text {
                        // An answer of another version is no answer: take the lease and ask Apple.
                        if let evidence = PurchaseEvidence(jsonText: json) { return (.answered(evidence), false) }
                    } else if owner != holder {
                        return (.held(by: owner, until: until), false)
                    }
                }
                try connection.query(
                    """
                    INSERT INTO verification_leases (lease_key, holder, expires_at, evidence_json, updated_at)
                    VALUES (?, ?, ?, NULL, ?)
                    ON CONFLICT (lease_key) DO UPDATE SET
                        holder = excluded.holder, expires_at = excluded.expires_at, evidence_json = NULL,
                        updated_at = excluded.updated_at
                    """,
                    [.text(key), .text(holder), SQLiteValue(expiresAt), SQLiteValue(now)])
                return (.acquired(expiresAt: expiresAt), true)
            }
        }
    }

    public func recordVerificationAnswer(
        key: String, holder: String, evidence: PurchaseEvidence, now: Date, keepFor: Duration
    ) async throws {
        let json = evidence.jsonText()
        let expiresAt = now.adding(keepFor)
        try await executor.run { connection, _ in
            try connection.writeTransaction { () throws -> (Void, commit: Bool) in
                // Not over another holder's answer: the first answer stands for its lifetime.
                try connection.query(
                    """
                    INSERT INTO verification_leases (lease_key, holder, expires_at, evidence_json, updated_at)
                    VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (lease_key) DO UPDATE SET
                        holder = excluded.holder, expires_at = excluded.expires_at,
                        evidence_json = excluded.evidence_json, updated_at = excluded.updated_at
                    WHERE verification_leases.holder = excluded.holder OR verification_leases.evidence_json IS NULL
                        OR verification_leases.expires_at <= excluded.updated_at
                    """,
                    [.text(key), .text(holder), SQLiteValue(expiresAt), .text(json), SQLiteValue(now)])
                return ((), true)
            }
        }
    }

    public func releaseVerificationLease(key: String, holder: String) async throws {
        try await executor.run { connection, _ in
            try connection.writeTransaction { () throws -> (Void, commit: Bool) in
                try connection.query(
                    """
                    DELETE FROM verification_leases
                    WHERE lease_key = ? AND holder = ? AND evidence_json IS NULL
                    """, [.text(key), .text(holder)])
                return ((), true)
            }
        }
    }

    public func removeExpiredVerificationLeases(before now: Date) async throws -> Int {
        try await executor.run { connection, _ in
            try connection.writeTransaction { () throws -> (Int, commit: Bool) in
                try connection.query("DELETE FROM verification_leases WHERE expires_at <= ?", [SQLiteValue(now)])
                return (connection.changes, true)
            }
        }
    }
}
