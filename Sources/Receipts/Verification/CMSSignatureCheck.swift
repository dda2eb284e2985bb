import Crypto
import Foundation
import X509

extension ChainVerifier {
    /// Checks an app receipt's CMS signature (RSA PKCS#1 v1.5 with SHA-1 or SHA-256, with or without signed
    /// attributes) and its signer chain at `time`. The chain outcome is cached per (certificates, signer) pair.
    func checkSignature(of receipt: AppReceipt, at time: Date) -> SignatureStatus {
        let signing = receipt.signing
        var key: [UInt8] = [0x01]  // domain separation from JWS keys
        key.reserveCapacity(signing.certificates.reduce(signing.signerIdentifier.count + 1) { $0 + $1.count })
        for certificate in signing.certificates { key.append(contentsOf: certificate) }
        key.append(contentsOf: signing.signerIdentifier)
        let outcome = self.outcome(forKey: key) { buildCMSChain(signing) }
        guard case .trusted(let chain) = outcome else { return outcome.status(at: time) }

        let algorithm: Certificate.SignatureAlgorithm =
            signing.digest == .sha1 ? .sha1WithRSAEncryption : .sha256WithRSAEncryption
        let signedBytes: [UInt8]
        if let attributes = signing.signedAttributes {
            // The signature covers the DER SET OF attributes; the content is bound through messageDigest.
            guard let expected = signing.messageDigest else {
                return .invalid(reason: "signed attributes lack a message digest")
            }
            let actual: [UInt8] =
                signing.digest == .sha1
                ? Array(Insecure.SHA1.hash(data: receipt.payload)) : Array(SHA256.hash(data: receipt.payload))
            guard actual.elementsEqual(expected) else {
                return .invalid(reason: "payload does not match the signed message digest")
            }
            signedBytes = [BERTag.set] + Self.derLength(attributes.count) + Array(attributes)
            guard
                chain.leaf.publicKey.isValidSignature(
                    signing.signature, for: signedBytes, signatureAlgorithm: algorithm)
            else { return .invalid(reason: "CMS signature does not verify") }
        } else {
            guard
                chain.leaf.publicKey.isValidSignature(
                    signing.signature, for: receipt.payload, signatureAlgorithm: algorithm)
            else { return .invalid(reason: "CMS signature does not verify") }
        }
        return outcome.status(at: time)
    }

    private func buildCMSChain(_ signing: AppReceipt.Signing) -> Outcome {
        var offered: [OfferedCertificate] = []
        for encoded in signing.certificates {
            guard let certificate = offeredCertificate(Array(encoded)) else {
                return .invalid("a certificate in the receipt cannot be parsed")
            }
            offered.append(certificate)
        }
        guard let leafIndex = Self.signerCertificateIndex(signing.signerIdentifier, in: offered.map(\.certificate))
        else {
            return .invalid("the signer's certificate is not in the receipt")
        }
        let leaf = offered[leafIndex]
        return buildPath(leaf: leaf, intermediates: offered.filter { $0.certificate != leaf.certificate })
    }

    /// The index of the certificate named by an `issuerAndSerialNumber` signer identifier.
    static func signerCertificateIndex(_ identifier: ArraySlice<UInt8>, in certificates: [Certificate]) -> Int? {
        let bytes = Array(identifier)
        let reader = BERReader(bytes)
        guard let sid = try? reader.element(at: 0, limit: bytes.count), sid.identifier == BERTag.sequence,
            let parts = try? reader.children(of: sid), parts.count == 2, parts[1].identifier == BERTag.integer
        else { return certificates.count == 1 ? 0 : nil }
        let serial = bytes[parts[1].contents]
        return certificates.firstIndex { certificate in
            Array(certificate.serialNumber.bytes).elementsEqual(serial)
        }
    }

    static func derLength(_ length: Int) -> [UInt8] {
        if length < 0x80 { return [UInt8(length)] }
        var octets: [UInt8] = []
        var value = length
        while value > 0 {
            octets.insert(UInt8(value & 0xFF), at: 0)
            value >>= 8
        }
        return [0x80 | UInt8(octets.count)] + octets
    }
}
