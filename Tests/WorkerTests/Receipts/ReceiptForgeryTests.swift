import Crypto
import Decision
import Foundation
import Messages
import Receipts
import SwiftASN1
import Testing
import X509
import _CryptoExtras

@Suite("Receipts: forged, altered and edge-case inputs")
struct ReceiptForgeryTests {
    static let signedDate = 1_700_000_000_000  // 2023-11-14

    static func transactionPayload(bundle: String = "com.example.app", product: String = "pro.monthly") -> String {
        """
        {"transactionId":"2000000000000001","originalTransactionId":"2000000000000000","bundleId":"\(bundle)",\
        "productId":"\(product)","purchaseDate":1699999999000,"expiresDate":1702592000000,"quantity":1,\
        "type":"Auto-Renewable Subscription","signedDate":\(signedDate),"environment":"Production",\
        "revocationDate":1700000500000,"revocationReason":1}
        """
    }

    @Test("A signed transaction's revocation detail and ownership type are read into the facts")
    func revocationDetail() throws {
        let pki = try ReceiptsTestPKI.make()
        let payload = Self.transactionPayload().replacingOccurrences(
            of: #""revocationReason":1}"#,
            with: #""revocationReason":0,"revocationType":"FAMILY_REVOKE","inAppOwnershipType":"FAMILY_SHARED"}"#)
        let analysis = JudgingAnalyzer(trust: pki.trust, catalog: Self.catalog).analyze(
            Array(try pki.jws(payload: payload).utf8))
        let transaction = try #require(analysis.transactions.first)
        #expect(transaction.revocationType == "FAMILY_REVOKE")
        #expect(transaction.inAppOwnershipType == "FAMILY_SHARED")
        let fact = try #require(analysis.analysis.facts.transactions.first)
        #expect(fact.revocation == Revocation(type: .familyRevoke, reason: 0))
        #expect(fact.ownershipType == .familyShared)
    }

    static let catalog = Catalog(
        bundleIDs: ["com.example.app"], products: [.init(id: "pro.monthly", type: .autoRenewable)])

    @Test("A JWS from a configured test root verifies locally; the chain is cached")
    func validJWS() throws {
        let pki = try ReceiptsTestPKI.make()
        let analyzer = JudgingAnalyzer(trust: pki.trust, catalog: Self.catalog)
        let analysis = analyzer.analyze(Array(try pki.jws(payload: Self.transactionPayload()).utf8))
        #expect(analysis.signature == .valid)
        #expect(analysis.judgement == .locallyVerified)
        let transaction = try #require(analysis.transactions.first)
        #expect(transaction.transactionID == "2000000000000001")
        #expect(transaction.isRevoked)
        #expect(transaction.revocationReason == 1)
        for _ in 0..<5 { _ = analyzer.analyze(Array(try pki.jws(payload: Self.transactionPayload()).utf8)) }
        #expect(analyzer.chains.cachedChainCount == 1)
        // Apple's real roots do not trust it.
        #expect(
            JudgingAnalyzer(trust: .apple).analyze(Array(try pki.jws(payload: Self.transactionPayload()).utf8))
                .signature.code == "untrusted")
    }

    @Test("Catalog decides wrong_bundle and unknown_product")
    func catalogVerdicts() throws {
        let pki = try ReceiptsTestPKI.make()
        let analyzer = JudgingAnalyzer(trust: pki.trust, catalog: Self.catalog)
        let other = analyzer.analyze(Array(try pki.jws(payload: Self.transactionPayload(bundle: "com.other")).utf8))
        #expect(other.judgement == .wrongBundle(bundleID: "com.other"))
        let unknown = analyzer.analyze(Array(try pki.jws(payload: Self.transactionPayload(product: "gems")).utf8))
        #expect(unknown.judgement == .unknownProduct(productIDs: ["gems"]))
        let json = #"{"bundle_ids":["com.example.app"],"products":[{"id":"pro.monthly","type":"auto_renewable"}]}"#
        #expect(try Catalog.load(json: Data(json.utf8)) == Self.catalog)
    }

    @Test("Re-signed by another key, bit-flipped payload, truncated")
    func alteredJWS() throws {
        let pki = try ReceiptsTestPKI.make()
        let analyzer = JudgingAnalyzer(trust: pki.trust)
        let resigned = try pki.jws(payload: Self.transactionPayload(), signer: P256.Signing.PrivateKey())
        #expect(analyzer.analyze(Array(resigned.utf8)).signature.code == "invalid")
        #expect(analyzer.analyze(Array(resigned.utf8)).judgement.code == "not_authenticated")

        let genuine = try pki.jws(payload: Self.transactionPayload())
        var parts = genuine.split(separator: ".").map(String.init)
        let payload = Self.transactionPayload().replacingOccurrences(of: "2000000000000001", with: "2000000000000009")
        parts[1] = ReceiptsTestPKI.base64URL(Array(payload.utf8))
        let altered = analyzer.analyze(Array(parts.joined(separator: ".").utf8))
        #expect(altered.signature.code == "invalid")
        #expect(altered.transactions.first?.transactionID == "2000000000000009")

        let truncated = analyzer.analyze(Array(genuine.utf8.prefix(genuine.utf8.count / 2)))
        #expect(truncated.signature.code != "valid")
    }

    @Test("Missing marker OIDs on leaf or intermediate are rejected")
    func wrongOIDs() throws {
        let noLeafMarker = try ReceiptsTestPKI.make(leafMarker: false)
        let leafResult = JudgingAnalyzer(trust: noLeafMarker.trust)
            .analyze(Array(try noLeafMarker.jws(payload: Self.transactionPayload()).utf8))
        #expect(leafResult.signature.code == "invalid")
        #expect(leafResult.signature.reason?.contains("6.11.1") == true)

        let noIntermediateMarker = try ReceiptsTestPKI.make(intermediateMarker: false)
        let intermediateResult = JudgingAnalyzer(trust: noIntermediateMarker.trust)
            .analyze(Array(try noIntermediateMarker.jws(payload: Self.transactionPayload()).utf8))
        #expect(intermediateResult.signature.code == "invalid")
        #expect(intermediateResult.signature.reason?.contains("6.2.1") == true)
    }

    @Test("A leaf expired at signing time is invalid even though the signature is right")
    func expiredAtSigning() throws {
        let pki = try ReceiptsTestPKI.make(
            leafValidity: Date(timeIntervalSince1970: 1_577_836_800)...Date(timeIntervalSince1970: 1_600_000_000))
        let analysis = JudgingAnalyzer(trust: pki.trust).analyze(
            Array(try pki.jws(payload: Self.transactionPayload()).utf8))
        #expect(analysis.signature.code == "invalid")
        #expect(analysis.signature.reason?.contains("expired") == true)
    }

    @Test("Notification with nested signed transaction and renewal info")
    func notification() throws {
        let pki = try ReceiptsTestPKI.make()
        let transaction = try pki.jws(payload: Self.transactionPayload())
        let renewal = try pki.jws(
            payload:
                #"{"originalTransactionId":"2000000000000000","productId":"pro.monthly","autoRenewStatus":1,"signedDate":1700000000000,"environment":"Production"}"#
        )
        let notification = try pki.jws(
            payload: """
                {"notificationType":"DID_RENEW","subtype":"BILLING_RECOVERY","notificationUUID":"u-1","signedDate":1700000000000,\
                "data":{"bundleId":"com.example.app","environment":"Production","signedTransactionInfo":"\(transaction)",\
                "signedRenewalInfo":"\(renewal)"}}
                """)
        let analysis = JudgingAnalyzer(trust: pki.trust, catalog: Self.catalog).analyze(Array(notification.utf8))
        #expect(analysis.format == .notification)
        #expect(analysis.notification?.notificationType == "DID_RENEW")
        #expect(analysis.notification?.subtype == "BILLING_RECOVERY")
        #expect(analysis.signature == .valid)
        #expect(analysis.transactions.first?.transactionID == "2000000000000001")
        #expect(analysis.renewalInfo?.autoRenewStatus == 1)
        #expect(analysis.judgement == .locallyVerified)
        #expect(analysis.analysis.jsonText().contains("\"notification_type\" : \"DID_RENEW\""))

        let forgedInner = try pki.jws(payload: Self.transactionPayload(), signer: P256.Signing.PrivateKey())
        let forged = try pki.jws(
            payload: """
                {"notificationType":"DID_RENEW","signedDate":1700000000000,\
                "data":{"bundleId":"com.example.app","environment":"Production","signedTransactionInfo":"\(forgedInner)"}}
                """)
        #expect(JudgingAnalyzer(trust: pki.trust).analyze(Array(forged.utf8)).signature.code == "invalid")
    }

    @Test("PKCS#7 from a configured RSA chain: valid, re-signed, altered, expired")
    func pkcs7() throws {
        let pki = try ReceiptsTestPKI.make(rsa: true)
        let analyzer = JudgingAnalyzer(trust: pki.trust, catalog: Self.catalog)
        let payload = ReceiptsTestPKI.payload(
            bundleID: "com.example.app", created: "2023-11-14T22:13:20Z",
            purchases: [("1000000000000001", "pro.monthly"), ("1000000000000002", "pro.monthly")])
        let receipt = try pki.pkcs7(payload: payload)
        let analysis = analyzer.analyze(Array(Data(receipt).base64EncodedString().utf8))
        #expect(analysis.format == .appReceipt)
        #expect(analysis.signature == .valid)
        #expect(analysis.environment == .sandbox)
        #expect(analysis.transactions.map(\.transactionID) == ["1000000000000001", "1000000000000002"])
        #expect(analysis.transactions.allSatisfy { $0.cancellationDate == nil && $0.quantity == 1 })
        #expect(analysis.judgement.code == "needs_apple")

        let resigned = try pki.pkcs7(payload: payload, signer: try ReceiptsTestPKI.newRSAKey())
        #expect(analyzer.analyze(resigned).signature.code == "invalid")
        #expect(analyzer.analyze(resigned).judgement.code == "not_authenticated")

        var flipped = receipt
        let transactionOffset = try #require(receipt.firstRange(of: Array("1000000000000002".utf8))).upperBound - 1
        flipped[transactionOffset] ^= 0x01
        #expect(analyzer.analyze(flipped).signature.code == "invalid")

        // A receipt altered into another app's is rejected as such without spending a signature check on it.
        var otherApp = receipt
        let bundleOffset = try #require(receipt.firstRange(of: Array("com.example.app".utf8))).lowerBound
        otherApp[bundleOffset] ^= 0x01
        #expect(analyzer.analyze(otherApp).signature.code == "not_checked")
        #expect(analyzer.analyze(otherApp).judgement.code == "wrong_bundle")

        // Raw DER whose last signature byte looks like whitespace or NUL is still read whole (not trimmed).
        for lastByte: UInt8 in [0x00, 0x09, 0x0A, 0x0D, 0x20] {
            var raw = receipt
            raw[raw.count - 1] = lastByte
            let analysis = analyzer.analyze(raw)
            #expect(analysis.format == .appReceipt)
            #expect(analysis.signature.code == "invalid" || analysis.signature == .valid)
        }

        for length in [10, receipt.count / 3, receipt.count - 5] {
            #expect(analyzer.analyze(Array(receipt.prefix(length))).format == .unknown)
        }

        let expired = try ReceiptsTestPKI.make(
            rsa: true,
            leafValidity: Date(timeIntervalSince1970: 1_577_836_800)...Date(timeIntervalSince1970: 1_600_000_000))
        let late = JudgingAnalyzer(trust: expired.trust).analyze(try expired.pkcs7(payload: payload))
        #expect(late.signature.code == "invalid")
        #expect(late.signature.reason?.contains("expired") == true)
    }

    @Test("Oversized input is rejected before decoding")
    func oversized() {
        let big = [UInt8](repeating: UInt8(ascii: "A"), count: 2 << 20)
        // 2 MiB of text is refused from its length alone (no scan, no decode).
        #expect(throws: ReceiptInput.Rejection.tooLarge(decodedSize: 1_572_864, limit: 1 << 20)) {
            try ReceiptInput.normalize(big)
        }
        let analysis = ReceiptsTestSupport.analyzer.analyze(big)
        #expect(analysis.format == .unknown)
        #expect(analysis.unknownReason?.contains("too large") == true)
        let small = JudgingAnalyzer(policy: AnalysisPolicy(maximumDecodedSize: 1000))
        #expect(small.analyze(Array(repeating: 0x30, count: 2000)).unknownReason?.contains("too large") == true)
    }
}
