import CodedErrors
import Decision
import Foundation
import Messages

extension Ledger {
    /// Decides and records a job: the read-decide-write loop around ``LedgerSettlement``'s rounds, which decide
    /// everything; here only the reads, the writes and their limit. Throws ``LedgerError`` (`contention` after
    /// `maximumAttempts` lost races).
    ///
    /// - Parameter recordedAt: the job record's timestamp (``DecisionInput/recordedAt``).
    public func settle(
        job: ReceiptJob, evidence: PurchaseEvidence, policy: DecisionPolicy, recordedAt: Date? = nil,
        maximumAttempts: Int = 8
    ) async throws -> LedgerSettlement.Outcome {
        for _ in 0..<max(1, maximumAttempts) {
            let snapshot = try await snapshot(for: job, evidence: evidence)
            switch LedgerSettlement.round(
                job: job, evidence: evidence, snapshot: snapshot, policy: policy, recordedAt: recordedAt)
            {
            case .settled(let outcome):
                return outcome
            case .apply(let decision):
                if let outcome = LedgerSettlement.outcome(of: try await apply(decision), job: job) { return outcome }
            }
        }
        throw LedgerError(.contention, "job \(job.jobID): claims lost \(maximumAttempts) races in a row")
    }
}
