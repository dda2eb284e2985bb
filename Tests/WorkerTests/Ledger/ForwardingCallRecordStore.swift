import Foundation

@testable import Ledger

/// A test double of a follow-up call record store that changes one operation and hands every other one to the store
/// it wraps, as ``ForwardingLedger`` does for a whole ledger (which is one of these, forwarding to its base).
protocol ForwardingCallRecordStore: AppleCallRecordStore {
    var callRecords: any AppleCallRecordStore { get }
}

extension ForwardingCallRecordStore {
    func claimAppleCall(
        _ call: AppleCallRecord.Call, holder: String, now: Date, lease: Duration
    ) async throws -> AppleCallClaim {
        try await callRecords.claimAppleCall(call, holder: holder, now: now, lease: lease)
    }

    func claimDueAppleCalls(
        kind: AppleCallRecord.Kind, holder: String, now: Date, lease: Duration, limit: Int
    ) async throws -> [AppleCallRecord.Call] {
        try await callRecords.claimDueAppleCalls(kind: kind, holder: holder, now: now, lease: lease, limit: limit)
    }

    func settleAppleCall(
        kind: AppleCallRecord.Kind, key: String, holder: String, state: AppleCallRecord.State, detail: String?,
        retryAt: Date?, now: Date
    ) async throws {
        try await callRecords.settleAppleCall(
            kind: kind, key: key, holder: holder, state: state, detail: detail, retryAt: retryAt, now: now)
    }

    func appleCallRecord(kind: AppleCallRecord.Kind, key: String) async throws -> AppleCallRecord? {
        try await callRecords.appleCallRecord(kind: kind, key: key)
    }
}
