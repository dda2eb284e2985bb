import Foundation

@testable import Ledger

/// A test double of a follow-up call record store that changes one operation and hands every other one to the store
/// it wraps, as ``ForwardingLedger`` does for a whole ledger (which is one of these, forwarding to its base).
protocol ForwardingCallRecordStore: FollowUpRecordStore {
    var callRecords: any FollowUpRecordStore { get }
}

extension ForwardingCallRecordStore {
    func claimFollowUp(
        _ call: FollowUpRecord.Call, holder: String, now: Date, lease: Duration
    ) async throws -> FollowUpClaim {
        try await callRecords.claimFollowUp(call, holder: holder, now: now, lease: lease)
    }

    func claimDueFollowUps(
        kind: FollowUpRecord.Kind, holder: String, now: Date, lease: Duration, limit: Int
    ) async throws -> [FollowUpRecord.Call] {
        try await callRecords.claimDueFollowUps(kind: kind, holder: holder, now: now, lease: lease, limit: limit)
    }

    func settleFollowUp(
        kind: FollowUpRecord.Kind, key: String, holder: String, state: FollowUpRecord.State, detail: String?,
        retryAt: Date?, now: Date
    ) async throws {
        try await callRecords.settleFollowUp(
            kind: kind, key: key, holder: holder, state: state, detail: detail, retryAt: retryAt, now: now)
    }

    func followUpRecord(kind: FollowUpRecord.Kind, key: String) async throws -> FollowUpRecord? {
        try await callRecords.followUpRecord(kind: kind, key: key)
    }

    func oldestPendingFollowUp(kinds: [FollowUpRecord.Kind]) async throws -> Date? {
        try await callRecords.oldestPendingFollowUp(kinds: kinds)
    }
}
