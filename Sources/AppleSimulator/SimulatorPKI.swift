import CodedErrors
import Crypto
import Foundation
import SwiftASN1
import X509
import _CryptoExtras

/// The simulator's own test PKI, shaped like Apple's two chains:
/// - PKCS#7 receipts and iOS 6 transaction receipts: RSA-2048 root → intermediate → signing leaf
///   (like "Apple Inc. Root" → WWDR → "Mac App Store and iTunes Store Receipt Signing").
/// - StoreKit 2 JWS: P-256 root → intermediate (marker OID 1.2.840.113635.100.6.2.1) → leaf
///   (marker OID 1.2.840.113635.100.6.11.1), like Apple Root CA G3 → WWDR G6 → leaf.
///
/// Root private keys are thrown away once the chains are issued; only the two leaf keys are kept (and, with a
/// state directory, written there with mode 0600) because only they sign receipts.
public struct SimulatorPKI: Sendable {
    public let rsaRoot: Certificate
    public let rsaIntermediate: Certificate
    public let rsaLeaf: Certificate
    let rsaLeafKey: _RSA.Signing.PrivateKey
    public let ecRoot: Certificate
    public let ecIntermediate: Certificate
    public let ecLeaf: Certificate
    let ecLeafKey: P256.Signing.PrivateKey

    /// DER of the RSA leaf and intermediate, in the order they go into a PKCS#7 `certificates` field.
    let rsaChainDER: [[UInt8]]
    /// DER of the RSA leaf alone (the certificate inside an iOS 6 signature blob).
    let rsaLeafDER: [UInt8]
    /// The JWS `x5c` header: base64 DER of leaf, intermediate and root.
    let x5c: [String]
    /// DER of the P-256 root (the trust anchor for JWS, as Apple's libraries take it).
    public let jwsRootDER: [UInt8]
    /// DER of the RSA root (the trust anchor for PKCS#7 and iOS 6 receipts).
    public let receiptRootDER: [UInt8]

    /// Apple's marker extension on receipt-signing leaves.
    static let leafMarkerOID: ASN1ObjectIdentifier = "1.2.840.113635.100.6.11.1"
    /// Apple's marker extension on WWDR intermediates.
    static let intermediateMarkerOID: ASN1ObjectIdentifier = "1.2.840.113635.100.6.2.1"

    init(
        rsaRoot: Certificate,
        rsaIntermediate: Certificate,
        rsaLeaf: Certificate,
        rsaLeafKey: _RSA.Signing.PrivateKey,
        ecRoot: Certificate,
        ecIntermediate: Certificate,
        ecLeaf: Certificate,
        ecLeafKey: P256.Signing.PrivateKey
    ) throws {
        self.rsaRoot = rsaRoot
        self.rsaIntermediate = rsaIntermediate
        self.rsaLeaf = rsaLeaf
        self.rsaLeafKey = rsaLeafKey
        self.ecRoot = ecRoot
        self.ecIntermediate = ecIntermediate
        self.ecLeaf = ecLeaf
        self.ecLeafKey = ecLeafKey
        guard rsaLeaf.publicKey == Certificate.PublicKey(rsaLeafKey.publicKey),
            ecLeaf.publicKey == Certificate.PublicKey(ecLeafKey.publicKey)
        else {
            throw AppleSimulatorError(.certificates, "a leaf certificate does not match its private key")
        }
        self.rsaLeafDER = try Self.der(rsaLeaf)
        self.rsaChainDER = [rsaLeafDER, try Self.der(rsaIntermediate)]
        self.x5c = try [ecLeaf, ecIntermediate, ecRoot].map { Data(try Self.der($0)).base64EncodedString() }
        self.jwsRootDER = try Self.der(ecRoot)
        self.receiptRootDER = try Self.der(rsaRoot)
    }

    /// Both trust anchors (RSA root for receipts, P-256 root for JWS) as PEM, RSA first.
    public func rootsPEM() throws -> String {
        try rsaRoot.serializeAsPEM().pemString + "\n" + ecRoot.serializeAsPEM().pemString + "\n"
    }

    /// Issues a fresh PKI. Validity runs from a day before `now` for twenty years, so receipts minted today
    /// keep verifying at their signing date for as long as any test or demo lives.
    public static func generate(now: Date = Date()) throws -> SimulatorPKI {
        let notBefore = now.addingTimeInterval(-86_400)
        let notAfter = now.addingTimeInterval(20 * 365 * 86_400)

        let rsaLeafKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let rsa = try chain(
            names: (
                try name("Simulated Apple Inc. Root", unit: "Simulated Apple Certification Authority"),
                try name(
                    "Simulated Apple Worldwide Developer Relations Certification Authority",
                    unit: "Simulated Apple Worldwide Developer Relations"),
                try name(
                    "Simulated Mac App Store and iTunes Store Receipt Signing",
                    unit: "Simulated Apple Worldwide Developer Relations")
            ),
            keys: (
                .init(try _RSA.Signing.PrivateKey(keySize: .bits2048)),
                .init(try _RSA.Signing.PrivateKey(keySize: .bits2048)), .init(rsaLeafKey)
            ),
            firstSerial: 1, algorithm: .sha256WithRSAEncryption, notBefore: notBefore, notAfter: notAfter)

        let ecLeafKey = P256.Signing.PrivateKey()
        let ec = try chain(
            names: (
                try name("Simulated Apple Root CA - G3", unit: "Simulated Apple Certification Authority"),
                try name("Simulated Apple Worldwide Developer Relations Certification Authority G6", unit: "G6"),
                try name(
                    "Simulated Prod ECC Mac App Store and iTunes Store Receipt Signing",
                    unit: "Simulated Apple Worldwide Developer Relations")
            ),
            keys: (.init(P256.Signing.PrivateKey()), .init(P256.Signing.PrivateKey()), .init(ecLeafKey)),
            firstSerial: 11, algorithm: .ecdsaWithSHA256, notBefore: notBefore, notAfter: notAfter)

        return try SimulatorPKI(
            rsaRoot: rsa.root, rsaIntermediate: rsa.intermediate, rsaLeaf: rsa.leaf, rsaLeafKey: rsaLeafKey,
            ecRoot: ec.root, ecIntermediate: ec.intermediate, ecLeaf: ec.leaf, ecLeafKey: ecLeafKey)
    }

    /// A root (signed by itself), an intermediate and a leaf, each issued by the one above, with serials
    /// `firstSerial`, `firstSerial + 1` and `firstSerial + 2`.
    private static func chain(
        names: (root: DistinguishedName, intermediate: DistinguishedName, leaf: DistinguishedName),
        keys: (root: Certificate.PrivateKey, intermediate: Certificate.PrivateKey, leaf: Certificate.PrivateKey),
        firstSerial: Int, algorithm: Certificate.SignatureAlgorithm, notBefore: Date, notAfter: Date
    ) throws -> (root: Certificate, intermediate: Certificate, leaf: Certificate) {
        let root = try issue(
            serial: firstSerial, subject: names.root, publicKey: keys.root.publicKey, issuer: names.root,
            issuerPublicKey: keys.root.publicKey, issuerKey: keys.root, role: .root, algorithm: algorithm,
            notBefore: notBefore, notAfter: notAfter)
        let intermediate = try issue(
            serial: firstSerial + 1, subject: names.intermediate, publicKey: keys.intermediate.publicKey,
            issuer: names.root, issuerPublicKey: keys.root.publicKey, issuerKey: keys.root, role: .intermediate,
            algorithm: algorithm, notBefore: notBefore, notAfter: notAfter)
        let leaf = try issue(
            serial: firstSerial + 2, subject: names.leaf, publicKey: keys.leaf.publicKey, issuer: names.intermediate,
            issuerPublicKey: keys.intermediate.publicKey, issuerKey: keys.intermediate, role: .leaf,
            algorithm: algorithm, notBefore: notBefore, notAfter: notAfter)
        return (root, intermediate, leaf)
    }

    // MARK: State directory

    private static let files = (
        rsaRoot: "pki-rsa-root.pem", rsaIntermediate: "pki-rsa-intermediate.pem", rsaLeaf: "pki-rsa-leaf.pem",
        rsaLeafKey: "pki-rsa-leaf-key.pem", ecRoot: "pki-ec-root.pem", ecIntermediate: "pki-ec-intermediate.pem",
        ecLeaf: "pki-ec-leaf.pem", ecLeafKey: "pki-ec-leaf-key.pem"
    )

    /// Loads the PKI from `directory`, or issues one and writes it there when the directory holds none, so that
    /// a restarted simulator keeps accepting what it minted before.
    public static func loadOrGenerate(directory: URL, now: Date = Date()) throws -> SimulatorPKI {
        let fm = FileManager.default
        try fm.createDirectory(at: directory, withIntermediateDirectories: true)
        func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
        if fm.fileExists(atPath: path(files.rsaLeafKey)) {
            func read(_ name: String) throws -> String {
                guard let data = fm.contents(atPath: path(name)) else {
                    throw AppleSimulatorError(.stateDirectory, "cannot read \(path(name))")
                }
                return String(decoding: data, as: UTF8.self)
            }
            do {
                return try SimulatorPKI(
                    rsaRoot: Certificate(pemEncoded: read(files.rsaRoot)),
                    rsaIntermediate: Certificate(pemEncoded: read(files.rsaIntermediate)),
                    rsaLeaf: Certificate(pemEncoded: read(files.rsaLeaf)),
                    rsaLeafKey: _RSA.Signing.PrivateKey(pemRepresentation: read(files.rsaLeafKey)),
                    ecRoot: Certificate(pemEncoded: read(files.ecRoot)),
                    ecIntermediate: Certificate(pemEncoded: read(files.ecIntermediate)),
                    ecLeaf: Certificate(pemEncoded: read(files.ecLeaf)),
                    ecLeafKey: P256.Signing.PrivateKey(pemRepresentation: read(files.ecLeafKey)))
            } catch let error as AppleSimulatorError {
                throw error
            } catch {
                throw AppleSimulatorError(
                    .stateDirectory, "the PKI files in \(directory.path) are unreadable (\(type(of: error)))")
            }
        }
        let pki = try generate(now: now)
        func write(_ text: String, _ name: String, secret: Bool = false) throws {
            let attributes: [FileAttributeKey: Any]? = secret ? [.posixPermissions: 0o600] : nil
            // swift-certificates and swift-crypto end their PEM without a newline: two such files concatenated
            // (`cat root-a.pem root-b.pem`) join an END line to the next BEGIN line, which no PEM reader accepts.
            let line = text.hasSuffix("\n") ? text : text + "\n"
            guard fm.createFile(atPath: path(name), contents: Data(line.utf8), attributes: attributes) else {
                throw AppleSimulatorError(.stateDirectory, "cannot write \(path(name))")
            }
        }
        try write(pki.rsaRoot.serializeAsPEM().pemString, files.rsaRoot)
        try write(pki.rsaIntermediate.serializeAsPEM().pemString, files.rsaIntermediate)
        try write(pki.rsaLeaf.serializeAsPEM().pemString, files.rsaLeaf)
        try write(pki.rsaLeafKey.pemRepresentation, files.rsaLeafKey, secret: true)
        try write(pki.ecRoot.serializeAsPEM().pemString, files.ecRoot)
        try write(pki.ecIntermediate.serializeAsPEM().pemString, files.ecIntermediate)
        try write(pki.ecLeaf.serializeAsPEM().pemString, files.ecLeaf)
        try write(pki.ecLeafKey.pemRepresentation, files.ecLeafKey, secret: true)
        return pki
    }

    // MARK: Helpers

    private enum Role { case root, intermediate, leaf }

    private static func name(_ commonName: String, unit: String) throws -> DistinguishedName {
        try DistinguishedName {
            CommonName(commonName)
            OrganizationalUnitName(unit)
            OrganizationName("verify-worker Apple simulator (not Apple)")
            CountryName("US")
        }
    }

    private static func issue(
        serial: Int,
        subject: DistinguishedName,
        publicKey: Certificate.PublicKey,
        issuer: DistinguishedName,
        issuerPublicKey: Certificate.PublicKey,
        issuerKey: Certificate.PrivateKey,
        role: Role,
        algorithm: Certificate.SignatureAlgorithm,
        notBefore: Date,
        notAfter: Date
    ) throws -> Certificate {
        let marker: ASN1ObjectIdentifier? =
            switch role {
            case .root: nil
            case .intermediate: intermediateMarkerOID
            case .leaf: leafMarkerOID
            }
        let isCA = role != .leaf
        let extensions = try Certificate.Extensions {
            if isCA {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            } else {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
            }
            SubjectKeyIdentifier(hash: publicKey)
            AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: issuerPublicKey).keyIdentifier)
            if let marker {
                // Apple's marker extensions carry an ASN.1 NULL.
                Certificate.Extension(oid: marker, critical: false, value: [0x05, 0x00])
            }
        }
        return try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(serial),
            publicKey: publicKey,
            notValidBefore: notBefore,
            notValidAfter: notAfter,
            issuer: issuer,
            subject: subject,
            signatureAlgorithm: algorithm,
            extensions: extensions,
            issuerPrivateKey: issuerKey)
    }

    static func der(_ certificate: Certificate) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return serializer.serializedBytes
    }
}
