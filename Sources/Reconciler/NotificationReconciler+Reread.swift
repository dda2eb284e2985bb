import AppleClients
import Decision
import Foundation
import Ledger
import Logging
import Messages
import Metrics
import Observability

/// Where the reconciler reads one subscription's transaction history: ``AppStoreServerAPIClient`` in production
/// (Get Transaction History v2, every JWS verified before it is returned), a fake in tests. One call is one request.
public protocol TransactionHistorySource: Sendable {
    func transactionHistory(
        transactionID: String, revision: String?, environment: AppleEnvironment?
    ) async throws -> AppleOutcome<TransactionHistoryPage>
}

extension AppStoreServerAPIClient: TransactionHistorySource {}

extension NotificationReconciler {
    /// How a pass of re-reads ended.
    public enum RereadResult: Sendable, Hashable {
        /// Every listed subscription re-read (or refused by Apple, logged); `corrections` jobs published.
        case completed(subscriptions: Int, corrections: Int)
        /// Nothing to do: re-reads are not configured, or another replica holds the lease.
        case skipped
        /// Stopped early (Apple failing for good, Kafka, the ledger, the lease): the rest waits for the next pass.
        case stopped(String)
    }

    /// Re-reads the transaction history of the subscriptions the ledger is unsure of: a period
    /// ended without a renewal, a refund or auto-renew off, so Apple is retrying the charge (billing retry, grace
    /// period) or renewed it in a notification that never arrived; or a recent refund, which Apple may reverse. Each
    /// is read at most once per ``ReconcilerConfiguration/rereadInterval``, never-read first, on the sweep's lease and
    /// rate budget. Only this reconciler's app's subscriptions (``ReconcilerConfiguration/app``; every App Store
    /// subscription when it names none), read with its Server API key; never a Google Play one.
    ///
    /// A difference is published as a `transaction_id` job for the subscription's owner, which the workers decide
    /// by the same rules as any purchase, from Apple's Get Transaction Info: a renewal the ledger lacks is claimed, a
    /// refund revokes, a later expiry extends, and nothing moves a date backwards. A refund Apple reversed is a
    /// reversal correction (``CorrectionJob/reversalJobID(transactionID:expiresDate:reversedRevocation:)``), which the
    /// workers decide as a `REFUND_REVERSED`: the claim is restored for its owner. Not the signed transaction itself:
    /// Apple signs it anew on every answer, so a re-read of the same state would be another content under the same
    /// `job_id` (a `job_id_reused` rejection); a transaction id and a `job_id` derived from the transaction's state
    /// make a repeated re-read the same job, decided once.
    public func rereadUnsure() async -> RereadResult {
        guard let rereadStore, let historySource else { return .skipped }
        let now = wallNow
        let candidates: [UnsureSubscription]
        var leaseEnd: Date
        do {
            guard
                let lease = try await store.acquireReconcilerLease(
                    name: configuration.name, holder: holder, now: now, duration: configuration.leaseDuration)
            else {
                metrics.leaseHeld.record(0)
                return .skipped
            }
            leaseEnd = lease.expiresAt
            candidates = try await rereadStore.unsureSubscriptions(
                bundleID: configuration.app, now: now,
                lapsedSince: now.addingTimeInterval(-configuration.rereadWindow.secondsValue),
                rereadBefore: now.addingTimeInterval(-configuration.rereadInterval.secondsValue),
                limit: configuration.rereadBatch)
        } catch {
            return .stopped("ledger: \(error)")
        }
        var corrections = 0
        for candidate in candidates {
            do {
                let claims = try await rereadStore.subscriptionClaims(
                    originalTransactionID: candidate.originalTransactionID)
                guard let owner = Self.owner(of: claims) else { continue }
                let read = try await readHistory(
                    candidate, bundleID: candidate.bundleID ?? claims.compactMap(\.bundleID).first,
                    source: historySource,
                    leaseEnd: &leaseEnd)
                let revision: String?
                switch read {
                case .lost:
                    metrics.leaseHeld.record(0)
                    return .stopped("the lease was lost")
                case .giveUp(let why):
                    metrics.rereads("failed").increment()
                    return .stopped(why)
                case .refused(let why):
                    // Logged without the answer: it may hold a customer's transactions.
                    metrics.rereads("rejected").increment()
                    logger.warning(
                        "reconcile: Apple's transaction history was not usable; no correction",
                        metadata: [
                            LogKeys.reconcileSubscription: "\(candidate.originalTransactionID)",
                            LogKeys.error: "\(why)",
                        ])
                    revision = nil
                case .read(let transactions, let readRevision):
                    let jobs = Self.corrections(
                        transactions, of: candidate.originalTransactionID, claims: claims, owner: owner,
                        submittedAt: wallNow)
                    for job in jobs {
                        try await sink.publish(job)
                        metrics.corrections.increment()
                    }
                    corrections += jobs.count
                    metrics.rereads("read").increment()
                    if !jobs.isEmpty {
                        logger.info(
                            "reconcile: corrections published after a re-read",
                            metadata: [
                                LogKeys.reconcileSubscription: "\(candidate.originalTransactionID)",
                                LogKeys.reconcileCorrections: "\(jobs.count)",
                            ])
                    }
                    revision = readRevision
                }
                // Recorded only once every correction is published: a crash before reads the same again, and the
                // same state gives the same job ids. A refused history is recorded too, without a revision.
                try await rereadStore.recordSubscriptionReread(
                    originalTransactionID: candidate.originalTransactionID, revision: revision, at: wallNow)
            } catch is CancellationError {
                return .stopped("cancelled")
            } catch {
                return .stopped("\(error)")
            }
        }
        return .completed(subscriptions: candidates.count, corrections: corrections)
    }

    enum HistoryRead {
        case read([SignedTransaction], revision: String?)
        /// Apple's answer cannot be used (bad signature, another bundle, malformed): this subscription only.
        case refused(String)
        /// Apple failing again and again: the pass stops.
        case giveUp(String)
        case lost
    }

    /// Every page of one subscription's history after the stored revision, paced and retried like the sweep's.
    func readHistory(
        _ candidate: UnsureSubscription, bundleID: String?, source: any TransactionHistorySource,
        leaseEnd: inout Date
    ) async throws -> HistoryRead {
        var revision = candidate.revision
        var transactions: [SignedTransaction] = []
        var failures = 0
        var pages = 0
        let environment = candidate.environment.flatMap(AppleEnvironment.init(appleName:))
        while pages < max(configuration.rereadPages, 1) {
            try await pace()
            if leaseEnd.timeIntervalSince(wallNow) < configuration.leaseDuration.secondsValue / 2 {
                guard
                    let renewed = try await store.acquireReconcilerLease(
                        name: configuration.name, holder: holder, now: wallNow, duration: configuration.leaseDuration)
                else { return .lost }
                leaseEnd = renewed.expiresAt
            }
            let outcome = try await source.transactionHistory(
                transactionID: candidate.originalTransactionID, revision: revision, environment: environment)
            switch outcome {
            case .answered(let page):
                failures = 0
                pages += 1
                if let bundleID {
                    let named = [page.bundleID] + page.transactions.map(\.bundleID)
                    if named.contains(where: { $0 != nil && $0 != bundleID }) {
                        return .refused("the answer names another bundle than the subscription's \(bundleID)")
                    }
                }
                transactions += page.transactions
                let next = page.revision.flatMap { $0.isEmpty ? nil : $0 }
                let moved = next != nil && next != revision
                if let next { revision = next }
                guard page.hasMore, moved else { return .read(transactions, revision: revision) }
            case .retryable(let advice):
                failures += 1
                guard failures <= Self.retriesPerPage else {
                    return .giveUp("Apple: \(advice) \(failures) times in a row")
                }
                let wait = advice.retryAfter ?? configuration.backoff * (1 << min(failures - 1, 6))
                try await clock.sleep(until: clock.now.advanced(by: wait), tolerance: nil)
            case .failed(let error):
                return .refused("Apple: \(error)")
            }
        }
        // The page limit: what was read is used; the stored revision makes the next re-read go on from there.
        return .read(transactions, revision: revision)
    }

    /// The jobs that bring the ledger to what Apple's history states: one for each transaction of the subscription
    /// whose statement the rules would write (``TransactionCorrection``: a transaction the ledger lacks and Apple did
    /// not revoke, a revocation, a later expiry, a refund reversed). What the rules would not write (an earlier
    /// expiry) is no job.
    static func corrections(
        _ transactions: [SignedTransaction], of originalTransactionID: String, claims: [TransactionClaim],
        owner: String, submittedAt: Date
    ) -> [ReceiptJob] {
        var jobs: [ReceiptJob] = []
        var seen = Set<String>()
        for transaction in transactions {
            guard (transaction.originalTransactionID ?? transaction.transactionID) == originalTransactionID,
                seen.insert(transaction.transactionID).inserted
            else { continue }
            let claim = claims.first { $0.transactionID == transaction.transactionID }
            let correction = TransactionCorrection(stated: transaction.purchase, claim: claim)
            guard !correction.isEmpty else { continue }
            let jobID =
                correction.reversedRevocation == nil
                ? correctionJobID(transaction)
                : CorrectionJob.reversalJobID(
                    transactionID: transaction.transactionID, expiresDate: transaction.expiresDate,
                    reversedRevocation: correction.reversedRevocation)
            jobs.append(
                ReceiptJob(
                    jobID: jobID, accountID: owner,
                    proof: .transactionID(transaction.transactionID),
                    bundleID: claim?.bundleID ?? claims.compactMap(\.bundleID).first, submittedAt: submittedAt))
        }
        return jobs
    }

    /// ``CorrectionJob/jobID(transactionID:expiresDate:revocationDate:)``: one job per state of a transaction.
    static func correctionJobID(_ transaction: SignedTransaction) -> String {
        CorrectionJob.jobID(
            transactionID: transaction.transactionID, expiresDate: transaction.expiresDate,
            revocationDate: transaction.revocationDate)
    }

    /// The owner as the workers' rules see it: the account holding the claim with the latest entitlement.
    static func owner(of claims: [TransactionClaim]) -> String? {
        claims.max { lhs, rhs in
            (lhs.entitlementEnd ?? .distantFuture, lhs.transactionID) < (
                rhs.entitlementEnd ?? .distantFuture, rhs.transactionID
            )
        }?.accountID
    }
}
