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
    /// A proof as a key: its bytes, hashed once as a whole and before the lock is taken. (An array's own hashing
    /// feeds the hasher one byte at a time: about 7 % of the worker's CPU on locally decided traffic in `bench
    /// pipeline` (b), much of it inside the lock.) Equality still compares every byte.
    struct Key: Hashable, Sendable {
        let bytes: [UInt8]
        let digest: Int

        init(_ bytes: [UInt8]) {
            self.bytes = bytes
            var hasher = Hasher()
            bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
            digest = hasher.finalize()
        }

        func hash(into hasher: inout Hasher) { hasher.combine(digest) }

        static func == (lhs: Key, rhs: Key) -> Bool { lhs.digest == rhs.digest && lhs.bytes == rhs.bytes }
    }

    private struct State {
        var entries: [Key: PurchaseEvidence] = [:]
        var order: [Key] = []
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

    /// The key of a proof, or nil for one too large to keep.
    func key(for proof: [UInt8]) -> Key? {
        proof.count <= maximumProofBytes ? Key(proof) : nil
    }

    func evidence(for proof: [UInt8]) -> PurchaseEvidence? {
        key(for: proof).flatMap { evidence(for: $0) }
    }

    func evidence(for key: Key) -> PurchaseEvidence? {
        state.withLock { $0.entries[key] }
    }

    func insert(_ evidence: PurchaseEvidence, for proof: [UInt8]) {
        if let key = key(for: proof) { insert(evidence, for: key) }
    }

    func insert(_ evidence: PurchaseEvidence, for proof: Key) {
        state.withLock { state in
            guard state.entries.updateValue(evidence, forKey: proof) == nil else { return }
            state.order.append(proof)
            state.bytes += proof.bytes.count
            while state.bytes > byteBudget, state.head < state.order.count {
                let oldest = state.order[state.head]
                state.head += 1
                state.entries[oldest] = nil
                state.bytes -= oldest.bytes.count
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
