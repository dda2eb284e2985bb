import CodedErrors
import Decision
import Foundation

/// Short leases that let one worker of the cluster ask Apple about a proof (a receipt's digest, a transaction id)
/// while the others wait for its answer, so a replay storm costs one Apple call per receipt instead of one per job.
///
/// A lease only saves calls; correctness never depends on it: the claim in `transaction_claims` still decides who
/// gets a transaction. So every operation may fail (``LedgerError``) and the caller then asks Apple itself.
/// Times are the callers' wall clocks (`now`), compared across workers: clock skew between workers lengthens or
/// shortens a lease by the skew, which is why leases are seconds long and waiters cap their wait.
/// Every ``Ledger`` has it (table `verification_leases`, schema version 2).
public protocol VerificationLeaseStore: Sendable {
    /// Takes the lease of `key` for `holder` until `now + duration` when nobody holds it, when it expired (a holder
    /// that crashed or gave up), or when `holder` holds it already without an answer (the same worker taking over
    /// from one of its own jobs that was cancelled). Otherwise reports the live holder, or Apple's recorded answer.
    /// Atomic: of many workers asking at once, one acquires.
    func acquireVerificationLease(
        key: String, holder: String, now: Date, duration: Duration
    ) async throws
        -> VerificationLeaseState

    /// Records Apple's answer under `key` until `now + keepFor` for the workers waiting, unless another holder
    /// recorded one first. The answer is the evidence, never the receipt.
    func recordVerificationAnswer(
        key: String, holder: String, evidence: PurchaseEvidence, now: Date, keepFor: Duration
    ) async throws

    /// Gives the lease up without an answer (Apple unavailable, the job cancelled), so others need not wait for
    /// its expiry. Does nothing when `holder` does not hold it.
    func releaseVerificationLease(key: String, holder: String) async throws

    /// Deletes leases and answers that expired before `now`; returns how many. Workers call it now and then, so
    /// the table holds only the last few seconds' receipts.
    func removeExpiredVerificationLeases(before now: Date) async throws -> Int
}

extension Duration {
    /// Whole milliseconds (for lease expiry arithmetic).
    var leaseMilliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }
}

extension Date {
    /// This instant moved by `duration`.
    func adding(_ duration: Duration) -> Date {
        addingTimeInterval(Double(duration.leaseMilliseconds) / 1000)
    }
}
