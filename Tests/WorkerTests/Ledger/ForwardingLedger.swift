import Foundation

@testable import Decision
@testable import Ledger

/// A test double of a ledger that changes one or two operations and hands every other one to the real ledger it
/// wraps: a conforming type implements only what it changes (its own implementation wins over these).
protocol ForwardingLedger: Ledger, ForwardingCallRecordStore {
    var base: any Ledger { get }
}

extension ForwardingLedger {
    var callRecords: any FollowUpRecordStore { base }

    func run() async throws { try await base.run() }
    func migrate() async throws { try await base.migrate() }
    func schemaVersions() async throws -> [Int] { try await base.schemaVersions() }

    func snapshot(
        jobID: String, transactionIDs: [String], originalTransactionIDs: [String]
    ) async throws
        -> LedgerSnapshot
    {
        try await base.snapshot(
            jobID: jobID, transactionIDs: transactionIDs, originalTransactionIDs: originalTransactionIDs)
    }

    func apply(_ decision: LedgerDecision) async throws -> ApplyResult { try await base.apply(decision) }
    func perform(_ writes: [LedgerWrite]) async throws -> Bool { try await base.perform(writes) }
    func claims(ownedBy accountID: String) async throws -> [TransactionClaim] {
        try await base.claims(ownedBy: accountID)
    }

    // MARK: Verification leases

    func acquireVerificationLease(
        key: String, holder: String, now: Date, duration: Duration
    ) async throws -> VerificationLeaseState {
        try await base.acquireVerificationLease(key: key, holder: holder, now: now, duration: duration)
    }

    func recordVerificationAnswer(
        key: String, holder: String, evidence: PurchaseEvidence, now: Date, keepFor: Duration
    ) async throws {
        try await base.recordVerificationAnswer(
            key: key, holder: holder, evidence: evidence, now: now, keepFor: keepFor)
    }

    func releaseVerificationLease(key: String, holder: String) async throws {
        try await base.releaseVerificationLease(key: key, holder: holder)
    }

    func removeExpiredVerificationLeases(before now: Date) async throws -> Int {
        try await base.removeExpiredVerificationLeases(before: now)
    }

    // MARK: The reconciler's state

    func acquireReconcilerLease(
        name: String, holder: String, now: Date, duration: Duration
    ) async throws -> ReconcilerLease? {
        try await base.acquireReconcilerLease(name: name, holder: holder, now: now, duration: duration)
    }

    func advanceReconcilerCheckpoint(
        name: String, holder: String, checkpoint: Date, now: Date
    ) async throws -> Bool {
        try await base.advanceReconcilerCheckpoint(name: name, holder: holder, checkpoint: checkpoint, now: now)
    }

    func releaseReconcilerLease(name: String, holder: String, now: Date) async throws {
        try await base.releaseReconcilerLease(name: name, holder: holder, now: now)
    }

    // MARK: Google Play purchase records

    func pendingPlayPurchase(purchaseToken: String) async throws -> PendingPlayPurchase? {
        try await base.pendingPlayPurchase(purchaseToken: purchaseToken)
    }

    func playRefundReview(pendingRefundToken: String) async throws -> PlayRefundReview? {
        try await base.playRefundReview(pendingRefundToken: pendingRefundToken)
    }

    func playRefundReviews(deadlineAfter: Date, limit: Int) async throws -> [PlayRefundReview] {
        try await base.playRefundReviews(deadlineAfter: deadlineAfter, limit: limit)
    }

    // MARK: Subscription re-reads

    func unsureSubscriptions(
        bundleID: String?, now: Date, lapsedSince: Date, rereadBefore: Date, limit: Int
    ) async throws -> [UnsureSubscription] {
        try await base.unsureSubscriptions(
            bundleID: bundleID, now: now, lapsedSince: lapsedSince, rereadBefore: rereadBefore, limit: limit)
    }

    func recordSubscriptionReread(originalTransactionID: String, revision: String?, at: Date) async throws {
        try await base.recordSubscriptionReread(
            originalTransactionID: originalTransactionID, revision: revision, at: at)
    }

    func unsurePlaySubscriptions(
        packages: [String], from: Date, to: Date, rereadBefore: Date, limit: Int
    ) async throws -> [UnsurePlaySubscription] {
        try await base.unsurePlaySubscriptions(
            packages: packages, from: from, to: to, rereadBefore: rereadBefore, limit: limit)
    }
}
