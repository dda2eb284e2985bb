import Ledger
import Synchronization

/// The local evidence of proofs recently rejected by their bytes alone (another app's receipt, a bad signature),
/// keyed by the exact proof bytes, so a proof sent again is not parsed and verified again.
///
/// Junk traffic repeats: crackers resend a small pool of other apps' receipts (seed 000), and analyzing one costs
/// far more than hashing and comparing its bytes. Only rejections are kept, and only the evidence, not a verdict:
/// each hit still goes through the decision rules with its own job, and the key is the whole proof (compared byte
/// for byte), so a hit can never turn a different proof into a rejection. Bounded by the bytes it holds; the oldest
/// entries leave first.
final class ProofRejectionCache: Sendable {
    private struct State {
        var entries: [[UInt8]: PurchaseEvidence] = [:]
        var order: [[UInt8]] = []
        var head = 0
        var bytes = 0
    }

    /// The largest proof kept; larger ones are analyzed every time.
    let maximumProofBytes: Int
    /// The most proof bytes held at once.
    let byteBudget: Int
    private let state = Mutex(State())

    init(maximumProofBytes: Int = 64 << 10, byteBudget: Int = 16 << 20) {
        self.maximumProofBytes = maximumProofBytes
        self.byteBudget = byteBudget
    }

    func evidence(for proof: [UInt8]) -> PurchaseEvidence? {
        guard proof.count <= maximumProofBytes else { return nil }
        return state.withLock { $0.entries[proof] }
    }

    func insert(_ evidence: PurchaseEvidence, for proof: [UInt8]) {
        guard proof.count <= maximumProofBytes else { return }
        state.withLock { state in
            guard state.entries.updateValue(evidence, forKey: proof) == nil else { return }
            state.order.append(proof)
            state.bytes += proof.count
            while state.bytes > byteBudget, state.head < state.order.count {
                let oldest = state.order[state.head]
                state.head += 1
                state.entries[oldest] = nil
                state.bytes -= oldest.count
            }
            // Drop the evicted prefix now and then, so `order` does not grow without bound.
            if state.head > 1024, state.head * 2 > state.order.count {
                state.order.removeFirst(state.head)
                state.head = 0
            }
        }
    }

    var count: Int { state.withLock { $0.entries.count } }
}
