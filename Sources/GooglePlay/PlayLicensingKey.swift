import Crypto
import Foundation
import _CryptoExtras

/// An app's Google Play licensing key: the RSA public key whose private half signs the purchase data a client
/// receives from Play Billing (SHA1withRSA, PKCS #1 v1.5).
///
/// Keys of 1,024 bits are accepted: Google issued them to older apps (and the shared fixtures hold one), and a
/// licensing key only ever verifies; swift-crypto refuses them outside its `unsafe…` initialisers.
public struct PlayLicensingKey: Sendable {
    let key: _RSA.Signing.PublicKey

    /// The key as the Play Console shows it (base64 of an X.509 SubjectPublicKeyInfo; spaces and line ends are
    /// ignored) or the same key in PEM. Nil when the text is not an RSA public key of at least 1,024 bits.
    public init?(text: String) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.hasPrefix("-----BEGIN") {
            guard let key = try? _RSA.Signing.PublicKey(unsafePEMRepresentation: trimmed) else { return nil }
            self.key = key
            return
        }
        let base64 = String(trimmed.unicodeScalars.filter { !CharacterSet.whitespacesAndNewlines.contains($0) })
        guard let der = Data(base64Encoded: base64),
            let key = try? _RSA.Signing.PublicKey(unsafeDERRepresentation: der)
        else { return nil }
        self.key = key
    }

    /// The key's size (1,024 in old apps' keys, 2,048 in Google's current consoles).
    public var keySizeInBits: Int { key.keySizeInBits }

    /// Whether `signature` (base64, as `Purchase.getSignature()` gives it) is this key's SHA1withRSA signature of
    /// exactly `data`. The bytes are taken as they are: the signature covers the text the client received, so a
    /// re-serialised or trimmed copy does not verify.
    public func isValidSignature(_ signature: String, for data: some DataProtocol) -> Bool {
        guard let bytes = Data(base64Encoded: signature.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            return false
        }
        return key.isValidSignature(
            _RSA.Signing.RSASignature(rawRepresentation: bytes), for: Insecure.SHA1.hash(data: data),
            padding: .insecurePKCS1v1_5)
    }
}
