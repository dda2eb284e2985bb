import CodedErrors
import Foundation
import SQLiteStorage

/// The follow-up records (`apple_call_records`) of one node (docs/LEDGER.md): each operation is one `BEGIN IMMEDIATE` transaction, so
/// processes sharing the file claim a call one at a time.
extension SQLiteLedger {
    static let appleCallColumns =
        "kind, call_key, transaction_id, environment, state, holder, due_at, attempts, detail, created_at, updated_at"

    public func claimFollowUp(
        _ call: FollowUpRecord.Call, holder: String, now: Date, lease: Duration
    ) async throws -> FollowUpClaim {
        try await executor.run { connection, _ in
            try connection.writeTransaction { () throws -> (FollowUpClaim, commit: Bool) in
                let existing = try connection.query(
                    "SELECT state FROM apple_call_records WHERE kind = ? AND call_key = ?",
                    [.text(call.kind.rawValue), .text(call.key)]
                ).first?.first?.text
                if let existing {
                    guard let state = FollowUpRecord.State(rawValue: existing) else {
                        throw LedgerError(.corrupt, "an apple_call_records row has an unknown state")
                    }
                    return (.exists(state), false)
                }
                try connection.query(
                    """
                    INSERT INTO apple_call_records (\(Self.appleCallColumns))
                    VALUES (?, ?, ?, ?, 'pending', ?, ?, 0, NULL, ?, ?)
                    """,
                    [
                        .text(call.kind.rawValue), .text(call.key), .text(call.transactionID),
                        call.environment.map { .text($0) } ?? .null, .text(holder), SQLiteValue(now.adding(lease)),
                        SQLiteValue(now), SQLiteValue(now),
                    ])
                return (.claimed, true)
            }
        }
    }

    public func claimDueFollowUps(
        kind: FollowUpRecord.Kind, holder: String, now: Date, lease: Duration, limit: Int
    ) async throws -> [FollowUpRecord.Call] {
        try await executor.run { connection, _ in
            try connection.writeTransaction { () throws -> ([FollowUpRecord.Call], commit: Bool) in
                let rows = try connection.query(
                    """
                    SELECT call_key, transaction_id, environment, attempts FROM apple_call_records
                    WHERE kind = ? AND state = 'pending' AND due_at <= ? ORDER BY due_at LIMIT ?
                    """, [.text(kind.rawValue), SQLiteValue(now), .integer(Int64(max(0, limit)))])
                var calls: [FollowUpRecord.Call] = []
                for row in rows {
                    guard let key = row[0].text, let transactionID = row[1].text, let attempts = row[3].integer else {
                        throw LedgerError(.corrupt, "an apple_call_records row could not be read")
                    }
                    try connection.query(
                        """
                        UPDATE apple_call_records SET holder = ?, due_at = ?, updated_at = ?
                        WHERE kind = ? AND call_key = ?
                        """,
                        [
                            .text(holder), SQLiteValue(now.adding(lease)), SQLiteValue(now), .text(kind.rawValue),
                            .text(key),
                        ])
                    calls.append(
                        FollowUpRecord.Call(
                            kind: kind, key: key, transactionID: transactionID, environment: row[2].text,
                            attempts: Int(attempts)))
                }
                return (calls, !calls.isEmpty)
            }
        }
    }

    public func settleFollowUp(
        kind: FollowUpRecord.Kind, key: String, holder: String, state: FollowUpRecord.State, detail: String?,
        retryAt: Date?, now: Date
    ) async throws {
        try await executor.run { connection, _ in
            try connection.writeTransaction { () throws -> (Void, commit: Bool) in
                try connection.query(
                    """
                    UPDATE apple_call_records
                    SET state = ?, holder = NULL, due_at = ?, attempts = attempts + 1, detail = ?, updated_at = ?
                    WHERE kind = ? AND call_key = ? AND holder = ? AND state = 'pending'
                    """,
                    [
                        .text(state.rawValue), SQLiteValue(retryAt ?? now), detail.map { .text($0) } ?? .null,
                        SQLiteValue(now), .text(kind.rawValue), .text(key), .text(holder),
                    ])
                return ((), true)
            }
        }
    }

    public func followUpRecord(kind: FollowUpRecord.Kind, key: String) async throws -> FollowUpRecord? {
        try await executor.run { connection, _ in
            guard
                let row = try connection.query(
                    "SELECT \(Self.appleCallColumns) FROM apple_call_records WHERE kind = ? AND call_key = ?",
                    [.text(kind.rawValue), .text(key)]
                ).first
            else { return nil }
            guard row.count == 11, let transactionID = row[2].text,
                let state = row[4].text.flatMap(FollowUpRecord.State.init(rawValue:)), let due = row[6].date,
                let attempts = row[7].integer, let created = row[9].date, let updated = row[10].date
            else { throw LedgerError(.corrupt, "an apple_call_records row could not be read") }
            return FollowUpRecord(
                call: FollowUpRecord.Call(
                    kind: kind, key: key, transactionID: transactionID, environment: row[3].text,
                    attempts: Int(attempts)),
                state: state, holder: row[5].text, dueAt: due, detail: row[8].text, createdAt: created,
                updatedAt: updated)
        }
    }

    public func oldestPendingFollowUp(kinds: [FollowUpRecord.Kind]) async throws -> Date? {
        guard !kinds.isEmpty else { return nil }
        let marks = Array(repeating: "?", count: kinds.count).joined(separator: ", ")
        return try await executor.run { connection, _ in
            try connection.query(
                "SELECT MIN(created_at) FROM apple_call_records WHERE state = 'pending' AND kind IN (\(marks))",
                kinds.map { .text($0.rawValue) }
            ).first?.first?.date
        }
    }
}
