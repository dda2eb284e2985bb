import CodedErrors
import Foundation
import PostgresNIO
import PostgresSettings

/// The cluster's follow-up records (`apple_call_records`, docs/LEDGER.md): single statements, atomic under READ COMMITTED.
extension PostgresLedger {
    public func claimFollowUp(
        _ call: FollowUpRecord.Call, holder: String, now: Date, lease: Duration
    ) async throws -> FollowUpClaim {
        let dueAt = now.adding(lease)
        let kind = call.kind.rawValue
        // A row deleted between the insert and the read is found by neither: try again (never happens today: rows
        // are never deleted).
        for _ in 0..<4 {
            let row = try await operation("claim apple call") { pool, logger in
                try await pool.withConnection { connection in
                    try await connection.query(
                        """
                        WITH inserted AS (
                            INSERT INTO apple_call_records (kind, call_key, transaction_id, environment, state, holder,
                                due_at, attempts, detail, created_at, updated_at)
                            VALUES (\(kind), \(call.key), \(call.transactionID), \(call.environment), 'pending',
                                \(holder), \(dueAt), 0, NULL, \(now), \(now))
                            ON CONFLICT (kind, call_key) DO NOTHING
                            RETURNING state
                        )
                        SELECT true, state FROM inserted
                        UNION ALL
                        SELECT false, state FROM apple_call_records
                        WHERE kind = \(kind) AND call_key = \(call.key) AND NOT EXISTS (SELECT 1 FROM inserted)
                        """, logger: logger
                    ).decode((Bool, String).self).collected().first
                }
            }
            guard let (inserted, stateText) = row else { continue }
            if inserted { return .claimed }
            guard let state = FollowUpRecord.State(rawValue: stateText) else {
                throw LedgerError(.corrupt, "an apple_call_records row has an unknown state")
            }
            return .exists(state)
        }
        throw LedgerError(.contention, "apple call claim: the row kept changing under four attempts")
    }

    public func claimDueFollowUps(
        kind: FollowUpRecord.Kind, holder: String, now: Date, lease: Duration, limit: Int
    ) async throws -> [FollowUpRecord.Call] {
        let dueAt = now.adding(lease)
        let kindText = kind.rawValue
        let rows = try await operation("claim due apple calls") { pool, logger in
            try await pool.withConnection { connection in
                // SKIP LOCKED: sweepers of several workers take disjoint rows instead of waiting for each other.
                try await connection.query(
                    """
                    UPDATE apple_call_records AS r SET holder = \(holder), due_at = \(dueAt), updated_at = \(now)
                    FROM (
                        SELECT kind, call_key FROM apple_call_records
                        WHERE kind = \(kindText) AND state = 'pending' AND due_at <= \(now)
                        ORDER BY due_at LIMIT \(max(0, limit)) FOR UPDATE SKIP LOCKED
                    ) AS due
                    WHERE r.kind = due.kind AND r.call_key = due.call_key
                    RETURNING r.call_key, r.transaction_id, r.environment, r.attempts
                    """, logger: logger
                ).decode((String, String, String?, Int).self).collected()
            }
        }
        return rows.map { key, transactionID, environment, attempts in
            FollowUpRecord.Call(
                kind: kind, key: key, transactionID: transactionID, environment: environment, attempts: attempts)
        }
    }

    public func settleFollowUp(
        kind: FollowUpRecord.Kind, key: String, holder: String, state: FollowUpRecord.State, detail: String?,
        retryAt: Date?, now: Date
    ) async throws {
        let kindText = kind.rawValue
        let dueAt = retryAt ?? now
        try await operation("settle apple call") { pool, logger in
            try await pool.withConnection { connection in
                _ = try await connection.query(
                    """
                    UPDATE apple_call_records
                    SET state = \(state.rawValue), holder = NULL, due_at = \(dueAt), attempts = attempts + 1,
                        detail = \(detail), updated_at = \(now)
                    WHERE kind = \(kindText) AND call_key = \(key) AND holder = \(holder) AND state = 'pending'
                    """, logger: logger
                ).collect()
            }
        }
    }

    public func followUpRecord(kind: FollowUpRecord.Kind, key: String) async throws -> FollowUpRecord? {
        let kindText = kind.rawValue
        let row = try await operation("read apple call") { pool, logger in
            try await pool.withConnection { connection in
                try await connection.query(
                    """
                    SELECT transaction_id, environment, state, holder, due_at, attempts, detail, created_at, updated_at
                    FROM apple_call_records WHERE kind = \(kindText) AND call_key = \(key)
                    """, logger: logger
                ).decode((String, String?, String, String?, Date, Int, String?, Date, Date).self).collected().first
            }
        }
        guard let (transactionID, environment, stateText, holder, due, attempts, detail, created, updated) = row else {
            return nil
        }
        guard let state = FollowUpRecord.State(rawValue: stateText) else {
            throw LedgerError(.corrupt, "an apple_call_records row has an unknown state")
        }
        return FollowUpRecord(
            call: FollowUpRecord.Call(
                kind: kind, key: key, transactionID: transactionID, environment: environment, attempts: attempts),
            state: state, holder: holder, dueAt: due, detail: detail, createdAt: created, updatedAt: updated)
    }

    public func oldestPendingFollowUp(kinds: [FollowUpRecord.Kind]) async throws -> Date? {
        guard !kinds.isEmpty else { return nil }
        let kindTexts = kinds.map(\.rawValue)
        return try await operation("oldest pending apple call") { pool, logger in
            try await pool.withConnection { connection in
                try await connection.query(
                    """
                    SELECT MIN(created_at) FROM apple_call_records
                    WHERE state = 'pending' AND kind = ANY(\(kindTexts))
                    """, logger: logger
                ).decode(Date?.self).collected().first ?? nil
            }
        }
    }
}
