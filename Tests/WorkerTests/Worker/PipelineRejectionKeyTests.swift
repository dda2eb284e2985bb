import Decision
import Ledger
import Testing

@testable import Worker

/// The rejection cache's key: the proof hashed once as a whole, still compared byte for byte.
@Suite("Pipeline: proof rejection cache key")
struct PipelineRejectionKeyTests {
    @Test("equal bytes make equal keys; a key never matches other bytes; lookups by key and by bytes agree")
    func keys() {
        let proof = [UInt8](repeating: 7, count: 4096)
        var other = proof
        other[4095] = 8
        #expect(ProofRejectionCache.Key(proof) == ProofRejectionCache.Key(Array(proof)))
        #expect(ProofRejectionCache.Key(proof).hashValue == ProofRejectionCache.Key(Array(proof)).hashValue)
        #expect(ProofRejectionCache.Key(proof) != ProofRejectionCache.Key(other))

        let cache = ProofRejectionCache(maximumProofBytes: 8192, byteBudget: 1 << 20)
        let evidence = PurchaseEvidence(source: .prefilter, authenticity: .unknown, bundleID: "com.other.game")
        guard let key = cache.key(for: proof) else {
            Issue.record("a proof within maximumProofBytes has a key")
            return
        }
        cache.insert(evidence, for: key)
        #expect(cache.evidence(for: proof) == evidence)
        #expect(cache.evidence(for: other) == nil)
        #expect(ProofRejectionCache(maximumProofBytes: 16).key(for: proof) == nil)
    }
}
