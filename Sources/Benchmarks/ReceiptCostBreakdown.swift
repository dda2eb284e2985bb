import Crypto
import Foundation
import Receipts
import SwiftASN1
import X509

/// Microseconds per call of the steps a receipt's analysis is made of, each measured alone on the calling thread:
/// the floor the benchmark's figures are read against (a cold JWS chain cannot cost less than its ECDSA checks).
/// Used by `bench receipts`. It reads Receipts' parsers through their `package` access: the benchmark sits in the
/// harness, and the parsers stay out of Receipts' public API.
enum ReceiptCostBreakdown {
    /// Steps of a JWS: its ES256 check, the P-384 check of its leaf by Apple's intermediate, parsing a leaf
    /// certificate, decoding the header and the payload.
    static func jws(_ input: [UInt8], seconds: Double) -> [String: Double] {
        var result: [String: Double] = [:]
        guard let text = try? ReceiptInput.normalize(input), let jws = try? JWS(text: text),
            let header = try? jws.header(), let x5c = header.x5c, x5c.count >= 2,
            let leafDER = Base64.decode(x5c[0].utf8), let issuerDER = Base64.decode(x5c[1].utf8),
            let leaf = try? Certificate(derEncoded: leafDER), let issuer = try? Certificate(derEncoded: issuerDER),
            let key = P256.Signing.PublicKey(leaf.publicKey),
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: jws.signature)
        else { return result }
        let digest = SHA256.hash(data: jws.signingInput)
        result["jws_es256_verify"] = microseconds(seconds) { key.isValidSignature(signature, for: digest) ? 1 : 0 }
        result["jws_leaf_certificate_signature_verify_by_intermediate"] = microseconds(seconds) {
            issuer.publicKey.isValidSignature(leaf.signature, for: leaf) ? 1 : 0
        }
        result["x509_parse_leaf_certificate"] = microseconds(seconds) {
            (try? Certificate(derEncoded: leafDER)) == nil ? 0 : 1
        }
        result["jws_header_decode"] = microseconds(seconds) { (try? jws.header())?.x5c?.count ?? 0 }
        result["jws_split_and_payload_decode"] = microseconds(seconds) { (try? JWS(text: text))?.signature.count ?? 0 }
        return result
    }

    /// Steps of an app receipt: base64, the CMS and payload parse, the digest over the payload, the RSA check.
    static func appReceipt(_ text: [UInt8], seconds: Double) -> [String: Double] {
        var result: [String: Double] = [:]
        guard let bytes = try? ReceiptInput.normalize(text), let receipt = try? AppReceipt(bytes: bytes) else {
            return result
        }
        result["input_base64_decode"] = microseconds(seconds) { (try? ReceiptInput.normalize(text))?.count ?? 0 }
        result["cms_and_payload_parse"] = microseconds(seconds) {
            (try? AppReceipt(bytes: bytes))?.payload.count ?? 0
        }
        let payload = receipt.payload
        result["payload_digest"] = microseconds(seconds) {
            receipt.signing.digest == .sha1
                ? Int(Insecure.SHA1.hash(data: payload).first { _ in true } ?? 0)
                : Int(SHA256.hash(data: payload).first { _ in true } ?? 0)
        }
        result["payload_bytes"] = Double(payload.count)
        return result
    }

    /// Mean microseconds per call of `body` over about `seconds`; its result is folded in so the work stays.
    private static func microseconds(_ seconds: Double, _ body: () -> Int) -> Double {
        let clock = ContinuousClock()
        let budget = Duration.milliseconds(Int64(max(seconds, 0.05) * 1000))
        var calls = 0
        var sink = 0
        let started = clock.now
        var elapsed = Duration.zero
        while elapsed < budget {
            for _ in 0..<8 { sink &+= body() }
            calls += 8
            elapsed = started.duration(to: clock.now)
        }
        let total = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        return sink == Int.min ? 0 : (total / Double(calls) * 1e6 * 100).rounded() / 100
    }
}
