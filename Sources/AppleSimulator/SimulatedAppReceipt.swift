import Crypto
import Foundation
import Messages
import SwiftASN1
import X509
import _CryptoExtras

/// A PKCS#7 app receipt with Apple's real layout:
///
/// ```
/// ContentInfo { signedData,
///   SignedData { version 1, digestAlgorithms { sha256 },
///     encapContentInfo { data, [0] OCTET STRING (payload) },
///     certificates [0] { leaf, intermediate },
///     signerInfos { SignerInfo { version 1, issuerAndSerialNumber, sha256,
///                               sha256WithRSAEncryption, signature } } } }
/// payload = SET OF ReceiptAttribute ::= SEQUENCE { type INTEGER, version INTEGER, value OCTET STRING }
/// ```
///
/// As in Apple's receipts there are no signed attributes: the PKCS#1 v1.5 signature covers the payload bytes.
struct SimulatedAppReceipt: Sendable, Equatable {
    var environment: AppleEnvironment
    var bundleId: String
    var appVersion: String
    var originalAppVersion: String
    var creationDateMs: Int64
    var opaque: [UInt8]
    var sha1Hash: [UInt8]
    /// In purchase order.
    var purchases: [SimulatedTransaction]

    /// Attribute types (Apple's "Receipt Fields").
    enum Field {
        static let environment = 0
        static let bundleId = 2
        static let appVersion = 3
        static let opaque = 4
        static let sha1Hash = 5
        static let creationDate = 12
        static let inApp = 17
        static let originalAppVersion = 19
        static let quantity = 1701
        static let productId = 1702
        static let transactionId = 1703
        static let purchaseDate = 1704
        static let originalTransactionId = 1705
        static let originalPurchaseDate = 1706
        static let expiresDate = 1708
        static let webOrderLineItemId = 1711
        static let cancellationDate = 1712
    }

    enum OID {
        static let signedData: ASN1ObjectIdentifier = "1.2.840.113549.1.7.2"
        static let data: ASN1ObjectIdentifier = "1.2.840.113549.1.7.1"
        static let sha256: ASN1ObjectIdentifier = "2.16.840.1.101.3.4.2.1"
        static let sha256WithRSA: ASN1ObjectIdentifier = "1.2.840.113549.1.1.11"
    }

    // MARK: Encoding

    /// The DER payload (the SET of attributes).
    func payloadDER() throws -> [UInt8] {
        var attributes: [[UInt8]] = [
            try attribute(Field.environment, utf8(environment.receiptType)),
            try attribute(Field.bundleId, utf8(bundleId)),
            try attribute(Field.appVersion, utf8(appVersion)),
            try attribute(Field.opaque, opaque),
            try attribute(Field.sha1Hash, sha1Hash),
            try attribute(Field.creationDate, ia5(AppleDates.rfc3339(creationDateMs))),
            try attribute(Field.originalAppVersion, utf8(originalAppVersion)),
        ]
        for purchase in purchases {
            var fields: [[UInt8]] = [
                try attribute(Field.quantity, der { try $0.serialize(purchase.quantity) }),
                try attribute(Field.productId, utf8(purchase.productId)),
                try attribute(Field.transactionId, utf8(purchase.transactionId)),
                try attribute(Field.purchaseDate, ia5(AppleDates.rfc3339(purchase.purchaseDateMs))),
                try attribute(Field.originalTransactionId, utf8(purchase.originalTransactionId)),
                try attribute(Field.originalPurchaseDate, ia5(AppleDates.rfc3339(purchase.originalPurchaseDateMs))),
                try attribute(Field.expiresDate, ia5(purchase.expiresDateMs.map(AppleDates.rfc3339) ?? "")),
                try attribute(Field.cancellationDate, ia5("")),
            ]
            if let wolii = purchase.webOrderLineItemId, let number = Int64(wolii) {
                fields.append(try attribute(Field.webOrderLineItemId, der { try $0.serialize(number) }))
            }
            let inApp = try der { serializer in
                serializer.appendConstructedNode(identifier: .set) { $0.serializedBytesAppend(fields) }
            }
            attributes.append(try attribute(Field.inApp, inApp))
        }
        return try der { serializer in
            serializer.appendConstructedNode(identifier: .set) { $0.serializedBytesAppend(attributes) }
        }
    }

    /// The signed ContentInfo, DER.
    func signedDER(pki: SimulatorPKI) throws -> [UInt8] {
        let payload = try payloadDER()
        let signature = try pki.rsaLeafKey.signature(for: payload, padding: .insecurePKCS1v1_5)
        return try Self.contentInfoDER(payload: payload[...], signature: Array(signature.rawRepresentation), pki: pki)
    }

    /// The ContentInfo around a payload and its signature.
    static func contentInfoDER(payload: ArraySlice<UInt8>, signature: [UInt8], pki: SimulatorPKI) throws -> [UInt8] {
        let leaf = pki.rsaLeaf
        return try der { serializer in
            try serializer.appendConstructedNode(identifier: .sequence) { contentInfo in
                try contentInfo.serialize(OID.signedData)
                try contentInfo.appendConstructedNode(identifier: .explicitZero) { explicit in
                    try explicit.appendConstructedNode(identifier: .sequence) { signedData in
                        try signedData.serialize(1)
                        try signedData.appendConstructedNode(identifier: .set) { try algorithm(OID.sha256, &$0) }
                        try signedData.appendConstructedNode(identifier: .sequence) { encap in
                            try encap.serialize(OID.data)
                            try encap.appendConstructedNode(identifier: .explicitZero) {
                                try $0.serialize(ASN1OctetString(contentBytes: payload[...]))
                            }
                        }
                        signedData.appendConstructedNode(identifier: .explicitZero) {
                            $0.serializedBytesAppend(pki.rsaChainDER)
                        }
                        try signedData.appendConstructedNode(identifier: .set) { signerInfos in
                            try signerInfos.appendConstructedNode(identifier: .sequence) { signerInfo in
                                try signerInfo.serialize(1)
                                try signerInfo.appendConstructedNode(identifier: .sequence) { sid in
                                    try sid.serialize(leaf.issuer)
                                    sid.appendPrimitiveNode(identifier: .integer) {
                                        $0.append(contentsOf: leaf.serialNumber.bytes)
                                    }
                                }
                                try algorithm(OID.sha256, &signerInfo)
                                try algorithm(OID.sha256WithRSA, &signerInfo)
                                try signerInfo.serialize(
                                    ASN1OctetString(contentBytes: signature[...]))
                            }
                        }
                    }
                }
            }
        }
    }

    // MARK: Decoding

    /// Why a receipt could not be decoded: not a receipt at all (21002), or a well-formed receipt that this
    /// simulator did not sign (21003).
    enum DecodeFailure: Error, Equatable {
        case malformed
        case notSignedBySimulator
    }

    /// Decodes a DER app receipt and checks the simulator's signature over its payload. Stateless: only the
    /// leaf public key is needed, so receipts minted before a restart (with a state directory) still verify.
    static func decode(_ bytes: [UInt8], pki: SimulatorPKI) throws(DecodeFailure) -> Self {
        let leafPublicKey = pki.rsaLeafKey.publicKey
        let parts: (payload: ArraySlice<UInt8>, signature: ArraySlice<UInt8>, hasSignedAttributes: Bool)
        do {
            parts = try signedParts(DER.parse(bytes))
        } catch {
            // Real Apple and Xcode receipts may be BER (indefinite lengths): well-formed, but not ours.
            if let node = try? BER.parse(bytes), (try? isSignedDataContentInfo(node)) == true {
                throw .notSignedBySimulator
            }
            throw .malformed
        }
        guard !parts.hasSignedAttributes,
            leafPublicKey.isValidSignature(
                _RSA.Signing.RSASignature(rawRepresentation: parts.signature), for: parts.payload,
                padding: .insecurePKCS1v1_5)
        else {
            throw .notSignedBySimulator
        }
        // Everything outside the signed payload (algorithms, certificates, signer id) must be exactly what this
        // simulator writes, as Apple checks the whole structure and its chain.
        guard (try? contentInfoDER(payload: parts.payload, signature: Array(parts.signature), pki: pki)) == bytes
        else { throw .notSignedBySimulator }
        do {
            return try decodePayload(parts.payload)
        } catch {
            throw .malformed
        }
    }

    private static func isSignedDataContentInfo(_ node: ASN1Node) throws -> Bool {
        let nodes = try children(node)
        guard let first = nodes.first else { return false }
        return try ASN1ObjectIdentifier(berEncoded: first) == OID.signedData
    }

    private static func signedParts(
        _ root: ASN1Node
    ) throws -> (payload: ArraySlice<UInt8>, signature: ArraySlice<UInt8>, hasSignedAttributes: Bool) {
        let contentInfo = try children(root)
        guard contentInfo.count == 2, try ASN1ObjectIdentifier(derEncoded: contentInfo[0]) == OID.signedData,
            let signedDataNode = try children(contentInfo[1]).first
        else { throw ASN1Error.invalidASN1Object(reason: "not a PKCS#7 signedData ContentInfo") }
        let signedData = try children(signedDataNode)
        guard signedData.count >= 4, let signerInfosNode = signedData.last else {
            throw ASN1Error.invalidASN1Object(reason: "short SignedData")
        }
        let encap = try children(signedData[2])
        guard encap.count == 2, try ASN1ObjectIdentifier(derEncoded: encap[0]) == OID.data,
            let octets = try children(encap[1]).first
        else { throw ASN1Error.invalidASN1Object(reason: "no encapsulated data") }
        let payload = try ASN1OctetString(derEncoded: octets).bytes
        guard let signerInfoNode = try children(signerInfosNode).first else {
            throw ASN1Error.invalidASN1Object(reason: "no signer")
        }
        let signerInfo = try children(signerInfoNode)
        guard let signatureNode = signerInfo.last else { throw ASN1Error.invalidASN1Object(reason: "no signature") }
        let signature = try ASN1OctetString(derEncoded: signatureNode).bytes
        let hasSignedAttributes = signerInfo.contains { $0.identifier == .explicitZero }
        return (payload, signature, hasSignedAttributes)
    }

    private static func decodePayload(_ payload: ArraySlice<UInt8>) throws -> Self {
        var receipt = SimulatedAppReceipt(
            environment: .production, bundleId: "", appVersion: "", originalAppVersion: "", creationDateMs: 0,
            opaque: [], sha1Hash: [], purchases: [])
        for (type, value) in try attributes(DER.parse(payload)) {
            switch type {
            case Field.environment:
                receipt.environment = try string(value) == "Production" ? .production : .sandbox
            case Field.bundleId: receipt.bundleId = try string(value)
            case Field.appVersion: receipt.appVersion = try string(value)
            case Field.originalAppVersion: receipt.originalAppVersion = try string(value)
            case Field.opaque: receipt.opaque = Array(value)
            case Field.sha1Hash: receipt.sha1Hash = Array(value)
            case Field.creationDate: receipt.creationDateMs = try date(value) ?? 0
            case Field.inApp: receipt.purchases.append(try purchase(value, receipt: receipt))
            default: break
            }
        }
        for index in receipt.purchases.indices {
            receipt.purchases[index].bundleId = receipt.bundleId
            receipt.purchases[index].environment = receipt.environment
        }
        return receipt
    }

    private static func purchase(_ bytes: ArraySlice<UInt8>, receipt: Self) throws -> SimulatedTransaction {
        var purchase = SimulatedTransaction(
            transactionId: "", originalTransactionId: "", bundleId: receipt.bundleId, productId: "",
            environment: receipt.environment, quantity: 1, purchaseDateMs: 0, originalPurchaseDateMs: 0,
            expiresDateMs: nil, webOrderLineItemId: nil, productType: "Non-Consumable")
        for (type, value) in try attributes(DER.parse(bytes)) {
            switch type {
            case Field.quantity: purchase.quantity = try Int(derEncoded: DER.parse(value))
            case Field.productId: purchase.productId = try string(value)
            case Field.transactionId: purchase.transactionId = try string(value)
            case Field.originalTransactionId: purchase.originalTransactionId = try string(value)
            case Field.purchaseDate: purchase.purchaseDateMs = try date(value) ?? 0
            case Field.originalPurchaseDate: purchase.originalPurchaseDateMs = try date(value) ?? 0
            case Field.expiresDate: purchase.expiresDateMs = try date(value)
            case Field.webOrderLineItemId:
                purchase.webOrderLineItemId = String(try Int64(derEncoded: DER.parse(value)))
            default: break
            }
        }
        if purchase.expiresDateMs != nil { purchase.productType = "Auto-Renewable Subscription" }
        return purchase
    }

    private static func attributes(_ set: ASN1Node) throws -> [(Int, ArraySlice<UInt8>)] {
        guard set.identifier == .set else { throw ASN1Error.invalidASN1Object(reason: "payload is not a SET") }
        return try children(set).map { node in
            let fields = try children(node)
            guard fields.count == 3 else { throw ASN1Error.invalidASN1Object(reason: "bad receipt attribute") }
            return (try Int(derEncoded: fields[0]), try ASN1OctetString(derEncoded: fields[2]).bytes)
        }
    }

    private static func string(_ bytes: ArraySlice<UInt8>) throws -> String {
        let node = try DER.parse(bytes)
        if node.identifier == .ia5String { return String(try ASN1IA5String(derEncoded: node)) }
        return String(try ASN1UTF8String(derEncoded: node))
    }

    private static func date(_ bytes: ArraySlice<UInt8>) throws -> Int64? {
        let text = try string(bytes)
        return text.isEmpty ? nil : AppleDates.parseRFC3339(text)
    }

    static func children(_ node: ASN1Node) throws -> [ASN1Node] {
        guard case .constructed(let nodes) = node.content else {
            throw ASN1Error.invalidASN1Object(reason: "expected a constructed node")
        }
        return Array(nodes)
    }
}

// MARK: DER helpers

extension ASN1Identifier {
    /// `[0]` constructed, context-specific: PKCS#7's explicit content and implicit certificate set.
    static let explicitZero = ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific)
}

extension DER.Serializer {
    /// Appends complete, already-encoded DER elements verbatim.
    fileprivate mutating func serializedBytesAppend(_ elements: [[UInt8]]) {
        for element in elements { serializeRawBytes(element) }
    }
}

private func der(_ body: (inout DER.Serializer) throws -> Void) throws -> [UInt8] {
    var serializer = DER.Serializer()
    try body(&serializer)
    return serializer.serializedBytes
}

private func utf8(_ text: String) throws -> [UInt8] {
    try der { try $0.serialize(ASN1UTF8String(text)) }
}

private func ia5(_ text: String) throws -> [UInt8] {
    try der { try $0.serialize(ASN1IA5String(text)) }
}

private func attribute(_ type: Int, _ value: [UInt8], version: Int = 1) throws -> [UInt8] {
    try der { serializer in
        try serializer.appendConstructedNode(identifier: .sequence) { sequence in
            try sequence.serialize(type)
            try sequence.serialize(version)
            try sequence.serialize(ASN1OctetString(contentBytes: value[...]))
        }
    }
}

private func algorithm(_ oid: ASN1ObjectIdentifier, _ serializer: inout DER.Serializer) throws {
    try serializer.appendConstructedNode(identifier: .sequence) { sequence in
        try sequence.serialize(oid)
        try sequence.serialize(ASN1Null())
    }
}
