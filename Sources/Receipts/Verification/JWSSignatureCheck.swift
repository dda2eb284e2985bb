import Crypto
import Foundation
import X509

extension ChainVerifier {
    /// Checks a JWS: `alg` ES256, an `x5c` of three certificates chaining to an anchor with Apple's marker
    /// extensions, valid at `time`, and the ES256 signature by the leaf. The chain outcome is cached by the
    /// header segment (which holds `x5c`), so a warm stream costs one ECDSA verification per JWS.
    ///
    /// `allowUnanchored` (Xcode receipts, when allowed) checks the signature with `x5c[0]` alone.
    func checkSignature(of jws: JWS, at time: Date, allowUnanchored: Bool) -> SignatureStatus {
        var key: [UInt8] = [allowUnanchored ? 0x04 : 0x03]
        key.append(contentsOf: jws.headerSegment)
        let outcome = self.outcome(forKey: key) { buildJWSChain(jws, allowUnanchored: allowUnanchored) }
        guard case .trusted(let chain) = outcome else { return outcome.status(at: time) }
        guard jws.signature.count == 64,
            let publicKey = chain.p256Key,
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: jws.signature),
            publicKey.isValidSignature(signature, for: SHA256.hash(data: jws.signingInput))
        else { return .invalid(reason: "ES256 signature does not verify") }
        if chain.unanchored {
            return .notChecked(reason: "Xcode StoreKit-testing JWS: signature checked, chain not anchored")
        }
        return outcome.status(at: time)
    }

    private func buildJWSChain(_ jws: JWS, allowUnanchored: Bool) -> Outcome {
        let header: JWS.Header
        do {
            header = try jws.header()
        } catch {
            return .invalid(error.reason)
        }
        guard header.alg == "ES256" else { return .invalid("JWS alg must be ES256") }
        guard let x5c = header.x5c, !x5c.isEmpty else { return .untrusted("JWS header has no x5c certificate chain") }
        var certificates: [OfferedCertificate] = []
        for encoded in x5c.prefix(4) {
            guard let der = Base64.decode(encoded.utf8), let certificate = offeredCertificate(der) else {
                return .invalid("an x5c certificate cannot be parsed")
            }
            certificates.append(certificate)
        }
        if certificates.count != 3 {
            if allowUnanchored, let leaf = certificates.first {
                return .trusted(
                    VerifiedChain(
                        leaf: leaf.certificate, notBefore: .distantPast, notAfter: .distantFuture, unanchored: true))
            }
            return .untrusted("x5c must hold three certificates, found \(certificates.count)")
        }
        return buildPath(leaf: certificates[0], intermediates: Array(certificates.dropFirst()))
    }
}
