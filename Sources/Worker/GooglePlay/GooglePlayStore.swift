import Decision
import Foundation
import GooglePlay
import Messages

/// Google Play behind the store boundary (``PurchaseStore``): a purchase is read locally by ``PlayPurchaseReader``
/// (the token's shape; the signed purchase data's signature against the app's licensing key and what it names), so
/// a forgery, another app's purchase or a malformed token is decided without a call to Google.
///
/// Asking Google (the Developer API) is not part of this store yet: a purchase the local checks let through has no
/// one to ask, so ``verify(_:local:deadline:)`` reports the store unavailable, and `run` refuses a catalog that names
/// Play apps (``WorkerRuntime``) until it is. Without Play apps every Play purchase is another app's (`wrong_bundle`).
public struct GooglePlayStore: PurchaseStore {
    public let reader: PlayPurchaseReader

    public init(reader: PlayPurchaseReader = PlayPurchaseReader(licensingKeys: [:])) {
        self.reader = reader
    }

    public func readProof(_ job: ReceiptJob) -> ProofReading {
        guard case .googlePlay(let purchase) = job.proof else {
            return ProofReading(facts: Self.anotherStoresProof)
        }
        return ProofReading(facts: reader.facts(of: purchase))
    }

    /// The facts of a proof of another store (an App Store proof): unreadable as a Google Play purchase.
    static let anotherStoresProof = ProofFacts(
        kind: .unreadable(reason: "an App Store proof is not a Google Play purchase"),
        signature: .notChecked(reason: "another store's proof"), store: .googlePlay)

    public func verify(
        _ job: ReceiptJob, local: LocalEvidence, deadline: ContinuousClock.Instant
    ) async throws -> PurchaseEvidence {
        local.unavailable
    }

    /// Google Play names apps by package name only.
    public func appIdentifier(for bundleID: String?) -> Int64? { nil }

    public var stageLimit: Int { 1 }
}
