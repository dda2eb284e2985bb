import Crypto
import Foundation
import SwiftASN1
import Synchronization
import X509
import _CryptoExtras

extension ChainVerifier {
    /// Checks an iOS 6 receipt's signature: the decoded `signature` is a version byte (2: 128-byte RSA/SHA-1,
    /// 3: 256-byte RSA/SHA-256), the signature, a 4-byte big-endian certificate length and the certificate.
    /// The signature covers the version byte followed by the decoded purchase-info.
    ///
    /// Apple's signing certificate is issued by "Apple iTunes Store Certification Authority", which receipts do
    /// not include, and uses a 1024-bit key; unless that CA is configured, a genuine receipt is `untrusted`.
    func checkSignature(of receipt: TransactionReceipt, at time: Date) -> SignatureStatus {
        guard let blob = receipt.signatureBlob, let version = blob.first else {
            return .invalid(reason: "signature is missing or not base64")
        }
        let signatureLength: Int
        switch version {
        case 2: signatureLength = 128
        case 3: signatureLength = 256
        default: return .invalid(reason: "unknown signature version \(version)")
        }
        let headerLength = 1 + signatureLength + 4
        guard blob.count > headerLength else { return .invalid(reason: "signature blob is truncated") }
        var certificateLength = 0
        for byte in blob[(1 + signatureLength)..<headerLength] {
            certificateLength = certificateLength << 8 | Int(byte)
        }
        guard certificateLength > 0, certificateLength <= blob.count - headerLength else {
            return .invalid(reason: "signature blob has a bad certificate length")
        }
        let certificateBytes = Array(blob[headerLength..<(headerLength + certificateLength)])
        guard let publicKey = legacySigningKey(certificateBytes) else {
            return .invalid(reason: "signing certificate has no usable RSA key")
        }
        let signature = _RSA.Signing.RSASignature(rawRepresentation: blob[1..<(1 + signatureLength)])
        var signed: [UInt8] = [version]
        signed.append(contentsOf: receipt.purchaseInfo)
        let verified =
            version == 2
            ? publicKey.isValidSignature(signature, for: Insecure.SHA1.hash(data: signed), padding: .insecurePKCS1v1_5)
            : publicKey.isValidSignature(signature, for: SHA256.hash(data: signed), padding: .insecurePKCS1v1_5)
        guard verified else { return .invalid(reason: "purchase-info signature does not verify") }

        var key: [UInt8] = [0x02]
        key.append(contentsOf: certificateBytes)
        let outcome = self.outcome(forKey: key) {
            guard let certificate = try? Certificate(derEncoded: certificateBytes) else {
                return .untrusted(
                    "signing certificate (1024-bit key) is issued by Apple iTunes Store Certification Authority, "
                        + "which is not a configured anchor")
            }
            return buildPath(
                leaf: OfferedCertificate(der: certificateBytes, certificate: certificate), intermediates: [])
        }
        return outcome.status(at: time)
    }

    /// The RSA key of a legacy signing certificate (1024-bit keys accepted), read with the BER reader because
    /// swift-certificates rejects keys under 2048 bits. Cached per certificate.
    private func legacySigningKey(_ certificate: [UInt8]) -> _RSA.Signing.PublicKey? {
        if let cached = legacyKeys.withLock({ $0[ByteKey(certificate)] }) { return cached }
        let reader = BERReader(certificate)
        guard let outer = try? reader.element(at: 0, limit: certificate.count),
            let parts = try? reader.children(of: outer), let tbs = parts.first,
            let fields = try? reader.children(of: tbs)
        else { return nil }
        // tbsCertificate: [0] version?, serial, signature, issuer, validity, subject, subjectPublicKeyInfo
        let offset = fields.first?.identifier == BERTag.context0Constructed ? 1 : 0
        guard fields.count > offset + 5 else { return nil }
        let spki = certificate[fields[offset + 5].range]
        guard let key = try? _RSA.Signing.PublicKey(unsafeDERRepresentation: spki) else { return nil }
        legacyKeys.withLock { keys in
            if keys.count >= Self.cacheCapacity { keys.removeAll() }
            keys[ByteKey(certificate)] = key
        }
        return key
    }
}
