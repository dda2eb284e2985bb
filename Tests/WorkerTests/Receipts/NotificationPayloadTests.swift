import Crypto
import Decision
import Foundation
import Messages
import Receipts
import Testing

@testable import Worker

/// Notification payloads that carry `summary`, `externalPurchaseToken` or `appData` instead of `data`, and bad ones.
@Suite("Receipts: notification payloads")
struct NotificationPayloadTests {
    static let catalog = ReceiptForgeryTests.catalog

    static func analyze(_ payload: String, pki: ReceiptsTestPKI) throws -> JudgedAnalysis {
        JudgingAnalyzer(trust: pki.trust, catalog: catalog).analyze(Array(try pki.jws(payload: payload).utf8))
    }

    @Test("RENEWAL_EXTENSION / SUMMARY: bundle id, environment and appAppleId come from `summary`")
    func summary() throws {
        let pki = try ReceiptsTestPKI.make()
        let analysis = try Self.analyze(
            """
            {"notificationType":"RENEWAL_EXTENSION","subtype":"SUMMARY","notificationUUID":"u-s","signedDate":1700000000000,\
            "summary":{"requestIdentifier":"req-1","environment":"Production","appAppleId":1234,\
            "bundleId":"com.example.app","productId":"pro.monthly","succeededCount":5,"failedCount":1}}
            """, pki: pki)
        #expect(analysis.format == .notification)
        #expect(analysis.bundleID == "com.example.app")
        #expect(analysis.environment == .production)
        #expect(analysis.notification?.appAppleID == 1234)
        #expect(analysis.notification?.summaryRequestID == "req-1")
        #expect(analysis.judgement == .locallyVerified)
        let evidence = analysis.evidence
        #expect(evidence.notification?.kind == .extended)
        #expect(evidence.notification?.signedDate == Date(timeIntervalSince1970: 1_700_000_000))
        #expect(evidence.transactions.isEmpty)
    }

    @Test("Apple's own summary notification model (app-store-server-library-swift) is read as Apple shapes it")
    func appleSummaryModel() throws {
        let json = String(
            decoding: try TestEnvironment.fixture("apple-swift/models/signedSummaryNotification.json"), as: UTF8.self)
        let pki = try ReceiptsTestPKI.make()
        let analysis = JudgingAnalyzer(
            trust: pki.trust, catalog: Catalog(bundleIDs: ["com.example"], products: []),
            allowedEnvironments: [.production, .sandbox, .localTesting]
        ).analyze(Array(try pki.jws(payload: json).utf8))
        #expect(analysis.bundleID == "com.example")
        #expect(analysis.environment == .localTesting)
        #expect(analysis.notification?.appAppleID == 41234)
        #expect(analysis.notification?.summaryRequestID == "efb27071-45a4-4aca-9854-2a1e9146f265")
        #expect(analysis.transactions.isEmpty)
    }

    @Test("EXTERNAL_PURCHASE_TOKEN and appData payloads are read from where Apple puts them")
    func externalTokenAndAppData() throws {
        let pki = try ReceiptsTestPKI.make()
        let token = try Self.analyze(
            """
            {"notificationType":"EXTERNAL_PURCHASE_TOKEN","subtype":"UNREPORTED","signedDate":1700000000000,\
            "externalPurchaseToken":{"externalPurchaseId":"e-1","tokenCreationDate":1700000000000,"appAppleId":55,\
            "bundleId":"com.example.app"}}
            """, pki: pki)
        #expect(token.bundleID == "com.example.app" && token.notification?.appAppleID == 55)
        #expect(token.judgement == .locallyVerified)

        let app = try Self.analyze(
            """
            {"notificationType":"RESCIND_CONSENT","signedDate":1700000000000,\
            "appData":{"appAppleId":77,"bundleId":"com.example.app","environment":"Sandbox"}}
            """, pki: pki)
        #expect(app.bundleID == "com.example.app" && app.environment == .sandbox)
        #expect(app.notification?.appAppleID == 77)

        let other = try Self.analyze(
            """
            {"notificationType":"DID_RENEW","signedDate":1700000000000,\
            "data":{"appAppleId":88,"bundleId":"com.other.app","environment":"Production"}}
            """, pki: pki)
        #expect(other.notification?.appAppleID == 88)
        #expect(other.judgement == .wrongBundle(bundleID: "com.other.app"))
    }

    @Test("`data` and `summary` together is malformed, not guessed")
    func dataAndSummary() throws {
        let pki = try ReceiptsTestPKI.make()
        let analysis = try Self.analyze(
            """
            {"notificationType":"RENEWAL_EXTENSION","subtype":"SUMMARY","signedDate":1700000000000,\
            "data":{"bundleId":"com.example.app","environment":"Production"},\
            "summary":{"requestIdentifier":"req-1","environment":"Sandbox","bundleId":"com.example.app"}}
            """, pki: pki)
        #expect(analysis.format == .unknown)
        guard case .malformed = analysis.judgement else {
            Issue.record("expected malformed, got \(analysis.judgement)")
            return
        }
        #expect(analysis.evidence.rejection == .malformed)
    }

    @Test("a notification signed by another chain is not authenticated")
    func otherChain() throws {
        let pki = try ReceiptsTestPKI.make()
        let stranger = try ReceiptsTestPKI.make()
        let payload = """
            {"notificationType":"TEST","signedDate":1700000000000,\
            "data":{"bundleId":"com.example.app","environment":"Production","appAppleId":1234}}
            """
        let analysis = JudgingAnalyzer(trust: pki.trust, catalog: Self.catalog).analyze(
            Array(try stranger.jws(payload: payload).utf8))
        guard case .notAuthenticated = analysis.judgement else {
            Issue.record("expected not authenticated, got \(analysis.judgement)")
            return
        }
        #expect(analysis.evidence.authenticity == .notAuthenticated)
    }

    @Test("signed renewal info: auto-renew, grace period and billing retry reach the evidence")
    func renewalInfo() throws {
        let pki = try ReceiptsTestPKI.make()
        let transaction = try pki.jws(payload: ReceiptForgeryTests.transactionPayload())
        let renewal = try pki.jws(
            payload: """
                {"originalTransactionId":"2000000000000000","productId":"pro.monthly","autoRenewStatus":0,\
                "isInBillingRetryPeriod":true,"gracePeriodExpiresDate":1703000000000,"priceIncreaseStatus":1,\
                "signedDate":1700000000000,"environment":"Production"}
                """)
        let analysis = try Self.analyze(
            """
            {"notificationType":"DID_FAIL_TO_RENEW","subtype":"GRACE_PERIOD","signedDate":1700000000000,\
            "data":{"bundleId":"com.example.app","environment":"Production","signedTransactionInfo":"\(transaction)",\
            "signedRenewalInfo":"\(renewal)"}}
            """, pki: pki)
        #expect(analysis.renewalInfo?.priceIncreaseStatus == 1)
        let evidence = analysis.evidence
        #expect(evidence.notification?.autoRenew == false)
        #expect(evidence.transactions.first?.gracePeriodExpiresDate == Date(timeIntervalSince1970: 1_703_000_000))
        #expect(evidence.transactions.first?.isInBillingRetry == true)
        #expect(evidence.transactions.first?.hasRenewalInfo == true, "the verdict states what the renewal info says")
        let status = try Self.analyze(
            """
            {"notificationType":"DID_CHANGE_RENEWAL_STATUS","subtype":"AUTO_RENEW_ENABLED","signedDate":1700000000000,\
            "data":{"bundleId":"com.example.app","environment":"Production","signedTransactionInfo":"\(transaction)",\
            "signedRenewalInfo":"\(renewal)"}}
            """, pki: pki)
        #expect(status.evidence.notification?.autoRenew == true, "the subtype wins")
    }
}
