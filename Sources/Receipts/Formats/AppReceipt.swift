import Foundation
import Messages

/// A PKCS#7 (CMS SignedData) app receipt, read from BER or DER. What its payload says (`bundleID`, `transactions`, …)
/// reads as its own members: one ``AppReceiptPayloadScanner/Fields`` for both readers of the payload.
@dynamicMemberLookup
package struct AppReceipt {
    /// The CMS parts the signature check needs, as ranges into the receipt bytes.
    package struct Signing {
        /// The encoded certificates of the SignedData `certificates` set, in order.
        var certificates: [ArraySlice<UInt8>]
        /// The signer's `issuerAndSerialNumber` (or subject key identifier), encoded.
        var signerIdentifier: ArraySlice<UInt8>
        package var digest: DigestAlgorithm
        /// The signed attributes' contents, if present; the signature then covers them re-tagged as a SET.
        var signedAttributes: ArraySlice<UInt8>?
        /// The messageDigest signed attribute, if present.
        var messageDigest: ArraySlice<UInt8>?
        var signature: ArraySlice<UInt8>
    }

    package enum DigestAlgorithm: Sendable {
        case sha1
        case sha256
    }

    package var signing: Signing
    /// The payload: the eContent OCTET STRING's value.
    package var payload: ArraySlice<UInt8>
    var fields = AppReceiptPayloadScanner.Fields()

    package subscript<Value>(dynamicMember field: KeyPath<AppReceiptPayloadScanner.Fields, Value>) -> Value {
        fields[keyPath: field]
    }

    /// True when the bytes start like a DER/BER SEQUENCE holding the signedData OID: cheap format detection.
    static func looksLikePKCS7(_ bytes: [UInt8]) -> Bool {
        guard bytes.count > 16, bytes[0] == BERTag.sequence else { return false }
        // The OID follows the outer header (2 to 6 bytes).
        let window = bytes[2..<min(bytes.count, 8 + KnownOID.signedData.count)]
        return window.firstRange(of: KnownOID.signedData) != nil
    }

    /// Parses the CMS envelope and the receipt payload. Throws `BERError` on any structural problem.
    package init(bytes: [UInt8]) throws {
        let reader = BERReader(bytes)
        let contentInfo = try reader.element(at: 0, limit: bytes.count)
        guard contentInfo.identifier == BERTag.sequence else {
            throw BERError(reason: "not a SEQUENCE", offset: 0)
        }
        let info = try reader.children(of: contentInfo)
        guard info.count >= 2, info[0].identifier == BERTag.objectIdentifier,
            bytes[info[0].contents].elementsEqual(KnownOID.signedData)
        else { throw BERError(reason: "not a CMS SignedData", offset: contentInfo.contents.lowerBound) }
        guard info[1].identifier == BERTag.context0Constructed else {
            throw BERError(reason: "missing SignedData content", offset: info[1].range.lowerBound)
        }
        let explicit = try reader.children(of: info[1])
        guard let signedData = explicit.first, signedData.identifier == BERTag.sequence else {
            throw BERError(reason: "SignedData is not a SEQUENCE", offset: info[1].contents.lowerBound)
        }
        let fields = try reader.children(of: signedData)
        // version, digestAlgorithms, encapContentInfo, [0] certificates?, [1] crls?, signerInfos
        guard fields.count >= 4, fields[0].identifier == BERTag.integer, fields[1].identifier == BERTag.set,
            fields[2].identifier == BERTag.sequence, let signerInfos = fields.last, signerInfos.identifier == BERTag.set
        else { throw BERError(reason: "malformed SignedData", offset: signedData.range.lowerBound) }

        let encapsulated = try reader.children(of: fields[2])
        guard encapsulated.count == 2, encapsulated[0].identifier == BERTag.objectIdentifier,
            bytes[encapsulated[0].contents].elementsEqual(KnownOID.data),
            encapsulated[1].identifier == BERTag.context0Constructed
        else { throw BERError(reason: "receipt payload missing", offset: fields[2].range.lowerBound) }
        let eContent = try reader.children(of: encapsulated[1])
        guard let octets = eContent.first else {
            throw BERError(reason: "receipt payload missing", offset: encapsulated[1].range.lowerBound)
        }
        payload = try reader.octetString(octets)

        var certificates: [ArraySlice<UInt8>] = []
        for field in fields[3..<(fields.count - 1)] where field.identifier == BERTag.context0Constructed {
            try reader.forEachChild(of: field) { certificate in
                guard certificate.identifier == BERTag.sequence else {
                    throw BERError(reason: "unsupported certificate choice", offset: certificate.range.lowerBound)
                }
                certificates.append(bytes[certificate.range])
            }
        }

        let signers = try reader.children(of: signerInfos)
        guard signers.count == 1, signers[0].identifier == BERTag.sequence else {
            throw BERError(reason: "expected exactly one signer", offset: signerInfos.range.lowerBound)
        }
        let signer = try reader.children(of: signers[0])
        // version, sid, digestAlgorithm, [0] signedAttrs?, signatureAlgorithm, signature, [1] unsignedAttrs?
        guard signer.count >= 5, signer[2].identifier == BERTag.sequence else {
            throw BERError(reason: "malformed SignerInfo", offset: signers[0].range.lowerBound)
        }
        let digestFields = try reader.children(of: signer[2])
        guard let digestOID = digestFields.first, digestOID.identifier == BERTag.objectIdentifier else {
            throw BERError(reason: "malformed digest algorithm", offset: signer[2].range.lowerBound)
        }
        let digest: DigestAlgorithm
        if bytes[digestOID.contents].elementsEqual(KnownOID.sha1) {
            digest = .sha1
        } else if bytes[digestOID.contents].elementsEqual(KnownOID.sha256) {
            digest = .sha256
        } else {
            throw BERError(reason: "unsupported digest algorithm", offset: digestOID.range.lowerBound)
        }
        var index = 3
        var signedAttributes: ArraySlice<UInt8>?
        var messageDigest: ArraySlice<UInt8>?
        if signer[index].identifier == BERTag.context0Constructed {
            signedAttributes = bytes[signer[index].contents]
            try reader.forEachChild(of: signer[index]) { attribute in
                let parts = try reader.children(of: attribute)
                guard parts.count == 2, parts[0].identifier == BERTag.objectIdentifier,
                    bytes[parts[0].contents].elementsEqual(KnownOID.messageDigest)
                else { return }
                let values = try reader.children(of: parts[1])
                if let value = values.first { messageDigest = try reader.octetString(value) }
            }
            index += 1
        }
        guard index + 1 < signer.count, signer[index].identifier == BERTag.sequence else {
            throw BERError(reason: "malformed SignerInfo", offset: signers[0].range.lowerBound)
        }
        let signatureAlgorithm = try reader.children(of: signer[index])
        guard let algorithmOID = signatureAlgorithm.first,
            [KnownOID.rsaEncryption, KnownOID.sha1WithRSA, KnownOID.sha256WithRSA].contains(where: {
                bytes[algorithmOID.contents].elementsEqual($0)
            })
        else { throw BERError(reason: "unsupported signature algorithm", offset: signer[index].range.lowerBound) }
        let signature = try reader.octetString(signer[index + 1])
        signing = Signing(
            certificates: certificates, signerIdentifier: bytes[signer[1].range], digest: digest,
            signedAttributes: signedAttributes, messageDigest: messageDigest, signature: signature)
        try parsePayload()
    }

    /// Reads the payload SET of (type, version, value) attributes and the in-app purchase records: the fast scanner
    /// for definite-length DER, this generic BER reading for anything else.
    private mutating func parsePayload() throws {
        if let fields = AppReceiptPayloadScanner.read(payload) {
            self.fields = fields
            return
        }
        let payloadBytes = Array(payload)
        let reader = BERReader(payloadBytes)
        let set = try reader.element(at: 0, limit: payloadBytes.count)
        guard set.identifier == BERTag.set else { throw BERError(reason: "payload is not a SET", offset: 0) }
        var parsed = AppReceiptPayloadScanner.Fields()
        try Self.forEachAttribute(in: set, reader: reader) { type, value in
            switch type {
            case 0: parsed.environment = Self.string(value, reader).map { ReceiptEnvironmentName.normalized($0) }
            case 2: parsed.bundleID = Self.string(value, reader)
            case 3: parsed.appVersion = Self.string(value, reader)
            case 12: parsed.creationDate = Self.date(value, reader)
            case 19: parsed.originalAppVersion = Self.string(value, reader)
            case 21: parsed.expirationDate = Self.date(value, reader)
            case 17:
                if let transaction = try Self.inAppPurchase(value, reader) { parsed.transactions.append(transaction) }
            default: break
            }
        }
        fields = parsed
    }

    /// Calls `body` with each attribute's type and the range of its value OCTET STRING's contents.
    private static func forEachAttribute(
        in set: BERElement, reader: BERReader, _ body: (Int64, BERElement) throws -> Void
    ) throws {
        try reader.forEachChild(of: set) { attribute in
            guard attribute.identifier == BERTag.sequence else { return }
            // SEQUENCE { type INTEGER, version INTEGER, value OCTET STRING }, read without building an array.
            let end = attribute.contents.upperBound
            let typeElement = try reader.element(at: attribute.contents.lowerBound, limit: end)
            let versionElement = try reader.element(at: typeElement.range.upperBound, limit: end)
            let value = try reader.element(at: versionElement.range.upperBound, limit: end)
            guard value.range.upperBound == end, let type = reader.integer(typeElement),
                value.identifier == BERTag.octetString
            else { return }
            try body(type, value)
        }
    }

    private static func inAppPurchase(_ value: BERElement, _ reader: BERReader) throws -> ReceiptTransaction? {
        let set = try reader.element(at: value.contents.lowerBound, limit: value.contents.upperBound)
        guard set.identifier == BERTag.set else { return nil }
        var transaction = ReceiptTransaction(transactionID: "")
        try forEachAttribute(in: set, reader: reader) { type, value in
            switch type {
            case 1701: transaction.quantity = integer(value, reader).map { Int(clamping: $0) }
            case 1702: transaction.productID = string(value, reader)
            case 1703: transaction.transactionID = string(value, reader) ?? ""
            case 1704: transaction.purchaseDate = date(value, reader)
            case 1705: transaction.originalTransactionID = string(value, reader)
            case 1706: transaction.originalPurchaseDate = date(value, reader)
            case 1708: transaction.expiresDate = date(value, reader)
            case 1711: transaction.webOrderLineItemID = integer(value, reader).map { String($0) }
            case 1712: transaction.cancellationDate = date(value, reader)
            default: break
            }
        }
        return transaction
    }

    /// The string inside an attribute value (UTF8String, IA5String or any string type), or nil.
    private static func string(_ value: BERElement, _ reader: BERReader) -> String? {
        guard let inner = try? reader.element(at: value.contents.lowerBound, limit: value.contents.upperBound),
            !inner.isConstructed, inner.identifier >= 0x0C && inner.identifier <= 0x1E
        else { return nil }
        return String(decoding: reader.bytes[inner.contents], as: UTF8.self)
    }

    private static func integer(_ value: BERElement, _ reader: BERReader) -> Int64? {
        guard let inner = try? reader.element(at: value.contents.lowerBound, limit: value.contents.upperBound) else {
            return nil
        }
        return reader.integer(inner)
    }

    /// An RFC 3339 date held in an IA5String; empty means absent.
    private static func date(_ value: BERElement, _ reader: BERReader) -> Date? {
        guard let inner = try? reader.element(at: value.contents.lowerBound, limit: value.contents.upperBound),
            !inner.isConstructed, !inner.contents.isEmpty
        else { return nil }
        return reader.bytes[inner.contents].withUnsafeBufferPointer { RFC3339.parse($0) }
    }
}
