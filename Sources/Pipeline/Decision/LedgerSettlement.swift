import Decision
import Foundation
import Ledger
import Messages

/// The one place the pipeline enters the decision rules: it builds their input (the policy, the snapshot) and
/// calls ``DecisionRules``. ``JobProcessor``'s ledger-free rejections and its read-decide-write loop both go through
/// it, so the rules see the same policy however a job reaches them.
///
/// The read-decide-write loop: decide from a snapshot, apply, and when the apply lost a race, read again and
/// decide again with the same evidence (no second Apple call).
public enum LedgerSettlement {
    /// What settling a job ended with.
    public enum Outcome: Sendable, Hashable {
        /// The verdict to publish (first decided now, or recorded before for this job).
        case verdict(Verdict)
        /// The evidence is not authenticated and the ledger cannot decide: ask Apple, then settle again.
        case needsApple
    }

    /// The rules' settings for a decision at `now`; without a catalog (`bench ledger`) the rules check no product.
    public static func policy(
        catalog: Catalog?, allowSandbox: Bool, now: Date, appAppleID: Int64? = nil
    ) -> DecisionPolicy {
        DecisionPolicy(allowSandbox: allowSandbox, now: now, catalog: catalog, appAppleID: appAppleID)
    }

    /// Runs the rules once on `snapshot` (an empty one for a decision that needs no ledger).
    public static func decide(
        job: ReceiptJob, evidence: PurchaseEvidence, snapshot: LedgerSnapshot = LedgerSnapshot(),
        policy: DecisionPolicy, recordedAt: Date? = nil
    ) -> DecisionResult {
        DecisionRules.decide(
            DecisionInput(job: job, evidence: evidence, snapshot: snapshot, policy: policy, recordedAt: recordedAt))
    }

    /// Decides and records a job. Throws ``LedgerError`` (`contention` after `maximumAttempts` lost races).
    ///
    /// - Parameter recordedAt: the job record's timestamp (``DecisionInput/recordedAt``).
    public static func settle(
        job: ReceiptJob, evidence: PurchaseEvidence, policy: DecisionPolicy, ledger: some Ledger,
        recordedAt: Date? = nil, maximumAttempts: Int = 8
    ) async throws -> Outcome {
        for _ in 0..<max(1, maximumAttempts) {
            let snapshot = try await ledger.snapshot(for: job, evidence: evidence)
            switch decide(job: job, evidence: evidence, snapshot: snapshot, policy: policy, recordedAt: recordedAt) {
            case .needsApple:
                return .needsApple
            case .decided(let decision) where decision.isRecorded:
                return .verdict(decision.verdict)
            case .decided(let decision):
                switch try await ledger.apply(decision) {
                case .applied(let verdict): return .verdict(verdict)
                case .alreadyDecided(let verdict) where verdict.isVerdict(of: job): return .verdict(verdict)
                case .alreadyDecided, .raceLost:
                    // Lost a race: to another delivery of this job (the next snapshot holds its verdict), or to
                    // another job with the same id and another content (the rules then answer `job_id_reused`).
                    continue
                }
            }
        }
        throw LedgerError(.contention, "job \(job.jobID): claims lost \(maximumAttempts) races in a row")
    }
}
