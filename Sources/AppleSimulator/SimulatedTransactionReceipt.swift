import Crypto
import Foundation
import Messages
import _CryptoExtras

/// An iOS 6 style transaction receipt: base64 of an OpenStep-style dictionary
///
/// ```
/// {
/// 	"signature" = "<base64 signature blob>";
/// 	"purchase-info" = "<base64 of the purchase-info dictionary>";
/// 	"environment" = "Sandbox";        (absent in production)
/// 	"pod" = "100";
/// 	"signing-status" = "0";
/// }
/// ```
///
/// The signature blob has the layout of Apple's version 3 blobs: one version byte (3), a 256-byte RSA
/// PKCS#1 v1.5 signature, a 4-byte big-endian certificate length and the DER signing certificate (the
/// simulator's RSA leaf). The signature covers the version byte followed by the decoded purchase-info bytes
/// (SHA-256), so it can be checked with nothing but the leaf's public key. As with Apple, the outer
/// `environment` key is not covered by the signature.
enum SimulatedTransactionReceipt {
    static let signatureVersion: UInt8 = 3
    static let signatureLength = 256

    /// The keys and values of the purchase-info dictionary, in Apple's order.
    static func purchaseInfo(_ transaction: SimulatedTransaction) -> [(String, String)] {
        var fields: [(String, String)] = [
            ("original-purchase-date-pst", AppleDates.pst(transaction.originalPurchaseDateMs)),
            ("purchase-date-ms", String(transaction.purchaseDateMs)),
            ("unique-identifier", uniqueIdentifier(transaction)),
            ("original-transaction-id", transaction.originalTransactionId),
        ]
        if let expires = transaction.expiresDateMs { fields.append(("expires-date", String(expires))) }
        fields += [
            ("transaction-id", transaction.transactionId),
            ("original-purchase-date-ms", String(transaction.originalPurchaseDateMs)),
        ]
        if let wolii = transaction.webOrderLineItemId { fields.append(("web-order-line-item-id", wolii)) }
        fields += [
            ("bvrs", "1"),
            ("unique-vendor-identifier", vendorIdentifier(transaction)),
        ]
        if let expires = transaction.expiresDateMs {
            fields.append(("expires-date-formatted-pst", AppleDates.pst(expires)))
        }
        fields.append(("item-id", itemId(transaction.productId)))
        if let expires = transaction.expiresDateMs {
            fields.append(("expires-date-formatted", AppleDates.gmt(expires)))
        }
        fields += [
            ("product-id", transaction.productId),
            ("purchase-date", AppleDates.gmt(transaction.purchaseDateMs)),
            ("original-purchase-date", AppleDates.gmt(transaction.originalPurchaseDateMs)),
            ("bid", transaction.bundleId),
            ("purchase-date-pst", AppleDates.pst(transaction.purchaseDateMs)),
            ("quantity", String(transaction.quantity)),
        ]
        return fields
    }

    /// The base64 receipt for `transaction`, signed by the simulator's RSA leaf.
    static func encode(_ transaction: SimulatedTransaction, pki: SimulatorPKI) throws -> String {
        let info = Array(openStep(purchaseInfo(transaction)).utf8)
        let message = [signatureVersion] + info
        let signature = try pki.rsaLeafKey.signature(for: message, padding: .insecurePKCS1v1_5).rawRepresentation
        let certificate = pki.rsaLeafDER
        var blob = [signatureVersion]
        blob += signature
        let length = UInt32(certificate.count)
        blob += [UInt8(length >> 24), UInt8((length >> 16) & 0xff), UInt8((length >> 8) & 0xff), UInt8(length & 0xff)]
        blob += certificate
        var outer: [(String, String)] = [
            ("signature", Data(blob).base64EncodedString()),
            ("purchase-info", Data(info).base64EncodedString()),
        ]
        if transaction.environment == .sandbox { outer.append(("environment", "Sandbox")) }
        outer += [("pod", "100"), ("signing-status", "0")]
        return Data(openStep(outer).utf8).base64EncodedString()
    }

    /// A decoded, signature-checked receipt.
    struct Decoded: Sendable {
        var transaction: SimulatedTransaction
        /// The purchase-info dictionary as signed (the `receipt` object of a verifyReceipt answer, with `-`
        /// turned into `_`).
        var purchaseInfo: [(String, String)]
    }

    /// Decodes `bytes` (the base64-decoded receipt) and checks the simulator's signature.
    static func decode(
        _ bytes: [UInt8], pki: SimulatorPKI
    ) throws(SimulatedAppReceipt.DecodeFailure) -> Decoded {
        let leafPublicKey = pki.rsaLeafKey.publicKey
        guard let text = String(validating: bytes, as: UTF8.self), let outer = parseOpenStep(text),
            let signatureText = value("signature", in: outer), let infoText = value("purchase-info", in: outer),
            let blob = Data(base64Encoded: signatureText), let infoData = Data(base64Encoded: infoText),
            let infoString = String(validating: Array(infoData), as: UTF8.self),
            let info = parseOpenStep(infoString)
        else { throw .malformed }
        let blobBytes = Array(blob)
        guard blobBytes.count > 1 + signatureLength + 4, blobBytes[0] == signatureVersion else {
            throw .notSignedBySimulator
        }
        let signature = _RSA.Signing.RSASignature(rawRepresentation: blobBytes[1...signatureLength])
        let message = [signatureVersion] + Array(infoData)
        guard leafPublicKey.isValidSignature(signature, for: message, padding: .insecurePKCS1v1_5) else {
            throw .notSignedBySimulator
        }
        // The blob must carry this simulator's leaf, and the outer dictionary must be exactly what it writes.
        let certificate = blobBytes.dropFirst(1 + signatureLength + 4)
        guard certificate.elementsEqual(pki.rsaLeafDER) else { throw .notSignedBySimulator }
        let environment: AppleEnvironment = value("environment", in: outer) == "Sandbox" ? .sandbox : .production
        var expectedOuter = [("signature", signatureText), ("purchase-info", infoText)]
        if environment == .sandbox { expectedOuter.append(("environment", "Sandbox")) }
        expectedOuter += [("pod", "100"), ("signing-status", "0")]
        guard openStep(expectedOuter) == text else { throw .malformed }
        func field(_ key: String) -> String? { value(key, in: info) }
        guard let transactionId = field("transaction-id"), let productId = field("product-id"),
            let bundleId = field("bid"), let purchaseMs = field("purchase-date-ms").flatMap({ Int64($0) })
        else { throw .malformed }
        let expires = field("expires-date").flatMap { Int64($0) }
        let transaction = SimulatedTransaction(
            transactionId: transactionId,
            originalTransactionId: field("original-transaction-id") ?? transactionId,
            bundleId: bundleId,
            productId: productId,
            environment: environment,
            quantity: field("quantity").flatMap { Int($0) } ?? 1,
            purchaseDateMs: purchaseMs,
            originalPurchaseDateMs: field("original-purchase-date-ms").flatMap { Int64($0) } ?? purchaseMs,
            expiresDateMs: expires,
            webOrderLineItemId: field("web-order-line-item-id"),
            productType: expires == nil ? "Non-Consumable" : "Auto-Renewable Subscription")
        return Decoded(transaction: transaction, purchaseInfo: info)
    }

    // MARK: OpenStep text

    static func openStep(_ fields: [(String, String)]) -> String {
        var text = "{\n"
        for (key, value) in fields { text += "\t\"\(key)\" = \"\(value)\";\n" }
        return text + "}"
    }

    /// Parses the flat `"key" = "value";` dictionaries Apple writes (one pair per line). Nil when the text is
    /// not such a dictionary.
    static func parseOpenStep(_ text: String) -> [(String, String)]? {
        let lines = text.split(whereSeparator: { $0 == "\n" || $0 == "\r" })
        guard lines.first?.trimmingCharacters(in: .whitespaces) == "{",
            lines.last?.trimmingCharacters(in: .whitespaces) == "}"
        else { return nil }
        var fields: [(String, String)] = []
        for line in lines.dropFirst().dropLast() {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard trimmed.hasPrefix("\""), trimmed.hasSuffix("\";"),
                let separator = trimmed.range(of: "\" = \"")
            else { return nil }
            let key = trimmed[trimmed.index(after: trimmed.startIndex)..<separator.lowerBound]
            let value = trimmed[separator.upperBound..<trimmed.index(trimmed.endIndex, offsetBy: -2)]
            fields.append((String(key), String(value)))
        }
        return fields
    }

    static func value(_ key: String, in fields: [(String, String)]) -> String? {
        fields.first { $0.0 == key }?.1
    }

    // MARK: Stable synthetic identifiers

    private static func uniqueIdentifier(_ transaction: SimulatedTransaction) -> String {
        hex(Insecure.SHA1.hash(data: Array("device:\(transaction.originalTransactionId)".utf8)))
    }

    private static func vendorIdentifier(_ transaction: SimulatedTransaction) -> String {
        let digest = Array(SHA256.hash(data: Array("vendor:\(transaction.bundleId)".utf8)))
        let h = hex(digest).uppercased()
        let c = Array(h)
        return [c[0..<8], c[8..<12], c[12..<16], c[16..<20], c[20..<32]].map { String($0) }.joined(separator: "-")
    }

    static func itemId(_ productId: String) -> String {
        let digest = Array(SHA256.hash(data: Array(productId.utf8)))
        let number = digest.prefix(4).reduce(UInt32(0)) { ($0 << 8) | UInt32($1) }
        return String(1_000_000_000 + UInt64(number % 900_000_000))
    }

    private static func hex<D: Sequence>(_ bytes: D) -> String where D.Element == UInt8 {
        bytes.map { String(format: "%02x", $0) }.joined()
    }
}
