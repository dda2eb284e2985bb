import Decision
import Foundation
import Messages
import RateLimiter

/// What the job flow needs from a store: read a proof locally, and verify with the store what the proof and the
/// ledger did not decide. A store reports facts (``PurchaseEvidence``) and never decides: the flow hands them to
/// the decision rules (``LedgerSettlement``), which alone read the catalog and the sandbox policy.
///
/// A store's other duties sit beside the flow, each in the store's own folder: follow-ups after a durable grant
/// (the App Store's ``AppleFollowUps``, told of each delivered verdict), decoding its notifications (the App Store's
/// are read as a proof, `notification`, by ``readProof(_:)``) and reconciling what the store knows with the ledger
/// (the Reconciler's history source). docs/STORES.md lists what a store provides and where the App Store does it.
public protocol PurchaseStore: Sendable {
    /// What the job's proof establishes without I/O: the facts its bytes show (format, signature, bundle, products,
    /// transactions, environment), never judged here. Synchronous: nothing here waits, and its locals die with the
    /// call.
    func readProof(_ job: ReceiptJob) -> ProofReading

    /// Asks the store about a job its proof and the ledger did not decide, the first attempt bounded by `deadline`.
    /// Returns the store's facts, or `local.unavailable` when the store could not answer in time. While the store
    /// refuses this worker's own configuration (a wrong secret or key), the job waits undecided and is asked again
    /// once the setting is accepted. Throws only `CancellationError`.
    func verify(
        _ job: ReceiptJob, local: LocalEvidence, deadline: ContinuousClock.Instant
    ) async throws -> PurchaseEvidence

    /// The store's id of the app `bundleID` names, which the app's production notifications must carry; nil checks
    /// nothing.
    func appIdentifier(for bundleID: String?) -> Int64?

    /// How many jobs at a time a worker lets take the store step (waiting for a permit, calling, settling and
    /// delivering).
    var stageLimit: Int { get }
}

/// What a store read from a job's proof locally: its facts (nil: the proof has nothing to read locally, such as a bare
/// transaction id) and the environment it names.
public struct ProofReading: Sendable {
    public var facts: ProofFacts?
    public var environment: AppleEnvironment?

    public init(facts: ProofFacts?, environment: AppleEnvironment? = nil) {
        self.facts = facts
        self.environment = environment
    }
}

extension AppleCallGate {
    /// How many jobs a worker lets take the store step of a store called through this gate: twice the gate's maximum
    /// concurrency (the calls the store may take at once, and as many jobs again waiting for a permit, in the ledger
    /// or in Kafka around their calls, so the gate never lacks a caller), at least 256. Not fewer: a job whose
    /// deadline passed while it was parked still takes a runner for its ledger write and its verdict's delivery, and
    /// with a low maximum (4 in `bench pipeline` part e) a few runners would end thousands of such jobs a few at a
    /// time; 256 waiting runners cost about 3 MB.
    public var storeStageLimit: Int { max(256, 2 * configuration.concurrency.maximum) }
}
