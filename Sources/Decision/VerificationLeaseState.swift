import Foundation

/// What a worker finds when it asks for the verification lease of a proof (docs/LEDGER.md, "Verification leases").
public enum VerificationLeaseState: Sendable, Hashable {
    /// The caller holds the lease until `expiresAt`: it asks Apple, then records the answer or releases the lease.
    case acquired(expiresAt: Date)
    /// Another worker holds it until `expiresAt` and is asking Apple: wait, then ask again.
    case held(by: String, until: Date)
    /// Apple answered a holder lately: its evidence, to be settled with the caller's own job.
    case answered(PurchaseEvidence)
}
