import Crypto
import Decision
import Foundation
import Messages
import Receipts
import Testing
import X509
import _CryptoExtras

/// The chain cache and the verified-intermediate cache must save work without ever accepting what a cold
/// verifier would reject.
@Suite("Receipts: chain and intermediate caches")
struct ReceiptChainCacheTests {
    static func jws(_ pki: ReceiptsTestPKI, signedDate: Int = ReceiptForgeryTests.signedDate) throws -> [UInt8] {
        let payload = ReceiptForgeryTests.transactionPayload()
            .replacingOccurrences(of: "\(ReceiptForgeryTests.signedDate)", with: "\(signedDate)")
        return Array(try pki.jws(payload: payload).utf8)
    }

    static let expiredValidity =
        Date(timeIntervalSince1970: 1_577_836_800)...Date(timeIntervalSince1970: 1_600_000_000)  // 2020

    @Test("A new leaf under a verified intermediate verifies; dropping leaf chains keeps the intermediate")
    func newLeafUnderKnownIntermediate() throws {
        let pki = try ReceiptsTestPKI.make()
        let analyzer = JudgingAnalyzer(trust: pki.trust)
        #expect(analyzer.analyze(try Self.jws(pki)).signature == .valid)
        #expect(analyzer.chains.cachedChainCount == 1)
        #expect(analyzer.chains.cachedIntermediateCount == 1)

        let second = try pki.withNewLeaf()
        #expect(analyzer.analyze(try Self.jws(second)).signature == .valid)
        #expect(analyzer.chains.cachedChainCount == 2)

        analyzer.chains.removeCachedLeafChains()
        #expect(analyzer.chains.cachedChainCount == 0)
        #expect(analyzer.chains.cachedIntermediateCount == 1)
        #expect(analyzer.analyze(try Self.jws(second)).signature == .valid)
        #expect(analyzer.analyze(try Self.jws(pki)).judgement == .locallyVerified)

        analyzer.chains.removeAllCachedChains()
        #expect(analyzer.chains.cachedIntermediateCount == 0)
        #expect(analyzer.analyze(try Self.jws(pki)).signature == .valid)
    }

    @Test("A cached chain still checks each receipt's own signing date")
    func cachedChainCheckedAtEachSigningDate() throws {
        let pki = try ReceiptsTestPKI.make()
        let analyzer = JudgingAnalyzer(trust: pki.trust)
        #expect(analyzer.analyze(try Self.jws(pki)).signature == .valid)
        // Same x5c (a cache hit), signed after the leaf's notAfter (2030) and before its notBefore (2020).
        let late = analyzer.analyze(try Self.jws(pki, signedDate: 1_900_000_000_000))
        #expect(late.signature.code == "invalid")
        #expect(late.signature.reason?.contains("expired") == true)
        let early = analyzer.analyze(try Self.jws(pki, signedDate: 1_500_000_000_000))
        #expect(early.signature.reason?.contains("not yet valid") == true)
        #expect(analyzer.chains.cachedChainCount == 1)
    }

    @Test("Under a cached intermediate, a leaf expired at signing time is invalid")
    func expiredLeafUnderCachedIntermediate() throws {
        let pki = try ReceiptsTestPKI.make()
        let analyzer = JudgingAnalyzer(trust: pki.trust)
        #expect(analyzer.analyze(try Self.jws(pki)).signature == .valid)
        let expired = try pki.withNewLeaf(validity: Self.expiredValidity)
        let analysis = analyzer.analyze(try Self.jws(expired))
        #expect(analysis.signature.code == "invalid")
        #expect(analysis.signature.reason?.contains("expired") == true)
        #expect(analysis.judgement.code == "not_authenticated")
    }

    @Test("Under a cached intermediate, a leaf without Apple's marker OID is invalid")
    func wrongOIDLeafUnderCachedIntermediate() throws {
        let pki = try ReceiptsTestPKI.make()
        let analyzer = JudgingAnalyzer(trust: pki.trust)
        #expect(analyzer.analyze(try Self.jws(pki)).signature == .valid)
        let unmarked = try pki.withNewLeaf(marker: false)
        let analysis = analyzer.analyze(try Self.jws(unmarked))
        #expect(analysis.signature.code == "invalid")
        #expect(analysis.signature.reason?.contains("6.11.1") == true)

        // Without the marker policy, the same leaf is accepted: the check comes from the policy, not the cache.
        let lenient = JudgingAnalyzer(trust: pki.trust, policy: AnalysisPolicy(requireAppleMarkerOIDs: false))
        #expect(lenient.analyze(try Self.jws(pki)).signature == .valid)
        #expect(lenient.analyze(try Self.jws(unmarked)).signature == .valid)
    }

    @Test("An intermediate without its marker OID is never cached as a usable issuer")
    func unmarkedIntermediateStaysRejected() throws {
        let pki = try ReceiptsTestPKI.make(intermediateMarker: false)
        let analyzer = JudgingAnalyzer(trust: pki.trust)
        for _ in 0..<2 {
            let analysis = analyzer.analyze(try Self.jws(try pki.withNewLeaf()))
            #expect(analysis.signature.reason?.contains("6.2.1") == true)
        }
        #expect(analyzer.chains.cachedIntermediateCount == 0)
    }

    @Test("A leaf that names the cached intermediate but is signed by another key is invalid")
    func impostorLeafUnderCachedIntermediate() throws {
        let pki = try ReceiptsTestPKI.make()
        let analyzer = JudgingAnalyzer(trust: pki.trust)
        #expect(analyzer.analyze(try Self.jws(pki)).signature == .valid)
        let impostor = try pki.withNewLeaf(issuerKey: Certificate.PrivateKey(P256.Signing.PrivateKey()))
        let analysis = analyzer.analyze(try Self.jws(impostor))
        #expect(analysis.signature.code == "invalid")
        #expect(analysis.signature.reason?.contains("not signed by its issuer") == true)
    }

    @Test("Cache entries belong to one analyzer: another anchor set does not use them")
    func cachesArePerAnchorSet() throws {
        let pki = try ReceiptsTestPKI.make()
        let trusting = JudgingAnalyzer(trust: pki.trust)
        #expect(trusting.analyze(try Self.jws(pki)).signature == .valid)
        let newLeaf = try Self.jws(try pki.withNewLeaf())
        #expect(trusting.analyze(newLeaf).signature == .valid)

        #expect(JudgingAnalyzer(trust: .apple).analyze(newLeaf).signature.code == "untrusted")
        // A root with the same name but another key: the path is found by name and fails on the signature.
        let lookalike = try ReceiptsTestPKI.make()
        let other = JudgingAnalyzer(trust: lookalike.trust)
        #expect(other.analyze(newLeaf).signature.code == "invalid")
        #expect(other.analyze(try Self.jws(pki)).signature.code == "invalid")
        #expect(other.chains.cachedIntermediateCount == 0)
        #expect(other.analyze(try Self.jws(lookalike)).signature == .valid)
    }

    @Test("PKCS#7: a new RSA leaf under a cached intermediate verifies; an expired one does not")
    func pkcs7NewLeaf() throws {
        let pki = try ReceiptsTestPKI.make(rsa: true)
        let analyzer = JudgingAnalyzer(trust: pki.trust)
        let payload = ReceiptsTestPKI.payload(
            bundleID: "com.example.app", created: "2023-11-14T22:13:20Z", purchases: [("1000000000000001", "p")])
        #expect(analyzer.analyze(try pki.pkcs7(payload: payload)).signature == .valid)
        #expect(analyzer.chains.cachedIntermediateCount == 1)

        let second = try pki.withNewLeaf(rsa: true)
        #expect(analyzer.analyze(try second.pkcs7(payload: payload)).signature == .valid)
        let expired = try pki.withNewLeaf(rsa: true, validity: Self.expiredValidity)
        let late = analyzer.analyze(try expired.pkcs7(payload: payload))
        #expect(late.signature.code == "invalid")
        #expect(late.signature.reason?.contains("expired") == true)
        let impostor = try pki.withNewLeaf(rsa: true, issuerKey: Certificate.PrivateKey(P256.Signing.PrivateKey()))
        #expect(analyzer.analyze(try impostor.pkcs7(payload: payload)).signature.code == "invalid")
    }
}
