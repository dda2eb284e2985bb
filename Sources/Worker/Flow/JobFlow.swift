import Decision
import Foundation
import Messages
import Receipts

/// How far a job got, as data: the job flow's one value. ``JobStepping/advance(_:)`` moves it one step:
///
/// ```
/// readProof ──▶ consultLedger ──▶ askStore ──▶ decided
///     │               │                          ▲
///     └───────────────┴──────────────────────────┘  (a step that decides goes straight to decided)
/// ```
///
/// Between steps a worker parks the value in the stage of the step it waits for (``JobStage``), so thousands of jobs
/// waiting for the ledger or the store are values in a queue, not suspended tasks. ``JobStepping/decide(_:recordedAt:)``
/// runs the same steps one after the other without parking: there is no other way to process a job.
public enum JobFlow: Sendable {
    /// Consumed and decoded: the proof alone may decide it (most traffic is junk, decided here).
    case readProof(ReceiptJob, recordedAt: Date?)
    /// The proof does not decide; the ledger is consulted (``LedgerBoundJob``).
    case consultLedger(LedgerBoundJob)
    /// Neither the proof nor the ledger decides; the store is asked (``StoreBoundJob``).
    case askStore(StoreBoundJob)
    /// Decided: its verdict.
    case decided(JobProcessor.Decided)
}

/// Advances jobs through the flow. ``JobProcessor`` is the worker's; tests give simpler ones.
public protocol JobStepping: Sendable {
    /// Moves `flow` one step on. Throws `CancellationError` when cancelled, ``LedgerRefusedJob`` when the ledger
    /// refuses the job's values for good, and ``WorkerFatalError`` when the worker must stop. Given a decided flow,
    /// returns it.
    func advance(_ flow: JobFlow) async throws -> JobFlow
    /// How many jobs at a time a worker lets take the ledger step (the step, and the delivery of a verdict it gave).
    var ledgerStageLimit: Int { get }
    /// How many jobs at a time a worker lets take the store step (waiting for a permit, calling, settling,
    /// delivering): at least the most store calls that may run at once.
    var storeStageLimit: Int { get }
}

extension JobStepping {
    /// Decides `job`: every step of ``advance(_:)`` in turn, without parking between them.
    ///
    /// - Parameter recordedAt: the job record's Kafka timestamp; rejections decided from the proof alone take it as
    ///   their `decided_at`, so a redelivery repeats the verdict exactly without the ledger.
    public func decide(_ job: ReceiptJob, recordedAt: Date? = nil) async throws -> JobProcessor.Decided {
        var flow = JobFlow.readProof(job, recordedAt: recordedAt)
        while true {
            if case .decided(let decided) = flow { return decided }
            flow = try await advance(flow)
        }
    }

    public var ledgerStageLimit: Int { 256 }

    public var storeStageLimit: Int { 64 }
}

/// A job that needs the ledger, as data: the job and what its proof says, not the proof's bytes twice.
public struct LedgerBoundJob: Sendable {
    public internal(set) var job: ReceiptJob
    let local: LocalEvidence
    let recordedAt: Date?

    init(job: ReceiptJob, local: LocalEvidence, recordedAt: Date?) {
        self.job = job
        self.local = local
        self.recordedAt = recordedAt
    }
}

/// A job that needs the store, as data: what deciding it needs after the wait, and no more (not the proof's bytes
/// twice, nor the analysis).
public struct StoreBoundJob: Sendable {
    public internal(set) var job: ReceiptJob
    let local: LocalEvidence
    let recordedAt: Date?
    /// The deadline of its first attempt at the store.
    let deadline: ContinuousClock.Instant

    init(job: ReceiptJob, local: LocalEvidence, recordedAt: Date?, deadline: ContinuousClock.Instant) {
        self.job = job
        self.local = local
        self.recordedAt = recordedAt
        self.deadline = deadline
    }
}

/// What a store read from a job's proof without asking anyone: a job that waits for the ledger or the store
/// (thousands may) keeps its job and this, not a copy of the proof's bytes nor the whole analysis.
public struct LocalEvidence: Sendable {
    /// The facts as evidence; its `bundleID` picks the app whose credentials the store is asked with.
    public var evidence: PurchaseEvidence
    /// The environment the proof names (the App Store asks that environment's endpoint first).
    public var environment: AppleEnvironment?

    public init(evidence: PurchaseEvidence, environment: AppleEnvironment? = nil) {
        self.evidence = evidence
        self.environment = environment
    }

    /// The local evidence marked as the store unavailable: what the rules decide on when the store cannot answer.
    public var unavailable: PurchaseEvidence {
        var unavailable = evidence
        unavailable.appleUnavailable = true
        return unavailable
    }
}
