import Crypto
import Foundation
import Messages
import Receipts
import SwiftASN1
import Testing
import X509
import _CryptoExtras

/// A throw-away PKI for the forgery tests: root, intermediate and leaf, with or without Apple's marker OIDs.
struct ReceiptsTestPKI {
    static let leafMarker: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 6, 11, 1]
    static let intermediateMarker: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 6, 2, 1]

    var root: Certificate
    var intermediate: Certificate
    var leaf: Certificate
    /// The intermediate's key, to issue more leaves under the same intermediate (`withNewLeaf`).
    var intermediateKey: Certificate.PrivateKey
    /// The leaf's key: EC for JWS, RSA for PKCS#7.
    var ecKey: P256.Signing.PrivateKey?
    var rsaKey: _RSA.Signing.PrivateKey?

    static func newRSAKey() throws -> _RSA.Signing.PrivateKey { try _RSA.Signing.PrivateKey(keySize: .bits2048) }

    /// An EC (JWS) or RSA (PKCS#7) leaf under an EC intermediate and root. The leaf is valid 2020...2030 unless told.
    static func make(
        rsa: Bool = false, leafMarker: Bool = true, intermediateMarker: Bool = true,
        leafValidity: ClosedRange<Date>? = nil
    ) throws -> ReceiptsTestPKI {
        let validity =
            leafValidity ?? Date(timeIntervalSince1970: 1_577_836_800)...Date(timeIntervalSince1970: 1_893_456_000)
        let rootKey = Certificate.PrivateKey(P256.Signing.PrivateKey())
        let intermediateKey = Certificate.PrivateKey(P256.Signing.PrivateKey())
        let ecKey = P256.Signing.PrivateKey()
        let rsaKey = rsa ? try Self.newRSAKey() : nil
        let leafPublicKey =
            rsaKey.map { Certificate.PublicKey($0.publicKey) } ?? Certificate.PublicKey(ecKey.publicKey)
        let rootName = try DistinguishedName { CommonName("Receipts Test Root") }
        let intermediateName = try DistinguishedName { CommonName("Receipts Test Intermediate") }
        let start = Date(timeIntervalSince1970: 1_262_304_000)  // 2010
        let end = Date(timeIntervalSince1970: 2_208_988_800)  // 2040
        let ca = try Certificate.Extension(BasicConstraints.isCertificateAuthority(maxPathLength: nil), critical: true)
        let root = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: rootKey.publicKey, notValidBefore: start,
            notValidAfter: end, issuer: rootName, subject: rootName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions([ca]), issuerPrivateKey: rootKey)
        var intermediateExtensions = [ca]
        if intermediateMarker {
            intermediateExtensions.append(.init(oid: Self.intermediateMarker, critical: false, value: [0x05, 0x00]))
        }
        let intermediate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: intermediateKey.publicKey, notValidBefore: start,
            notValidAfter: end, issuer: rootName, subject: intermediateName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions(intermediateExtensions), issuerPrivateKey: rootKey)
        let leaf = try Self.leaf(
            publicKey: leafPublicKey, marker: leafMarker, validity: validity, issuer: intermediateName,
            issuerKey: intermediateKey)
        return ReceiptsTestPKI(
            root: root, intermediate: intermediate, leaf: leaf, intermediateKey: intermediateKey,
            ecKey: rsa ? nil : ecKey, rsaKey: rsaKey)
    }

    static func leaf(
        publicKey: Certificate.PublicKey, marker: Bool, validity: ClosedRange<Date>, issuer: DistinguishedName,
        issuerKey: Certificate.PrivateKey
    ) throws -> Certificate {
        var extensions = [try Certificate.Extension(BasicConstraints.notCertificateAuthority, critical: true)]
        if marker { extensions.append(.init(oid: Self.leafMarker, critical: false, value: [0x05, 0x00])) }
        return try Certificate(
            version: .v3, serialNumber: .init(), publicKey: publicKey,
            notValidBefore: validity.lowerBound, notValidAfter: validity.upperBound,
            issuer: issuer, subject: try DistinguishedName { CommonName("Receipts Test Leaf") },
            signatureAlgorithm: .ecdsaWithSHA256, extensions: try Certificate.Extensions(extensions),
            issuerPrivateKey: issuerKey)
    }

    /// The same root and intermediate with a new leaf key and certificate, issued by `issuerKey` (default: the
    /// intermediate's key; another key makes a leaf that only claims to come from the intermediate).
    func withNewLeaf(
        rsa: Bool = false, marker: Bool = true, validity: ClosedRange<Date>? = nil,
        issuerKey: Certificate.PrivateKey? = nil
    ) throws -> ReceiptsTestPKI {
        let validity =
            validity ?? Date(timeIntervalSince1970: 1_577_836_800)...Date(timeIntervalSince1970: 1_893_456_000)
        let ecKey = P256.Signing.PrivateKey()
        let rsaKey = rsa ? try Self.newRSAKey() : nil
        let publicKey = rsaKey.map { Certificate.PublicKey($0.publicKey) } ?? Certificate.PublicKey(ecKey.publicKey)
        var copy = self
        copy.leaf = try Self.leaf(
            publicKey: publicKey, marker: marker, validity: validity, issuer: intermediate.subject,
            issuerKey: issuerKey ?? intermediateKey)
        copy.ecKey = rsa ? nil : ecKey
        copy.rsaKey = rsaKey
        return copy
    }

    var trust: TrustStore { TrustStore(anchors: [root]) }

    static func der(_ certificate: Certificate) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return serializer.serializedBytes
    }

    // MARK: JWS

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    /// A compact JWS with `x5c` = [leaf, intermediate, root], signed by `signer` (default: the leaf key).
    func jws(payload: String, signer: P256.Signing.PrivateKey? = nil) throws -> String {
        let x5c = try [leaf, intermediate, root].map { "\"\(Data(try Self.der($0)).base64EncodedString())\"" }
        let header = "{\"alg\":\"ES256\",\"x5c\":[\(x5c.joined(separator: ","))]}"
        let input = Self.base64URL(Array(header.utf8)) + "." + Self.base64URL(Array(payload.utf8))
        guard let key = signer ?? ecKey else { throw ReceiptsTestPKIError() }
        let signature = Array(try key.signature(for: SHA256.hash(data: Array(input.utf8))).rawRepresentation)
        return input + "." + Self.base64URL(signature)
    }

    // MARK: PKCS#7

    static func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        var length: [UInt8]
        if content.count < 0x80 {
            length = [UInt8(content.count)]
        } else {
            var bytes: [UInt8] = []
            var value = content.count
            while value > 0 {
                bytes.insert(UInt8(value & 0xFF), at: 0)
                value >>= 8
            }
            length = [0x80 | UInt8(bytes.count)] + bytes
        }
        return [tag] + length + content
    }

    static func integer(_ value: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        var rest = value
        repeat {
            bytes.insert(UInt8(rest & 0xFF), at: 0)
            rest >>= 8
        } while rest > 0
        if bytes[0] & 0x80 != 0 { bytes.insert(0, at: 0) }
        return tlv(0x02, bytes)
    }

    static func attribute(_ type: Int, _ value: [UInt8]) -> [UInt8] {
        tlv(0x30, integer(type) + integer(1) + tlv(0x04, value))
    }

    static func utf8(_ text: String) -> [UInt8] { tlv(0x0C, Array(text.utf8)) }
    static func ia5(_ text: String) -> [UInt8] { tlv(0x16, Array(text.utf8)) }

    /// A receipt payload: environment, bundle id, version, creation date and the given purchases.
    static func payload(bundleID: String, created: String, purchases: [(id: String, product: String)]) -> [UInt8] {
        var attributes = [
            attribute(0, utf8("ProductionSandbox")), attribute(2, utf8(bundleID)), attribute(3, utf8("1")),
            attribute(12, ia5(created)),
        ]
        for purchase in purchases {
            let record = tlv(
                0x31,
                attribute(1701, integer(1)) + attribute(1702, utf8(purchase.product))
                    + attribute(1703, utf8(purchase.id)) + attribute(1704, ia5(created))
                    + attribute(1712, ia5("")))
            attributes.append(attribute(17, record))
        }
        return tlv(0x31, attributes.flatMap { $0 })
    }

    static let sha256OID: [UInt8] = [0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01]
    static let rsaOID: [UInt8] = [0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01]
    static let dataOID: [UInt8] = [0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x07, 0x01]
    static let signedDataOID: [UInt8] = [0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x07, 0x02]

    /// A DER CMS SignedData app receipt over `payload`, signed with `signer` (default: the leaf's RSA key).
    func pkcs7(payload: [UInt8], signer: _RSA.Signing.PrivateKey? = nil) throws -> [UInt8] {
        guard let key = signer ?? rsaKey else { throw ReceiptsTestPKIError() }
        let signature = Array(
            try key.signature(for: SHA256.hash(data: payload), padding: .insecurePKCS1v1_5).rawRepresentation)
        var issuer = DER.Serializer()
        try issuer.serialize(leaf.issuer)
        let algorithm = Self.tlv(0x30, Self.sha256OID + [0x05, 0x00])
        let signerInfo = Self.tlv(
            0x30,
            Self.integer(1) + Self.tlv(0x30, issuer.serializedBytes + Self.tlv(0x02, Array(leaf.serialNumber.bytes)))
                + algorithm + Self.tlv(0x30, Self.rsaOID + [0x05, 0x00]) + Self.tlv(0x04, signature))
        let certificates = try [leaf, intermediate].flatMap { try Self.der($0) }
        let signedData = Self.tlv(
            0x30,
            Self.integer(1) + Self.tlv(0x31, algorithm)
                + Self.tlv(0x30, Self.dataOID + Self.tlv(0xA0, Self.tlv(0x04, payload)))
                + Self.tlv(0xA0, certificates) + Self.tlv(0x31, signerInfo))
        return Self.tlv(0x30, Self.signedDataOID + Self.tlv(0xA0, signedData))
    }

}

/// A test PKI that cannot do what was asked (no key of that kind).
struct ReceiptsTestPKIError: Error {}
