import Decision
import Ledger
import Testing

@testable import Worker

/// `ProofRejectionCache`, the worker's memory of proofs rejected by their bytes alone (changed with bench pipeline).
@Suite("Process: proof rejection cache")
struct ProcessRejectionCacheTests {
    static let evidence = PurchaseEvidence(source: .prefilter, authenticity: .unknown, bundleID: "com.other.game")

    @Test("a hit needs the exact bytes; the oldest proofs leave once the byte budget is spent; large ones are not kept")
    func exactBytesAndBudget() {
        let cache = ProofRejectionCache(maximumProofBytes: 100, byteBudget: 250)
        let first = [UInt8](repeating: 1, count: 100)
        cache.insert(Self.evidence, for: first)
        #expect(cache.evidence(for: first) == Self.evidence)
        #expect(cache.evidence(for: first.dropLast() + [2]) == nil)
        cache.insert(Self.evidence, for: [UInt8](repeating: 2, count: 100))
        cache.insert(Self.evidence, for: [UInt8](repeating: 3, count: 100))
        #expect(cache.evidence(for: first) == nil)
        #expect(cache.count == 2)
        cache.insert(Self.evidence, for: [UInt8](repeating: 4, count: 101))
        #expect(cache.evidence(for: [UInt8](repeating: 4, count: 101)) == nil)
        #expect(cache.count == 2)
    }

    @Test("many insertions keep the count within the budget")
    func staysBounded() {
        let cache = ProofRejectionCache(maximumProofBytes: 8, byteBudget: 80)
        for index in 0..<5_000 {
            cache.insert(Self.evidence, for: withUnsafeBytes(of: UInt64(index)) { Array($0) })
        }
        #expect(cache.count == 10)
        #expect(cache.evidence(for: withUnsafeBytes(of: UInt64(4_999)) { Array($0) }) == Self.evidence)
    }

    @Test("proofs that differ only between the hashed samples: a few kept, each found by its exact bytes only")
    func proofsSharingTheirSamples() {
        let cache = ProofRejectionCache(maximumProofBytes: 8192, byteBudget: 1 << 20)
        // Same length, same start, middle and end: one digest. Each differs at byte 1,000, which no sample covers.
        let proofs = (0..<10).map { index -> [UInt8] in
            var proof = [UInt8](repeating: 0x41, count: 4096)
            proof[1_000] = UInt8(index)
            return proof
        }
        for proof in proofs { cache.insert(Self.evidence, for: proof) }
        #expect(cache.count == ProofRejectionCache.maximumSharingDigest)
        for (index, proof) in proofs.enumerated() {
            let kept = index < ProofRejectionCache.maximumSharingDigest
            #expect(cache.evidence(for: proof) == (kept ? Self.evidence : nil))
        }
        // Room comes back when one of them leaves: an unrelated proof pushes the oldest out of a small budget.
        let small = ProofRejectionCache(maximumProofBytes: 8192, byteBudget: 4 * 4096)
        for proof in proofs.prefix(4) { small.insert(Self.evidence, for: proof) }
        small.insert(Self.evidence, for: [UInt8](repeating: 0x42, count: 4096))
        #expect(small.evidence(for: proofs[0]) == nil)
        small.insert(Self.evidence, for: proofs[4])
        #expect(small.evidence(for: proofs[4]) == Self.evidence)
    }
}
