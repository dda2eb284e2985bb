import Foundation
import Messages

/// The one way into the decision rules for a job: it builds their input (the policy, the snapshot), calls
/// ``DecisionRules`` and says what each round of the ledger's read-decide-write loop ends with. The job processor's
/// ledger-free rejections and that loop (`Ledger.settle`, the I/O around these functions) both go through it, so
/// the rules see the same policy however a job reaches them.
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

    /// What one round decided from a fresh snapshot.
    public enum Round: Sendable, Hashable {
        /// Settled without writing.
        case settled(Outcome)
        /// Apply this decision, then read ``outcome(of:job:)``.
        case apply(LedgerDecision)
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

    /// One round of the loop on a fresh snapshot: the outcome when nothing is to be written (Apple is needed, or the
    /// verdict was recorded before), else the decision to apply.
    ///
    /// - Parameter recordedAt: the job record's timestamp (``DecisionInput/recordedAt``).
    public static func round(
        job: ReceiptJob, evidence: PurchaseEvidence, snapshot: LedgerSnapshot, policy: DecisionPolicy,
        recordedAt: Date? = nil
    ) -> Round {
        switch decide(job: job, evidence: evidence, snapshot: snapshot, policy: policy, recordedAt: recordedAt) {
        case .needsApple: .settled(.needsApple)
        case .decided(let decision) where decision.isRecorded: .settled(.verdict(decision.verdict))
        case .decided(let decision): .apply(decision)
        }
    }

    /// What applying a round's decision settled: the verdict, or nil when the round lost a race and the loop reads
    /// again. Lost to another delivery of this job (the next snapshot holds its verdict), or to another job with the
    /// same id and another content (the rules then answer `job_id_reused`).
    public static func outcome(of result: ApplyResult, job: ReceiptJob) -> Outcome? {
        switch result {
        case .applied(let verdict): .verdict(verdict)
        case .alreadyDecided(let verdict) where verdict.isVerdict(of: job): .verdict(verdict)
        case .alreadyDecided, .raceLost: nil
        }
    }
}
