import Decision
import Foundation
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
    /// A proof as a key: its length and three samples of its bytes (``sampleBytes`` each at its start, middle and
    /// end), hashed once and before the lock is taken. Hashing a whole 4 KB proof was about 3 % of the worker's CPU
    /// on locally decided traffic in `bench pipeline` (b); two receipts that differ differ in their signatures, at
    /// the end. (An array's own hashing feeds the hasher one byte at a time: about 7 %, much of it inside the lock.)
    /// Equality still compares every byte, with `memcmp`: an array's `==` compared element by element, 6 % of a
    /// worker's CPU in the same run (a hit compares a 4 KB proof). Proofs made to share their samples cannot make
    /// lookups slow: the cache keeps at most ``maximumSharingDigest`` proofs per digest.
    ///
    /// A job's proof is kept as the `String` it was decoded into (its UTF-8 is the proof's bytes, and a native
    /// string's are contiguous), not copied into an array for every lookup.
    struct Key: Hashable, Sendable {
        private enum Storage: Sendable {
            case bytes([UInt8])
            case text(String)
        }

        private let storage: Storage
        let digest: Int
        /// The proof's length in bytes.
        let count: Int

        init(_ bytes: [UInt8]) {
            storage = .bytes(bytes)
            count = bytes.count
            digest = bytes.withUnsafeBytes { Self.digest(of: $0) }
        }

        /// The key of a proof's text: the bytes of its UTF-8.
        init(text: String) {
            var text = text
            // Makes the text native and contiguous once (a decoded proof already is); every comparison then reads
            // its bytes in place.
            let (count, digest) = text.withUTF8 { ($0.count, Self.digest(of: UnsafeRawBufferPointer($0))) }
            storage = .text(text)
            self.count = count
            self.digest = digest
        }

        /// The bytes hashed at each of the three places of a longer proof.
        static let sampleBytes = 128

        private static func digest(of bytes: UnsafeRawBufferPointer) -> Int {
            var hasher = Hasher()
            hasher.combine(bytes.count)
            let sample = sampleBytes
            if bytes.count <= 3 * sample {
                hasher.combine(bytes: bytes)
            } else {
                let middle = (bytes.count - sample) / 2
                hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: bytes[0..<sample]))
                hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: bytes[middle..<(middle + sample)]))
                hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: bytes[(bytes.count - sample)...]))
            }
            return hasher.finalize()
        }

        /// Gives the proof's bytes to `body`. Do not escape the pointer.
        func withBytes<Result>(_ body: (UnsafeRawBufferPointer) -> Result) -> Result {
            switch storage {
            case .bytes(let bytes): return bytes.withUnsafeBytes(body)
            case .text(let text):
                var text = text
                return text.withUTF8 { body(UnsafeRawBufferPointer($0)) }
            }
        }

        func hash(into hasher: inout Hasher) { hasher.combine(digest) }

        static func == (lhs: Key, rhs: Key) -> Bool {
            guard lhs.digest == rhs.digest, lhs.count == rhs.count else { return false }
            guard lhs.count > 0 else { return true }
            return lhs.withBytes { left in
                rhs.withBytes { right in memcmp(left.baseAddress!, right.baseAddress!, left.count) == 0 }
            }
        }
    }

    private struct State {
        var entries: [Key: PurchaseEvidence] = [:]
        var order: [Key] = []
        var head = 0
        var bytes = 0
        /// How many kept proofs have each digest (only digests with at least one).
        var sharingDigest: [Int: Int] = [:]
    }

    /// The most proofs kept with one digest: a lookup compares a proof with at most this many others byte for byte,
    /// however the proofs sent were made. A proof past it is analyzed every time, as a proof not seen before is.
    static let maximumSharingDigest = 4

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

    /// The key of a proof's text (its UTF-8 bytes, not copied), or nil for one too large to keep.
    func key(for text: String) -> Key? {
        text.utf8.count <= maximumProofBytes ? Key(text: text) : nil
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
            if let index = state.entries.index(forKey: proof) {
                state.entries.values[index] = evidence
                return
            }
            guard state.sharingDigest[proof.digest, default: 0] < Self.maximumSharingDigest else { return }
            state.entries[proof] = evidence
            state.sharingDigest[proof.digest, default: 0] += 1
            state.order.append(proof)
            state.bytes += proof.count
            while state.bytes > byteBudget, state.head < state.order.count {
                let oldest = state.order[state.head]
                state.head += 1
                state.entries[oldest] = nil
                state.bytes -= oldest.count
                if let sharing = state.sharingDigest[oldest.digest], sharing > 1 {
                    state.sharingDigest[oldest.digest] = sharing - 1
                } else {
                    state.sharingDigest[oldest.digest] = nil
                }
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
