import Decision
import Foundation
import Messages
import Receipts
import SwiftASN1
import Testing
import X509

/// Helpers shared by the receipt suites (prefixed to avoid clashes at merge).
enum ReceiptsTestSupport {
    static func bytes(_ path: String) throws -> [UInt8] { Array(try TestEnvironment.fixture(path)) }

    static func certificate(_ path: String) throws -> Certificate {
        try Certificate(derEncoded: try bytes(path))
    }

    static let analyzer = JudgingAnalyzer(trust: .apple)

    /// Apple's roots plus the fixtures' test roots (app-store-server-library's test CA, Xcode's StoreKit cert).
    static func testAnalyzer(allowXcode: Bool = false, catalog: Catalog = .any) throws -> JudgingAnalyzer {
        let trust = TrustStore.apple.adding(anchors: [
            try certificate("apple-swift/certs/testCA.der"),
            try certificate("tpinappreceipt/StoreKitTestCertificate.cer"),
        ])
        let environments: Set<AppleEnvironment> = [.production, .sandbox, .localTesting]
        return JudgingAnalyzer(
            trust: trust, catalog: catalog, policy: AnalysisPolicy(allowXcode: allowXcode),
            allowedEnvironments: environments)
    }

    static func date(_ text: String) -> Date { RFC3339.parse(text)! }
}

@Suite("Receipts: real fixtures")
struct ReceiptFixtureTests {
    typealias Support = ReceiptsTestSupport

    @Test("Apple's roots ship as resources")
    func appleRootsLoad() {
        #expect(TrustStore.apple.anchors.count == 2)
    }

    @Test("mbaasy unified sandbox app receipt: SHA-1 era, WWDR G1, 5 in-app purchases")
    func mbaasyUnified() throws {
        let analysis = Support.analyzer.analyze(try Support.bytes("mbaasy/decoder_unified_sandbox.txt"))
        #expect(analysis.format == .appReceipt)
        #expect(analysis.environment == .sandbox)
        #expect(analysis.bundleID == "com.mbaasy.ios.demo")
        #expect(analysis.appVersion == "1")
        #expect(analysis.originalAppVersion == "1.0")
        #expect(analysis.signedDate == Support.date("2015-11-18T17:13:48Z"))
        #expect(analysis.signature == .valid)
        #expect(analysis.judgement.code == "needs_apple")
        let ids = Set(analysis.transactions.map(\.transactionID))
        #expect(analysis.transactions.count == 5)
        #expect(
            ids == [
                "1000000180842733", "1000000180634175", "1000000180635846", "1000000180703127", "1000000180636226",
            ])
        let renewal = try #require(analysis.transactions.first { $0.transactionID == "1000000180703127" })
        #expect(renewal.originalTransactionID == "1000000180636226")
        #expect(renewal.expiresDate == Support.date("2015-11-24T06:34:41Z"))
        #expect(renewal.webOrderLineItemID == "1000000030938713")
        #expect(renewal.productID == "yearly")
        let original = try #require(analysis.transactions.first { $0.transactionID == "1000000180636226" })
        #expect(original.expiresDate == Support.date("2015-11-18T04:34:41Z"))
        #expect(original.webOrderLineItemID == "1000000030938712")
    }

    @Test("validator / tamtamchik validReceipt: 7 purchases, ids in order, last purchase dates")
    func validatorUnified() throws {
        for path in ["mbaasy/validator_receipts_unified.txt", "tamtamchik/validReceipt.b64"] {
            let analysis = Support.analyzer.analyze(try Support.bytes(path))
            #expect(analysis.format == .appReceipt)
            #expect(analysis.environment == .sandbox)
            #expect(analysis.bundleID == "com.mbaasy.ios.demo")
            #expect(analysis.appVersion == "1")
            #expect(analysis.originalAppVersion == "1.0")
            #expect(analysis.signedDate == Support.date("2015-08-13T07:50:46Z"))
            #expect(analysis.signature == .valid)
            #expect(
                analysis.transactions.map(\.transactionID) == [
                    "1000000166865231", "1000000166965150", "1000000166965327", "1000000166965895",
                    "1000000166967152", "1000000166967484", "1000000166967782",
                ])
            #expect(
                Set(analysis.transactions.compactMap(\.originalTransactionID)) == [
                    "1000000166865231", "1000000166965150",
                ])
            let last = try #require(analysis.transactions.last)
            #expect(last.productID == "monthly")
            #expect(last.purchaseDate == Support.date("2015-08-10T07:14:32Z"))
            #expect(last.originalPurchaseDate == Support.date("2015-08-10T07:12:34Z"))
            #expect(last.expiresDate == Support.date("2015-08-10T07:19:32Z"))
        }
    }

    @Test("tamtamchik validReceipt with junk appended still parses")
    func junkAppended() throws {
        let analysis = Support.analyzer.analyze(try Support.bytes("tamtamchik/validReceipt.b64") + Array("junk".utf8))
        #expect(analysis.format == .appReceipt)
        #expect(analysis.bundleID == "com.mbaasy.ios.demo")
        #expect(analysis.signature == .valid)
    }

    @Test("tamtamchik validReceipt2: one purchase, empty expires date is absent")
    func validReceipt2() throws {
        let analysis = Support.analyzer.analyze(try Support.bytes("tamtamchik/validReceipt2.b64"))
        #expect(analysis.environment == .sandbox)
        #expect(analysis.bundleID == "com.belive.app.ios")
        #expect(analysis.appVersion == "3")
        #expect(analysis.originalAppVersion == "1.0")
        #expect(analysis.signedDate == Support.date("2018-11-13T16:46:31Z"))
        #expect(analysis.signature == .valid)
        let transaction = try #require(analysis.transactions.first)
        #expect(analysis.transactions.count == 1)
        #expect(transaction.productID == "test2")
        #expect(transaction.transactionID == "1000000472106082")
        #expect(transaction.originalTransactionID == "1000000472106082")
        #expect(transaction.expiresDate == nil)
    }

    @Test("tamtamchik invalidReceipt (truncated) is malformed")
    func invalidReceipt() throws {
        let analysis = Support.analyzer.analyze(try Support.bytes("tamtamchik/invalidReceipt.b64"))
        #expect(analysis.format == .unknown)
        #expect(analysis.judgement.code == "malformed")
    }

    @Test("TPInAppReceipt production receipt: SHA-256, WWDR G5, expired leaf validated at creation")
    func tpProduction() throws {
        let analysis = Support.analyzer.analyze(try Support.bytes("tpinappreceipt/receipt-production"))
        #expect(analysis.environment == .production)
        #expect(analysis.bundleID == "org.getpure.pure-iphone")
        #expect(analysis.appVersion == "15741")
        #expect(analysis.originalAppVersion == "434")
        #expect(analysis.signedDate == Support.date("2024-02-23T17:27:16Z"))
        #expect(analysis.signature == .valid)
        #expect(analysis.transactions.count == 4)
        let first = try #require(analysis.transactions.first)
        #expect(first.productID == "org.getpure.pure.Week")
        #expect(first.transactionID == "340001196262039")
        #expect(first.expiresDate == Support.date("2023-05-16T23:20:55Z"))
        #expect(
            analysis.transactions.contains {
                $0.transactionID == "340001237736590" && $0.originalTransactionID == "340001196262039"
                    && $0.productID == "org.getpure.pure.Month"
            })
        // At "now" the leaf has expired: the same receipt is invalid when validated today.
        let today = Support.analyzer.analyze(try Support.bytes("tpinappreceipt/receipt-production"), at: Date())
        #expect(today.signature.code == "invalid")
    }

    @Test("TPInAppReceipt sandbox G5 and legacy (187 purchases)")
    func tpSandbox() throws {
        let g5 = Support.analyzer.analyze(try Support.bytes("tpinappreceipt/receipt-sandbox-g5"))
        #expect(g5.environment == .sandbox)
        #expect(g5.bundleID == "dev.bonzer.weeka.app")
        #expect(g5.appVersion == "2")
        #expect(g5.signedDate == Support.date("2025-12-26T18:39:47Z"))
        #expect(g5.signature == .valid)
        #expect(g5.transactions.map(\.transactionID) == ["2000001092134138", "2000001092148094"])
        #expect(g5.transactions.allSatisfy { $0.originalTransactionID == "2000001092134138" })
        #expect(g5.transactions.allSatisfy { $0.productID == "dev.bonzer.weeka.app.subscription.pro.annual" })

        let legacy = Support.analyzer.analyze(try Support.bytes("tpinappreceipt/receipt-sandbox-legacy"))
        #expect(legacy.environment == .sandbox)
        #expect(legacy.bundleID == "com.nutcall.alert")
        #expect(legacy.appVersion == "32")
        #expect(legacy.transactions.count == 187)
        #expect(legacy.signature == .valid)
        #expect(legacy.signedDate.map { RFC3339.format($0).hasPrefix("2020-05-06") } == true)
    }

    @Test("Xcode receipts: BER, +0100 offsets, accepted only when allowed")
    func xcodeReceipts() throws {
        let strict = try Support.testAnalyzer(allowXcode: false)
        let lenient = try Support.testAnalyzer(allowXcode: true)
        let cycle = try Support.bytes("tpinappreceipt/receipt-xcode")
        let refused = strict.analyze(cycle)
        #expect(refused.format == .appReceipt)
        #expect(refused.environment == .xcode)
        #expect(refused.bundleID == "net.zachariadis.cyclemaps")
        #expect(refused.appVersion == "31.10.0")
        #expect(refused.judgement == .environmentNotAllowed(.xcode))
        #expect(refused.transactions.first?.transactionID == "0")
        #expect(refused.transactions.first?.productID == "CYCLEMAPS_PREMIUM")
        #expect(refused.transactions.first?.purchaseDate != nil)
        #expect(refused.signature == .valid)
        #expect(lenient.analyze(cycle).judgement == .locallyVerified)
        // Without the StoreKit certificate as an anchor the chain is untrusted.
        #expect(Support.analyzer.analyze(cycle).signature.code == "untrusted")

        let empty = lenient.analyze(try Support.bytes("apple-swift/xcode/xcode-app-receipt-empty"))
        #expect(empty.bundleID == "com.example.naturelab.backyardbirds.example")
        #expect(empty.environment == .xcode)
        #expect(empty.transactions.isEmpty)
        #expect(empty.signedDate == Support.date("2023-10-19T01:18:54Z"))
        #expect(empty.signature == .valid)

        let withTransaction = lenient.analyze(try Support.bytes("apple-swift/xcode/xcode-app-receipt-with-transaction"))
        #expect(withTransaction.signedDate == Support.date("2023-10-19T01:45:40Z"))
        let transaction = try #require(withTransaction.transactions.first)
        #expect(withTransaction.transactions.count == 1)
        #expect(transaction.transactionID == "0")
        #expect(transaction.productID == "pass.premium")
        #expect(transaction.quantity == 1)
        #expect(transaction.purchaseDate == Support.date("2023-10-19T01:45:36Z"))
        #expect(transaction.expiresDate == Support.date("2023-11-19T01:45:36Z"))
        #expect(transaction.originalTransactionID == nil)
        #expect(withTransaction.originalAppVersion == nil)
        #expect(
            try Support.bytes("tpinappreceipt/receipt-xcode-with-purchases")
                == Support.bytes("apple-swift/xcode/xcode-app-receipt-with-transaction"))
    }

    @Test("iOS 6 receipts: spaced form, environment from the outer dictionary, signature checked")
    func transactionReceipts() throws {
        let venice = Support.analyzer.analyze(try Support.bytes("venice/legacy_transaction_receipt_ios6.b64"))
        #expect(venice.format == .transactionReceipt)
        #expect(venice.environment == .sandbox)
        #expect(venice.bundleID == "com.mindmobapp.MindMob")
        let transaction = try #require(venice.transactions.first)
        #expect(transaction.transactionID == "1000000046178817")
        #expect(transaction.originalTransactionID == "1000000046178817")
        #expect(transaction.productID == "com.mindmobapp.download")
        #expect(transaction.purchaseDate == Date(timeIntervalSince1970: 1_335_798_355.868))
        // Signature verifies with the embedded certificate; its issuer is not shipped, so untrusted.
        #expect(venice.signature.code == "untrusted")
        #expect(venice.judgement.code == "needs_apple")

        let production = Support.analyzer.analyze(try Support.bytes("mbaasy/decoder_transaction_production.txt"))
        #expect(production.environment == .production)
        #expect(production.transactions == venice.transactions)
        #expect(production.signature.code == "untrusted")

        let sandbox = Support.analyzer.analyze(try Support.bytes("mbaasy/decoder_transaction_sandbox.txt"))
        #expect(sandbox.environment == .sandbox)
        #expect(sandbox.bundleID == "com.mbaasy.ios.demo")
        let subscription = try #require(sandbox.transactions.first)
        #expect(subscription.transactionID == "1000000181298734")
        #expect(subscription.originalTransactionID == "1000000180636226")
        #expect(subscription.productID == "yearly")
        #expect(subscription.expiresDate == Date(timeIntervalSince1970: 1_448_346_881))
        #expect(subscription.webOrderLineItemID == "1000000030938713")

        #expect(
            try Support.bytes("mbaasy/validator_receipts_subscription_transaction.txt")
                == Support.bytes("mbaasy/decoder_transaction_sandbox.txt"))
    }

    @Test("Apple's legacyTransaction: transaction id 33993399, unsigned")
    func legacyTransaction() throws {
        let analysis = Support.analyzer.analyze(try Support.bytes("apple-swift/mock_signed_data/legacyTransaction"))
        #expect(analysis.format == .transactionReceipt)
        #expect(analysis.transactions.first?.transactionID == "33993399")
        #expect(analysis.signature.code == "invalid")
        #expect(analysis.judgement.code == "not_authenticated")
    }

    @Test("Mock JWS signed by the test CA")
    func mockJWS() throws {
        let analyzer = try Support.testAnalyzer()
        let notification = analyzer.analyze(try Support.bytes("apple-swift/mock_signed_data/testNotification"))
        #expect(notification.format == .notification)
        #expect(notification.notification?.notificationType == "TEST")
        #expect(notification.environment == .sandbox)
        #expect(notification.bundleID == "com.example")
        #expect(notification.notification?.appAppleID == 1234)
        #expect(notification.signature == .valid)
        #expect(notification.judgement == .locallyVerified)

        let transaction = analyzer.analyze(try Support.bytes("apple-swift/mock_signed_data/transactionInfo"))
        #expect(transaction.format == .signedTransaction)
        #expect(transaction.environment == .sandbox)
        #expect(transaction.bundleID == "com.example")
        #expect(transaction.signature == .valid)

        let renewal = analyzer.analyze(try Support.bytes("apple-swift/mock_signed_data/renewalInfo"))
        #expect(renewal.format == .signedRenewalInfo)
        #expect(renewal.environment == .sandbox)
        #expect(renewal.signature == .valid)

        let catalog = Catalog(bundleIDs: ["com.example"])
        let strict = try Support.testAnalyzer(catalog: catalog)
        let wrong = strict.analyze(try Support.bytes("apple-swift/mock_signed_data/wrongBundleId"))
        #expect(wrong.bundleID == "com.example.wrong")
        #expect(wrong.judgement == .wrongBundle(bundleID: "com.example.wrong"))
        #expect(
            strict.analyze(try Support.bytes("apple-swift/mock_signed_data/transactionInfo")).judgement
                == .locallyVerified)
        let other = try Support.testAnalyzer(catalog: Catalog(bundleIDs: ["com.example.x"]))
        #expect(
            other.analyze(try Support.bytes("apple-swift/mock_signed_data/transactionInfo")).judgement.code
                == "wrong_bundle")

        let missing = analyzer.analyze(try Support.bytes("apple-swift/mock_signed_data/missingX5CHeaderClaim"))
        #expect(missing.signature.code != "valid")
        #expect(missing.judgement.code == "not_authenticated")

        // The test chain does not reach Apple's real root.
        let untrusted = Support.analyzer.analyze(try Support.bytes("apple-swift/mock_signed_data/transactionInfo"))
        #expect(untrusted.signature.code == "untrusted")
        #expect(untrusted.judgement.code == "not_authenticated")
    }

    @Test("Malformed JWS shapes are not receipts")
    func malformedJWS() {
        for text in ["a.b.c.d", "a.b.c", "eyJhbGciOiJFUzI1NiJ9.e30.e30.e30", "eyJhbGciOiJFUzI1NiJ9.!!.xx"] {
            #expect(Support.analyzer.analyze(Array(text.utf8)).format == .unknown, "\(text)")
        }
    }

    @Test("Real Apple JWS (go-iap): renewal info, Apple Root G3 chain valid at signedDate only")
    func realAppleJWS() throws {
        let bytes = try Support.bytes("go-iap/real_sandbox_signedRenewalInfo_2000000335310644.jws")
        let analysis = Support.analyzer.analyze(bytes)
        #expect(analysis.format == .signedRenewalInfo)
        #expect(analysis.environment == .sandbox)
        #expect(analysis.renewalInfo?.originalTransactionID == "2000000335310644")
        #expect(analysis.renewalInfo?.productID == "co.ringalarm.swtich.quarterly2")
        #expect(analysis.renewalInfo?.autoRenewStatus == 1)
        #expect(analysis.signedDate == Date(timeIntervalSince1970: 1_684_822_778.492))
        #expect(analysis.signature == .valid)
        #expect(analysis.judgement == .locallyVerified)
        #expect(Support.analyzer.analyze(bytes, at: Date()).signature.code == "invalid")
        #expect(
            Support.analyzer.analyze(bytes, at: Date(timeIntervalSince1970: 2_280_946_846)).signature.code == "invalid")
        // The test root is not Apple's: with only the test CA the real chain is untrusted.
        let testOnly = JudgingAnalyzer(
            trust: TrustStore(anchors: [try Support.certificate("apple-swift/certs/testCA.der")]))
        #expect(testOnly.analyze(bytes).signature.code == "untrusted")
    }

    @Test("Xcode JWS: decoded, accepted only with allowXcode")
    func xcodeJWS() throws {
        let lenient = try Support.testAnalyzer(allowXcode: true)
        let strict = try Support.testAnalyzer(allowXcode: false)
        let transactionBytes = try Support.bytes("apple-swift/xcode/xcode-signed-transaction")
        let transaction = lenient.analyze(transactionBytes)
        #expect(transaction.format == .signedTransaction)
        #expect(transaction.environment == .xcode)
        #expect(transaction.bundleID == "com.example.naturelab.backyardbirds.example")
        #expect(transaction.judgement == .locallyVerified)
        let item = try #require(transaction.transactions.first)
        #expect(item.transactionID == "0")
        #expect(item.originalTransactionID == "0")
        #expect(item.webOrderLineItemID == "0")
        #expect(item.productID == "pass.premium")
        #expect(item.quantity == 1)
        #expect(item.productType == "Auto-Renewable Subscription")
        #expect(item.revocationDate == nil)
        #expect(abs((item.purchaseDate?.timeIntervalSince1970 ?? 0) - 1_697_679_936.049) < 0.001)
        #expect(abs((item.expiresDate?.timeIntervalSince1970 ?? 0) - 1_700_358_336.049) < 0.001)
        #expect(strict.analyze(transactionBytes).judgement == .environmentNotAllowed(.xcode))
        #expect(Support.analyzer.analyze(transactionBytes).signature.code != "valid")

        let renewal = lenient.analyze(try Support.bytes("apple-swift/xcode/xcode-signed-renewal-info"))
        #expect(renewal.format == .signedRenewalInfo)
        #expect(renewal.renewalInfo?.originalTransactionID == "0")
        #expect(renewal.renewalInfo?.autoRenewProductID == "pass.premium")
        #expect(renewal.renewalInfo?.autoRenewStatus == 1)
        #expect(renewal.renewalInfo?.expirationIntent == nil)

        let app = lenient.analyze(try Support.bytes("apple-swift/xcode/xcode-signed-app-transaction"))
        #expect(app.format == .appTransaction)
        #expect(app.bundleID == "com.example.naturelab.backyardbirds.example")
        #expect(app.appVersion == "1")
        #expect(app.originalAppVersion == "1")
        #expect(app.environment == .xcode)
    }

    @Test("Cracker receipt: base64 of a product id is not a receipt")
    func crackerReceipt() {
        let analysis = Support.analyzer.analyze(Array("Y29tLnVydXMuaWFwLjk2NjU3Mjkw".utf8))
        #expect(analysis.format == .unknown)
        #expect(analysis.judgement.code == "malformed")
        #expect(analysis.unknownReason?.contains("not a receipt") == true)
    }
}
