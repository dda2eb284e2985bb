import Foundation

/// What the reconciler (`verify-worker reconcile`) keeps in the ledger: a lease, so that of any number of replicas
/// one sweeps at a time, and the checkpoint of its sweeps, so that a replica taking over goes on where the last one
/// stopped. One row per name (`notification-history` today), table `reconciler_state` (docs/LEDGER.md).
public struct ReconcilerLease: Sendable, Hashable {
    /// Until when the holder may sweep without renewing.
    public var expiresAt: Date
    /// The end of the last sweep that finished; nil before the first.
    public var checkpoint: Date?
}

/// The reconciler's lease and checkpoint. Times are the replicas' wall clocks; a lease is tens of seconds long, so a
/// clock skew of a second between replicas matters little. Every ``Ledger`` has it.
public protocol ReconcilerStateStore: Sendable {
    /// Takes the lease `name` for `holder` until `now + duration` when nobody holds it, when it expired, or when
    /// `holder` holds it already (a renewal). Returns nil while another holder's lease is live. Atomic: of many
    /// replicas asking at once, one gets it.
    func acquireReconcilerLease(
        name: String, holder: String, now: Date, duration: Duration
    ) async throws -> ReconcilerLease?

    /// Moves the checkpoint of `name` to `checkpoint`, never backwards, only while `holder` holds a live lease (a
    /// replica that lost its lease mid-sweep cannot move it). Returns whether it held the lease.
    func advanceReconcilerCheckpoint(
        name: String, holder: String, checkpoint: Date, now: Date
    ) async throws -> Bool

    /// Ends `holder`'s lease at once (a replica shutting down), keeping the checkpoint. Does nothing when `holder`
    /// does not hold it.
    func releaseReconcilerLease(name: String, holder: String, now: Date) async throws
}
