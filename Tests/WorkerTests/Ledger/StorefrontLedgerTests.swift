import AppleSimulator
import Foundation
import GooglePlayClients
import Logging
import Messages
import PostgresNIO
import PostgresSettings
import Receipts
import SQLiteStorage
import Testing
import Worker

@testable import Decision
@testable import Ledger

/// The purchase's storefront country, from each store's facts to the ledger (schema version 9), `ledger show`, the
/// refund facts and a refund rule's `storefront_countries`, on both backends.
@Suite("Ledger backends: the purchase's storefront", .serialized, .timeLimit(.minutes(2)))
struct StorefrontLedgerTests {
    typealias F = LedgerFixtures
    typealias S = LedgerTestSupport
    typealias P = PlayNotificationRulesTests

    /// A policy with one rule on the storefront, before the built-in default (data only).
    static func germanyPolicy(catalog: Catalog) throws -> RefundPolicy {
        try RefundPolicy.load(
            json: Data(#"{"rules":[{"name":"germany","storefront_countries":["DEU"],"answer":"no_refund"}]}"#.utf8),
            file: "policy.json", catalog: catalog)
    }

    /// The evidence of a JWS the Apple simulator mints for `storefront` (nil: its default, `USA`), verified locally
    /// as the worker verifies one.
    static func appleEvidence(storefront: String?) throws -> (transactionID: String, evidence: PurchaseEvidence) {
        var configuration = AppleSimulatorConfiguration()
        configuration.pki = try AppleSimHarness.sharedPKI.get()
        let simulator = try AppleSimulator(configuration: configuration)
        let minted = try simulator.mint(
            MintRequest(
                bundleId: F.bundle, productId: "com.example.gems", format: .signedTransaction,
                environment: .production, purchaseDateMs: Int64(F.days(-3).timeIntervalSince1970 * 1000),
                storefront: storefront))
        let trust = try TrustStore(derEncodedAnchors: [simulator.pki.jwsRootDER])
        let analysis = ReceiptAnalyzer(trust: trust).analyze(Array(minted.receipt.utf8))
        let evidence = EvidenceMapping.evidence(from: analysis.facts, policy: ProofPolicy(catalog: F.catalog))
        #expect(evidence.authenticity == .authentic)
        return (minted.transaction.transactionId, evidence)
    }

    /// The refund facts of `transactionID` as the ledger holds it.
    static func refundFacts(
        _ ledger: any Ledger, _ transactionID: String, store: Store, catalog: Catalog
    ) async throws -> RefundFacts {
        let claim = try await ledger.snapshot(jobID: "", transactionIDs: [transactionID], originalTransactionIDs: [])
            .claim(transactionID)
        return RefundFacts(
            store: store, claim: claim, productID: claim?.productID ?? "", app: nil, environment: nil,
            accountClaims: [], catalog: catalog, now: F.now)
    }

    static func shownStorefront(_ ledger: any Ledger, _ transactionID: String) async throws -> Any? {
        let shown = try await LedgerShow.report(.transaction(transactionID), ledger: ledger, now: F.now)
        return (shown["transactions"] as? [[String: Any]])?.first?["storefront"]
    }

    @Test(
        "App Store: the JWS's storefront reaches the claim; a DEU rule matches DEU, not USA, nor a legacy receipt",
        arguments: LedgerBackend.allCases)
    func appStore(backend: LedgerBackend) async throws {
        let germany = try Self.appleEvidence(storefront: "DEU")
        let america = try Self.appleEvidence(storefront: nil)
        #expect(germany.evidence.transactions.first?.storefront == "DEU")
        #expect(america.evidence.transactions.first?.storefront == "USA")
        // The verification lease's JSON carries it to the workers that wait for the answer.
        #expect(PurchaseEvidence(jsonText: germany.evidence.jsonText())?.transactions.first?.storefront == "DEU")
        // A legacy receipt (verifyReceipt) states no storefront.
        let legacy = F.apple([F.purchase("legacy-1", product: "com.example.gems")])

        try await S.withLedger(backend) { ledger, _ in
            #expect(try await S.settle(ledger, F.job("job-de"), germany.evidence).outcome == .granted)
            #expect(
                try await S.settle(ledger, F.job("job-us", account: "acct-B"), america.evidence).outcome == .granted)
            #expect(try await S.settle(ledger, F.job("job-legacy", account: "acct-C"), legacy).outcome == .granted)

            let policy = try Self.germanyPolicy(catalog: F.catalog)
            let de = try await Self.refundFacts(ledger, germany.transactionID, store: .appStore, catalog: F.catalog)
            #expect(de.storefrontCountry == "DEU")
            #expect(policy.decide(de).rule == "germany")
            let us = try await Self.refundFacts(ledger, america.transactionID, store: .appStore, catalog: F.catalog)
            #expect(us.storefrontCountry == "USA")
            #expect(policy.decide(us).rule == "default")
            let old = try await Self.refundFacts(ledger, "legacy-1", store: .appStore, catalog: F.catalog)
            #expect(old.storefrontCountry == nil)
            #expect(policy.decide(old).rule == "default", "a purchase without a storefront never matches")

            #expect(try await Self.shownStorefront(ledger, germany.transactionID) as? String == "DEU")
            #expect(try await Self.shownStorefront(ledger, "legacy-1") is NSNull)

            let explained = try await RefundPolicyExplanation.explain(
                transactionID: germany.transactionID, store: nil, productID: nil, ledger: ledger, catalog: F.catalog,
                policy: policy, customerConsented: true, now: F.now)
            #expect((explained["facts"] as? [String: Any])?["storefront_country"] as? String == "DEU")
            #expect(explained["rule"] as? String == "germany")
        }
    }

    /// Google Play's `productsv2` answer for a one-time purchase bought in `regionCode`.
    static func playProduct(order: String, regionCode: String) throws -> GooglePlayProductPurchase {
        let json = """
            {"productLineItem":[{"productId":"\(P.premium)","productOfferDetails":{"quantity":1}}],
             "purchaseStateContext":{"purchaseState":"PURCHASED"},"orderId":"\(order)",
             "purchaseCompletionTime":"\(RFC3339.format(F.days(-3)))","regionCode":"\(regionCode)"}
            """
        return try JSONDecoder().decode(GooglePlayProductPurchase.self, from: Data(json.utf8))
    }

    static func playEvidence(_ purchase: GooglePlayProductPurchase, token: String) -> PurchaseEvidence {
        EvidenceMapping.evidence(
            from: purchase.storeAnswer(packageName: P.package, token: token, now: F.now),
            local: PurchaseEvidence(source: .prefilter, authenticity: .unknown, store: .googlePlay))
    }

    static func playJob(_ id: String, account: String, token: String) -> ReceiptJob {
        ReceiptJob(
            jobID: id, accountID: account,
            proof: .googlePlay(GooglePlayPurchase(packageName: P.package, productID: P.premium, purchaseToken: token)))
    }

    @Test(
        "Google Play: regionCode DE is recorded as DEU and matches a DEU rule; an unknown region is recorded as none",
        arguments: LedgerBackend.allCases)
    func googlePlay(backend: LedgerBackend) async throws {
        let subscription = try JSONDecoder().decode(
            GooglePlaySubscriptionPurchase.self,
            from: Data(
                #"""
                {"subscriptionState":"SUBSCRIPTION_STATE_ACTIVE","regionCode":"DE",
                 "lineItems":[{"productId":"gold_monthly","expiryTime":"2030-01-01T00:00:00Z"}]}
                """#.utf8))
        #expect(
            subscription.storeAnswer(packageName: P.package, token: "tok-s", now: F.now).transactions.map(\.storefront)
                == ["DEU"])

        let german = Self.playEvidence(try Self.playProduct(order: "GPA.1", regionCode: "DE"), token: "tok-de")
        let unknown = Self.playEvidence(try Self.playProduct(order: "GPA.2", regionCode: "XK"), token: "tok-xk")
        #expect(german.transactions.first?.storefront == "DEU")
        #expect(unknown.transactions.count == 1 && unknown.transactions.first?.storefront == nil)

        try await S.withLedger(backend) { ledger, _ in
            let settled = try await S.settle(
                ledger, Self.playJob("job-de", account: "acct-A", token: "tok-de"), german, policy: P.policy)
            #expect(settled.outcome == .granted)
            let other = try await S.settle(
                ledger, Self.playJob("job-xk", account: "acct-B", token: "tok-xk"), unknown, policy: P.policy)
            #expect(other.outcome == .granted)

            let policy = try Self.germanyPolicy(catalog: P.catalog)
            let de = try await Self.refundFacts(ledger, "GPA.1", store: .googlePlay, catalog: P.catalog)
            #expect(de.storefrontCountry == "DEU")
            #expect(policy.decide(de).rule == "germany")
            let xk = try await Self.refundFacts(ledger, "GPA.2", store: .googlePlay, catalog: P.catalog)
            #expect(xk.storefrontCountry == nil)
            #expect(policy.decide(xk).rule == "default")
            #expect(try await Self.shownStorefront(ledger, "GPA.1") as? String == "DEU")
        }
    }

    @Test(
        "version 9 migrates a version 8 ledger: an old claim reads without a storefront, a new one keeps its own",
        arguments: LedgerBackend.allCases)
    func migrationFromVersion8(backend: LedgerBackend) async throws {
        let url = try S.freshURL(backend)
        defer { S.removeFiles(of: url) }
        let germany = try Self.appleEvidence(storefront: "DEU")
        try await LedgerFactory.withLedger(url: url, configuration: S.patient) { ledger in
            _ = try await S.settle(ledger, F.job(), germany.evidence)
            // Back to version 8, as a build without version 9 left it.
            try await Self.dropVersion9(ledger)
            #expect(try await ledger.schemaVersions().last == 8)
        }
        try await LedgerFactory.withLedger(url: url, configuration: S.patient) { ledger in
            let versions = (backend == .sqlite ? LedgerSchema.sqlite : LedgerSchema.postgres).map(\.version)
            #expect(try await ledger.schemaVersions() == versions)
            #expect(versions.last == 9)
            let old = try #require(
                try await ledger.snapshot(
                    jobID: "x", transactionIDs: [germany.transactionID], originalTransactionIDs: []
                )
                .claim(germany.transactionID))
            #expect(old.storefront == nil)

            let later = try Self.appleEvidence(storefront: "DEU")
            #expect(try await S.settle(ledger, F.job("job-2", account: "acct-B"), later.evidence).outcome == .granted)
            let new = try await ledger.snapshot(
                jobID: "x", transactionIDs: [later.transactionID], originalTransactionIDs: []
            ).claim(later.transactionID)
            #expect(new?.storefront == "DEU")
        }
    }

    /// Removes version 9 (its column and its row in `ledger_migrations`) from a running ledger.
    static func dropVersion9(_ ledger: any Ledger) async throws {
        if let sqlite = ledger as? SQLiteLedger {
            try await sqlite.executor.run { connection, _ in
                try connection.execute("ALTER TABLE transaction_claims DROP COLUMN storefront")
                try connection.execute("DELETE FROM ledger_migrations WHERE version = 9")
            }
        } else {
            let postgres = try #require(ledger as? PostgresLedger)
            try await postgres.operation("drop version 9") { pool, logger in
                try await pool.withConnection { connection in
                    try await connection.query("ALTER TABLE transaction_claims DROP COLUMN storefront", logger: logger)
                    try await connection.query("DELETE FROM ledger_migrations WHERE version = 9", logger: logger)
                }
            }
        }
    }
}
