import Decision
import Foundation
import GooglePlayClients
import Ledger
import Logging
import Messages
import Observability
import Operations
import Testing

@testable import Worker

/// The refund policy in the worker (docs/REFUNDS.md): Google Play's review answers follow it and record the rule,
/// `refund-policy explain` prints the rule and the exact body from the ledger, and a refused file stops the start.
@Suite("Refund policy: answers, explain and the start's check", .timeLimit(.minutes(2)))
struct RefundPolicyWorkerTests {
    static let package = "com.example.play"
    static let start = Date(timeIntervalSince1970: 1_800_000_000)
    static let catalog = Catalog(
        bundleIDs: ["com.example.app"],
        products: [.init(id: "coins", type: .consumable, sampleContentProvided: true)],
        playApps: [.init(packageName: package, licensingKeyFile: "/dev/null", serviceAccountKeyFile: "/dev/null")],
        playProducts: [
            .init(id: "unlock", type: .nonConsumable, refundPreference: "APPROVE"),
            .init(id: "premium", type: .autoRenewable, basePlans: ["monthly"]),
        ])
    static let policyJSON = #"""
        {"rules":[
          {"name":"serial-refunders","min_earlier_refunds":1,"answer":"no_refund"},
          {"name":"never-delivered","delivered":false,"store":"google_play","answer":"no_response"},
          {"name":"sandbox","environments":["Sandbox"],"answer":"no_response"}
        ]}
        """#

    static func policy() throws -> RefundPolicy {
        try RefundPolicy.load(json: Data(policyJSON.utf8), file: "refunds.json", catalog: catalog)
    }

    static func claim(
        _ id: String, account: String, product: String, type: ProductType, app: String = package,
        environment: String = "Production", expires: Date? = nil
    ) -> TransactionClaim {
        TransactionClaim(
            transactionID: id, originalTransactionID: id, accountID: account, productID: product, productType: type,
            bundleID: app, environment: environment, purchaseDate: start, expiresDate: expires,
            grantedJobID: "job-\(id)", verdictID: "verdict-\(id)", createdAt: start, updatedAt: start)
    }

    static func grant(_ ledger: any Ledger, _ claim: TransactionClaim, revokedAt: Date? = nil) async throws {
        let job = ReceiptJob(
            jobID: claim.grantedJobID, accountID: claim.accountID,
            proof: .googlePlay(GooglePlayPurchase(packageName: package, productID: claim.productID, purchaseToken: "t"))
        )
        let verdict = Verdict(job: job, outcome: .granted, decidedBy: .googlePlay, decidedAt: start)
        _ = try await ledger.apply(LedgerDecision(verdict: verdict, writes: [.claim(claim)]))
        if let revokedAt { try await ledger.revoke(transactionID: claim.transactionID, at: revokedAt) }
    }

    @Test(
        "Google Play reviews follow the policy: the matching rule's answer, no call for no_response, the rule recorded")
    func googleReviewsFollowThePolicy() async throws {
        // The process's metrics registry (bootstrapped once), where the answers' counter is read back with its rule.
        let registry = MetricsBootstrap.registry()
        try await LedgerTestSupport.withLedger(.sqlite) { ledger, _ in
            // acct-1 had a refund before; acct-2 never did.
            try await Self.grant(
                ledger, Self.claim("GPA.1", account: "acct-1", product: "unlock", type: .nonConsumable))
            try await Self.grant(
                ledger, Self.claim("GPA.2", account: "acct-1", product: "unlock", type: .nonConsumable),
                revokedAt: Self.start)
            try await Self.grant(
                ledger, Self.claim("GPA.3", account: "acct-2", product: "unlock", type: .nonConsumable))
            let calls = ScriptedPlayCalls()
            let now = TestNow(Self.start.addingTimeInterval(3600))
            let followUps = GooglePlayFollowUps(
                calls: calls, store: ledger,
                configuration: GooglePlayFollowUpsConfiguration(
                    catalog: Self.catalog, holder: "w", answersRefundReviews: true, refundPolicy: try Self.policy(),
                    sweepInterval: .seconds(3600), claimRetryBackoff: .milliseconds(1) ... .milliseconds(5)),
                logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }), now: { now.now })
            for (order, review) in [("GPA.1", "review-1"), ("GPA.3", "review-3"), ("GPA.9", "review-9")] {
                #expect(
                    await followUps.refundReviewRequested(
                        packageName: Self.package, productID: "unlock", orderID: order, pendingRefundToken: review))
            }
            await GooglePlayFollowUpsTests.drain(followUps)
            func record(_ key: String) async throws -> FollowUpRecord? {
                try await ledger.followUpRecord(kind: .playRefundReview, key: key)
            }
            // GPA.1: its owner's other purchase was refunded.
            #expect(try await record("review-1")?.state == .sent)
            #expect(try await record("review-1")?.detail == "rule serial-refunders")
            // GPA.3: no rule of the file; the catalog's shorthand for the product.
            #expect(try await record("review-3")?.detail == "rule catalog:unlock")
            // GPA.9: nobody holds it; the policy says no_response, so Google gets no call.
            #expect(try await record("review-9")?.state == .notSent)
            #expect(try await record("review-9")?.detail == "rule never-delivered: no_response")
            let answers = Dictionary(uniqueKeysWithValues: calls.reviews.map { ($0.pendingRefundToken, $0) })
            #expect(answers.keys.sorted() == ["review-1", "review-3"])
            #expect(answers["review-1"]?.refundPreference == "DECLINE")
            #expect(answers["review-3"]?.refundPreference == "APPROVE")
            let text = String(
                decoding: MetricsExposition.render(registry, declaring: [MetricNames.googlePlayRefundReviews]),
                as: UTF8.self)
            for series in [
                #"verify_google_play_refund_reviews_total{result="sent",rule="serial-refunders"}"#,
                #"verify_google_play_refund_reviews_total{result="not_sent",rule="never-delivered"}"#,
            ] {
                #expect(text.contains(series), "\(series) in:\n\(text)")
            }
        }
    }

    @Test("explain: the facts, the rule and the exact body, for an App Store and a Google Play purchase")
    func explain() async throws {
        try await LedgerTestSupport.withLedger(.sqlite) { ledger, _ in
            try await Self.grant(
                ledger,
                Self.claim("2000", account: "acct-a", product: "coins", type: .consumable, app: "com.example.app"))
            try await Self.grant(
                ledger,
                Self.claim("2001", account: "acct-a", product: "coins", type: .consumable, app: "com.example.app"),
                revokedAt: Self.start)
            let month = Self.start.addingTimeInterval(30 * 86_400)
            try await Self.grant(
                ledger, Self.claim("GPA.5", account: "acct-b", product: "premium", type: .autoRenewable, expires: month)
            )
            let now = Self.start.addingTimeInterval(7.5 * 86_400)
            let policy = try Self.policy()

            let apple = try await RefundPolicyExplanation.explain(
                transactionID: "2000", store: nil, productID: nil, ledger: ledger, catalog: Self.catalog,
                policy: policy, customerConsented: true, now: now)
            #expect(apple["store"] as? String == "app_store")
            #expect(apple["rule"] as? String == "serial-refunders")
            #expect(apple["answer"] as? String == "no_refund")
            #expect(apple["sent"] as? Bool == true)
            #expect(apple["claimed"] as? Bool == true)
            #expect(apple["request"] as? String == "PUT /inApps/v2/transactions/consumption/2000")
            let body = try #require(apple["body"] as? [String: Any])
            #expect(
                try Self.canonical(body)
                    == #"{"customerConsented":true,"deliveryStatus":"DELIVERED","refundPreference":"DECLINE","#
                    + #""sampleContentProvided":true}"#)
            let facts = try #require(apple["facts"] as? [String: Any])
            #expect(facts["earlier_refunds"] as? Int == 1)
            #expect(facts["purchase_age_days"] as? Double == 7.5)
            #expect(facts["delivered"] as? Bool == true)
            #expect(facts["storefront_country"] is NSNull)

            // Without consent nothing is sent, and the report says why.
            let unconsented = try await RefundPolicyExplanation.explain(
                transactionID: "2000", store: nil, productID: nil, ledger: ledger, catalog: Self.catalog,
                policy: policy, customerConsented: false, now: now)
            #expect(unconsented["sent"] as? Bool == false)
            #expect(unconsented["body"] is NSNull)
            #expect(unconsented["not_sent"] as? String == "no customer consent")

            let google = try await RefundPolicyExplanation.explain(
                transactionID: "GPA.5", store: nil, productID: nil, ledger: ledger, catalog: Self.catalog,
                policy: policy, customerConsented: false, now: now)
            #expect(google["store"] as? String == "google_play")
            #expect(google["rule"] as? String == "default")
            #expect(google["answer"] as? String == "data_only")
            #expect(google["request"] as? String == "POST applications/\(Self.package)/orders/GPA.5:reviewrefund")
            #expect(
                try Self.canonical(try #require(google["body"] as? [String: Any]))
                    == #"{"consumptionPercentageMilliunits":25000,"pendingRefundToken":"pendingRefundToken","#
                    + #""refundPreference":"NEUTRAL","sampleContentProvided":false}"#)
            #expect((google["facts"] as? [String: Any])?["consumed_percent"] as? Double == 25)

            // An order nobody holds: the no_response rule, no body, and the ledger's answer "no claim".
            let nobody = try await RefundPolicyExplanation.explain(
                transactionID: "GPA.404", store: .googlePlay, productID: "unlock", ledger: ledger,
                catalog: Self.catalog, policy: policy, customerConsented: false, now: now)
            #expect(nobody["claimed"] as? Bool == false)
            #expect(nobody["rule"] as? String == "never-delivered")
            #expect(nobody["body"] is NSNull)
            #expect(nobody["not_sent"] as? String == "no_response")
        }
    }

    static func canonical(_ object: [String: Any]) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
    }

    @Test("the worker refuses to start with a faulty policy file, in one line naming the file, the rule and the field")
    func startRefusesAFaultyFile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "refund-policy-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let catalog = directory.appendingPathComponent("catalog.json")
        try Data(#"{"bundle_ids":["com.example.app"],"products":[{"id":"p","type":"consumable"}]}"#.utf8)
            .write(to: catalog)
        let policy = directory.appendingPathComponent("refunds.json")
        func start() throws {
            var sources = ConfigurationSources()
            sources.addEnvironment([
                "VERIFY_CATALOG_FILE": catalog.path,
                "VERIFY_LEDGER_URL": "sqlite:\(directory.appendingPathComponent("ledger.sqlite").path)",
                "VERIFY_REFUND_POLICY_FILE": policy.path,
            ])
            let runtime = WorkerRuntime(
                configuration: try WorkerConfiguration(sources, hostName: "test"), logger: Logger(label: "refunds"),
                serveOperations: false)
            _ = try runtime.serviceGroup(health: WorkerHealth(), started: {})
        }
        try Data(#"{"rules":[{"name":"late","answer":"no_refund","min_consumed_percent":101}]}"#.utf8)
            .write(to: policy)
        let error = #expect(throws: ConfigurationError.self) { try start() }
        #expect(error?.key == "refund_policy_file")
        #expect(
            error?.description
                == "configuration: refund_policy_file: refund policy \(policy.path): rule 1 \"late\": field "
                + "\"min_consumed_percent\": 101 is out of range (0 to 100)")
        try Data(#"{"rules":[{"name":"late","answer":"no_refund","min_consumed_percent":90}]}"#.utf8)
            .write(to: policy)
        try start()
    }
    @Test("the commands: check refuses a faulty file in one line (exit 2) and lists a good one; explain prints JSON")
    func commands() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "refund-policy-cli-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let bad = directory.appendingPathComponent("bad.json")
        try Data(
            #"{"rules":[{"name":"all","answer":"data_only"},{"name":"late","answer":"no_refund","store":"app_store"}]}"#
                .utf8
        )
        .write(to: bad)
        let good = directory.appendingPathComponent("good.json")
        try Data(Self.policyJSON.utf8).write(to: good)
        let catalog = directory.appendingPathComponent("catalog.json")
        try Data(
            #"{"bundle_ids":["com.example.app"],"products":[{"id":"coins","type":"consumable","refund_preference":"GRANT_FULL"}]}"#
                .utf8
        ).write(to: catalog)

        let refused = try await CommandProcess.run(["refund-policy", "check", bad.path])
        #expect(refused.status == 2)
        #expect(
            refused.stderr
                == "verify-worker refund-policy check: refund policy \(bad.path): rule 2 \"late\": can never match: "
                + "rule \"all\" before it has no condition and matches every question\n")
        let accepted = try await CommandProcess.run([
            "refund-policy", "check", good.path, "--catalog-file", catalog.path,
        ])
        #expect(accepted.status == 0, "\(accepted.stderr)")
        #expect(
            accepted.lines == [
                "serial-refunders\tno_refund", "never-delivered\tno_response", "sandbox\tno_response",
                "catalog:coins\tfull_refund", "default\tdata_only",
            ])

        try await LedgerTestSupport.withLedger(.sqlite) { ledger, url in
            try await Self.grant(
                ledger,
                Self.claim("3000", account: "acct-c", product: "coins", type: .consumable, app: "com.example.app"))
            let explained = try await CommandProcess.run([
                "refund-policy", "explain", "--transaction", "3000", "--ledger-url", url, "--catalog-file",
                catalog.path, "--refund-policy-file", good.path, "--customer-consented", "true",
            ])
            #expect(explained.status == 0, "\(explained.stderr)")
            let report = try #require(
                try JSONSerialization.jsonObject(with: Data(explained.stdout.utf8)) as? [String: Any])
            #expect(report["rule"] as? String == "catalog:coins")
            #expect((report["body"] as? [String: Any])?["refundPreference"] as? String == "GRANT_FULL")
            let unknown = try await CommandProcess.run([
                "refund-policy", "explain", "--transaction", "3999", "--ledger-url", url, "--catalog-file",
                catalog.path,
            ])
            #expect(unknown.status == 1, "nobody holds it: \(unknown.stderr)")
        }
    }
}
