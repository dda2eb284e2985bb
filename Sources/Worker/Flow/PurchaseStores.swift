import Decision
import Foundation
import Messages

/// The stores a worker runs, behind the one boundary the job flow sees: each job goes to the store its proof comes
/// from (``ReceiptJob/Proof/store``). The flow learns no store's name; a store added is one more case here and a
/// sibling folder beside `AppStore/`.
public struct PurchaseStores: PurchaseStore {
    /// The App Store (`AppStore/`).
    public let appStore: any PurchaseStore
    /// Google Play (`GooglePlay/`).
    public let googlePlay: any PurchaseStore

    public init(appStore: any PurchaseStore, googlePlay: any PurchaseStore) {
        self.appStore = appStore
        self.googlePlay = googlePlay
    }

    /// The store of `job`'s proof.
    public func store(of job: ReceiptJob) -> any PurchaseStore {
        switch job.proof.store {
        case .appStore: appStore
        case .googlePlay: googlePlay
        }
    }

    public func readProof(_ job: ReceiptJob) -> ProofReading {
        store(of: job).readProof(job)
    }

    public func verify(
        _ job: ReceiptJob, local: LocalEvidence, deadline: ContinuousClock.Instant
    ) async throws -> PurchaseEvidence {
        try await store(of: job).verify(job, local: local, deadline: deadline)
    }

    /// The App Store's: only its notifications name an app by a numeric store id.
    public func appIdentifier(for bundleID: String?) -> Int64? {
        appStore.appIdentifier(for: bundleID)
    }

    /// Every store's runners together: one stage holds the jobs waiting for any store.
    public var stageLimit: Int { appStore.stageLimit + googlePlay.stageLimit }
}
