import AppleClients
import Crypto
import Decision
import Foundation
import Ledger
import Logging
import Messages
import Observability
import Operations
import RateLimiter
import StoreHTTP
import Testing

@testable import GooglePlayClients
@testable import Worker

/// The operator's consumption lookup (docs/REFUNDS.md, "Units consumed"): asked against a real local HTTP server for
/// a one-time product's units consumed when a refund answer is built, its answer turned into facts the policy's
/// rules and both stores' bodies use, and a failure that may pass putting the answer back for a retry.
@Suite("Consumption lookup: units consumed of a one-time product", .serialized, .timeLimit(.minutes(2)))
struct ConsumptionLookupTests {
    static let path = "/usage"
    static let token = "lookup-token-7f3a9c"
    static let start = Date(timeIntervalSince1970: 1_800_000_000)
    static let bundleID = "com.example.app"
    static let package = "com.example.play"
    static let catalog = Catalog(
        bundleIDs: [bundleID], products: [.init(id: "coins", type: .consumable)],
        playApps: [.init(packageName: package, licensingKeyFile: "/dev/null", serviceAccountKeyFile: "/dev/null")],
        playProducts: [.init(id: "gems", type: .consumable)])
    /// A full refund for a consumable nobody used yet.
    static let policyJSON = #"{"rules":[{"name":"unused","max_units_consumed":0,"answer":"full_refund"}]}"#

    static func policy() throws -> RefundPolicy {
        try RefundPolicy.load(json: Data(policyJSON.utf8), file: "refunds.json", catalog: catalog)
    }

    static func lookup(base: String, logger: Logger = Logger(label: "lookup")) throws -> ConsumptionLookup {
        ConsumptionLookup(
            transport: try CurlHTTPEngine(),
            configuration: ConsumptionLookupConfiguration(url: base + path, token: token, timeout: .seconds(5)),
            logger: logger)
    }

    static func units(_ consumed: Int, of purchased: Int) -> AppleClientsFakeServer.Reply {
        .json(#"{"units_consumed": \#(consumed), "units_purchased": \#(purchased)}"#)
    }

    static func grant(_ ledger: any Ledger, _ id: String, product: String, app: String, store: Store) async throws {
        let claim = TransactionClaim(
            transactionID: id, originalTransactionID: id, accountID: "acct/1 & co", productID: product,
            productType: .consumable, bundleID: app, environment: "Production", purchaseDate: start,
            grantedJobID: "job-\(id)", verdictID: "verdict-\(id)", createdAt: start, updatedAt: start)
        let proof: ReceiptJob.Proof =
            store == .googlePlay
            ? .googlePlay(GooglePlayPurchase(packageName: app, productID: product, purchaseToken: "t-\(id)"))
            : .transactionID(id)
        let job = ReceiptJob(jobID: claim.grantedJobID, accountID: claim.accountID, proof: proof)
        let verdict = Verdict(
            job: job, outcome: .granted, decidedBy: store == .googlePlay ? .googlePlay : .apple, decidedAt: start)
        _ = try await ledger.apply(LedgerDecision(verdict: verdict, writes: [.claim(claim)]))
    }

    @Test(
        "the request: every field percent-encoded, the token as a bearer; the answers: found, unknown, invalid, failed")
    func answers() async throws {
        let registry = MetricsBootstrap.registry()
        let logs = SecurityLogCapture()
        try await AppleClientsFakeServer.withRunning { server, base in
            let lookup = try Self.lookup(base: base, logger: logs.logger("lookup"))
            let question = ConsumptionLookup.Question(
                store: .googlePlay, app: Self.package, productID: "gems+100/pack", transactionID: "GPA.12#gems",
                accountID: "acct/1 & co")
            server.enqueue(Self.path, Self.units(3, of: 10))
            #expect(await lookup.units(for: question) == .found(consumed: 3, purchased: 10))
            let request = try #require(server.received(path: Self.path).first)
            #expect(request.method == "GET")
            #expect(
                request.query
                    == "store=google_play&app=com.example.play&product_id=gems%2B100%2Fpack&transaction_id=GPA.12%23gems"
                    + "&account_id=acct%2F1%20%26%20co")
            #expect(request.headers["authorization"] == "Bearer \(Self.token)")
            // Nobody holds the purchase: no account is sent.
            server.enqueue(Self.path, .json(#"{"units_consumed": 0}"#))
            var anonymous = question
            anonymous.accountID = nil
            #expect(await lookup.units(for: anonymous) == .found(consumed: 0, purchased: nil))
            #expect(server.received(path: Self.path).last?.query.contains("account_id") == false)

            server.enqueue(Self.path, .init(status: 404))
            #expect(await lookup.units(for: question) == .unknown)
            for (reply, reason) in [
                (AppleClientsFakeServer.Reply.json("units: 3"), "not a JSON object"),
                (.json(#"{"units_consumed": -1}"#), "units_consumed must be a whole number from 0"),
                (.json(#"{"units_consumed": 1.5}"#), "units_consumed must be a whole number from 0"),
                (.json(#"{"units_consumed": true}"#), "units_consumed must be a whole number from 0"),
                (.json(#"{"units_purchased": 3}"#), "units_consumed must be a whole number from 0"),
                (
                    .json(#"{"units_consumed": 2, "units_purchased": "9"}"#),
                    "units_purchased must be a whole number from 0"
                ),
                (.json(#"{"units_consumed": 4, "units_purchased": 3}"#), "units_consumed is above units_purchased"),
                (.init(status: 401), "HTTP 401"),
            ] {
                server.enqueue(Self.path, reply)
                #expect(await lookup.units(for: question) == .invalid(reason))
            }
            for status in [500, 503, 429] {
                server.enqueue(Self.path, .init(status: status))
                #expect(await lookup.units(for: question) == .failed("HTTP \(status)"))
            }
        }
        // Nothing listens: the connection fails, which may pass.
        let closed = try Self.lookup(
            base: "http://127.0.0.1:\(try FreeLocalPort.pick())", logger: logs.logger("lookup"))
        let refused = await closed.units(
            for: .init(store: .appStore, app: nil, productID: "coins", transactionID: "1", accountID: nil))
        #expect(refused == .failed("connect failed"))

        #expect(logs.lines.contains { $0.contains("consumption lookup: invalid") && $0.contains("HTTP 401") })
        #expect(
            logs.leaks(of: [("token", Self.token), ("body", "units: 3"), ("body", "units_purchased\": 3")]).isEmpty)
        let text = String(
            decoding: MetricsExposition.render(registry, declaring: [MetricNames.consumptionLookups]), as: UTF8.self)
        for result in ["found", "unknown", "invalid", "failed"] {
            #expect(text.contains(#"verify_consumption_lookups_total{result="\#(result)"}"#), "\(result) in:\n\(text)")
        }
    }

    @Test("a backend slower than consumption_lookup_timeout_ms is a failure that may pass")
    func timeout() async throws {
        try await AppleClientsFakeServer.withRunning { server, base in
            let lookup = ConsumptionLookup(
                transport: try CurlHTTPEngine(),
                configuration: ConsumptionLookupConfiguration(url: base + Self.path, timeout: .milliseconds(100)),
                logger: Logger(label: "lookup"))
            var slow = Self.units(1, of: 2)
            slow.delay = .seconds(5)
            server.enqueue(Self.path, slow)
            let outcome = await lookup.units(
                for: .init(store: .appStore, app: nil, productID: "coins", transactionID: "1", accountID: nil))
            #expect(outcome == .failed("timeout"))
            #expect(server.received(path: Self.path).first?.headers["authorization"] == nil, "no token: no header")
        }
    }

    @Test(
        "App Store body: no share for an auto-renewable subscription; a prorated refund of anything else without a share strictly between 0 and 100 % goes as data only"
    )
    func appleShareRules() {
        func body(_ type: ProductType, share: Int?, answer: RefundPolicy.Answer) -> ConsumptionInformation? {
            let facts = RefundFacts(
                store: .appStore, app: Self.bundleID, productID: "p", productType: type, purchaseAge: 0,
                consumedPercent: nil, earlierRefunds: 0, environment: "Production", delivered: true)
            let refund = RefundAnswer(
                delivered: true, sampleContentProvided: false, consumptionPercentageMilliunits: share,
                decision: RefundPolicy.Decision(rule: "r", answer: answer))
            return ConsumptionAnswerPlan(facts: facts, answer: refund, consented: true, lookup: nil).information
        }
        let subscription = body(.autoRenewable, share: 40_000, answer: .proratedRefund)
        #expect(subscription?.consumptionPercentage == nil, "Apple reckons a subscription's share itself")
        #expect(subscription?.refundPreference == .grantProrated)
        for (share, kept) in [(nil, false), (0, false), (1, true), (99_999, true), (100_000, false)] as [(Int?, Bool)] {
            let consumable = body(.consumable, share: share, answer: .proratedRefund)
            #expect(consumable?.refundPreference == (kept ? .grantProrated : nil), "share \(share ?? -1)")
            #expect(consumable?.consumptionPercentage == share, "share \(share ?? -1)")
        }
        #expect(body(.nonRenewing, share: nil, answer: .proratedRefund)?.refundPreference == nil)
        #expect(body(.consumable, share: 100_000, answer: .fullRefund)?.refundPreference == .grantFull)
        #expect(body(.consumable, share: 0, answer: .noRefund)?.refundPreference == .decline)
    }

    @Test("App Store: a rule on units consumed decides, and the body carries the share of a consumable's units")
    func appStoreAnswer() async throws {
        try await AppleClientsFakeServer.withRunning { server, base in
            try await LedgerTestSupport.withLedger(.sqlite) { ledger, _ in
                try await Self.grant(ledger, "2000", product: "coins", app: Self.bundleID, store: .appStore)
                let lookup = try Self.lookup(base: base)
                func plan() async throws -> ConsumptionAnswerPlan {
                    try await AppleFollowUps.consumptionAnswer(
                        for: "2000", environment: "Production", ledger: ledger, catalog: Self.catalog,
                        policy: try Self.policy(), customerConsented: true, now: Self.start, lookup: lookup)
                }
                server.enqueue(Self.path, Self.units(0, of: 10))
                let unused = try await plan()
                #expect(unused.rule == "unused")
                #expect(unused.information?.refundPreference == .grantFull)
                #expect(unused.information?.consumptionPercentage == 0)
                #expect(unused.lookup == .found(consumed: 0, purchased: 10))

                server.enqueue(Self.path, Self.units(3, of: 10))
                #expect(try await plan().rule == "default", "3 used: the unused rule does not match")

                server.enqueue(Self.path, Self.units(5, of: 10))
                let half = try await plan()
                #expect(half.facts.unitsConsumed == 5 && half.facts.unitsPurchased == 10)
                #expect(half.facts.consumedPercent == 50)
                let body = try #require(
                    try JSONSerialization.jsonObject(with: try JSONEncoder().encode(half.information))
                        as? [String: Any])
                #expect((body["consumptionPercentage"] as? NSNumber)?.intValue == 50_000)
                #expect(
                    server.received(path: Self.path).last?.query
                        == "store=app_store&app=com.example.app&product_id=coins&transaction_id=2000"
                        + "&account_id=acct%2F1%20%26%20co")

                // The backend does not know: the units stay unknown and neither the rule nor the share applies.
                server.enqueue(Self.path, .init(status: 404))
                let unknown = try await plan()
                #expect(unknown.rule == "default")
                #expect(unknown.lookup == .unknown)
                #expect(unknown.information?.consumptionPercentage == nil)
            }
        }
    }

    /// An App Store follow-ups object answering consumption requests through the fake server's Server API.
    static func appleFollowUps(
        base: String, ledger: any Ledger, now: TestNow, maximumAttempts: Int = 20
    ) throws -> AppleFollowUps {
        try FollowUpDurabilityTests.followUps(
            base: base, bundleID: bundleID, ledger: ledger,
            configuration: AppleFollowUpsConfiguration(
                finishTransactions: false, consumptionAnswers: true, customerConsented: true, catalog: catalog,
                refundPolicy: try policy(), holder: "worker-a", claimLease: .seconds(300), retryDelay: .seconds(60),
                maximumAttempts: maximumAttempts, claimRetryBackoff: .milliseconds(1) ... .milliseconds(5),
                consumptionLookup: try lookup(base: base)),
            now: { now.now })
    }

    @Test("App Store: a lookup that fails puts the answer back; the sweep answers with the units once it works")
    func appStorePutBack() async throws {
        try await AppleClientsFakeServer.withRunning { server, base in
            try await LedgerTestSupport.withLedger(.sqlite) { ledger, _ in
                try await Self.grant(ledger, "2000", product: "coins", app: Self.bundleID, store: .appStore)
                let answerPath = "/inApps/v2/transactions/consumption/2000"
                server.setFallback(answerPath, .init(status: 202))
                let now = TestNow(Self.start)
                let followUps = try Self.appleFollowUps(base: base, ledger: ledger, now: now)
                let call = FollowUpRecord.Call(
                    kind: .consumptionInformation, key: "notification-1", transactionID: "2000",
                    environment: "Production")
                #expect(await followUps.claimThenQueue(call))
                server.enqueue(Self.path, .init(status: 503), Self.units(5, of: 10))
                await followUps.make(call)
                let putBack = try #require(
                    try await ledger.followUpRecord(kind: .consumptionInformation, key: "notification-1"))
                #expect(putBack.state == .pending)
                #expect(putBack.detail == "consumption lookup failed: HTTP 503")
                #expect(server.received(path: answerPath).isEmpty, "nothing is sent to Apple while the lookup fails")

                now.advance(by: 61)
                await followUps.sweep()
                let answered = try await ledger.followUpRecord(kind: .consumptionInformation, key: "notification-1")
                #expect(answered?.state == .sent, "\(String(describing: answered))")
                let sent = try #require(server.received(path: answerPath).first?.jsonBody)
                #expect((sent["consumptionPercentage"] as? NSNumber)?.intValue == 50_000)
            }
        }
    }

    @Test("App Store: on the last attempt a failing lookup no longer holds the answer back: sent without the units")
    func appStoreLastAttempt() async throws {
        try await AppleClientsFakeServer.withRunning { server, base in
            try await LedgerTestSupport.withLedger(.sqlite) { ledger, _ in
                try await Self.grant(ledger, "2000", product: "coins", app: Self.bundleID, store: .appStore)
                let answerPath = "/inApps/v2/transactions/consumption/2000"
                server.setFallback(answerPath, .init(status: 202))
                server.setFallback(Self.path, .init(status: 500))
                let followUps = try Self.appleFollowUps(
                    base: base, ledger: ledger, now: TestNow(Self.start), maximumAttempts: 1)
                let call = FollowUpRecord.Call(
                    kind: .consumptionInformation, key: "notification-2", transactionID: "2000",
                    environment: "Production")
                #expect(await followUps.claimThenQueue(call))
                await followUps.make(call)
                let record = try await ledger.followUpRecord(kind: .consumptionInformation, key: "notification-2")
                #expect(record?.state == .sent)
                let sent = try #require(server.received(path: answerPath).first?.jsonBody)
                #expect(sent["consumptionPercentage"] == nil)
            }
        }
    }

    static func playFollowUps(
        base: String, ledger: any Ledger, calls: ScriptedPlayCalls, now: TestNow, maximumLookupAttempts: Int = 20
    ) throws -> GooglePlayFollowUps {
        GooglePlayFollowUps(
            calls: calls, store: ledger,
            configuration: GooglePlayFollowUpsConfiguration(
                catalog: catalog, holder: "worker-a", answersRefundReviews: true, refundPolicy: try policy(),
                retryDelay: .seconds(60), sweepInterval: .seconds(3600),
                claimRetryBackoff: .milliseconds(1) ... .milliseconds(5), consumptionLookup: try lookup(base: base),
                maximumLookupAttempts: maximumLookupAttempts),
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }), now: { now.now })
    }

    @Test("Google Play: a review of a one-time product carries its share; a 5xx puts it back, then it is answered")
    func googlePlayReview() async throws {
        try await AppleClientsFakeServer.withRunning { server, base in
            try await LedgerTestSupport.withLedger(.sqlite) { ledger, _ in
                try await Self.grant(ledger, "GPA.1", product: "gems", app: Self.package, store: .googlePlay)
                let calls = ScriptedPlayCalls()
                let now = TestNow(Self.start)
                let followUps = try Self.playFollowUps(base: base, ledger: ledger, calls: calls, now: now)
                server.enqueue(Self.path, .init(status: 503), Self.units(5, of: 10))
                #expect(
                    await followUps.refundReviewRequested(
                        packageName: Self.package, productID: "gems", orderID: "GPA.1", pendingRefundToken: "review-1"))
                await GooglePlayFollowUpsTests.drain(followUps)
                let putBack = try await ledger.followUpRecord(kind: .playRefundReview, key: "review-1")
                #expect(putBack?.state == .pending)
                #expect(putBack?.detail == "consumption lookup failed: HTTP 503")
                #expect(calls.reviews.isEmpty)

                now.advance(by: 61)
                await followUps.sweep()
                #expect(try await ledger.followUpRecord(kind: .playRefundReview, key: "review-1")?.state == .sent)
                #expect(calls.reviews.map(\.consumptionPercentageMilliunits) == [50_000])
                #expect(calls.reviews.first?.refundPreference == "NEUTRAL")
                #expect(
                    server.received(path: Self.path).last?.query
                        == "store=google_play&app=com.example.play&product_id=gems&transaction_id=GPA.1"
                        + "&account_id=acct%2F1%20%26%20co")

                // Nothing used: the policy's rule answers; unknown (404) and a malformed answer: no share, no retry.
                for (review, reply, preference, share) in [
                    ("review-2", Self.units(0, of: 10), "APPROVE", 0),
                    ("review-3", AppleClientsFakeServer.Reply(status: 404), "NEUTRAL", nil),
                    ("review-4", .json(#"{"units_consumed": "lots"}"#), "NEUTRAL", nil),
                ] as [(String, AppleClientsFakeServer.Reply, String, Int?)] {
                    server.enqueue(Self.path, reply)
                    let target = GooglePlayFollowUpTarget(
                        packageName: Self.package, productID: "gems", token: review, action: .reviewRefund,
                        orderID: "GPA.1")
                    #expect(await followUps.claimThenQueue(target))
                    await followUps.make(target)
                    #expect(try await ledger.followUpRecord(kind: .playRefundReview, key: review)?.state == .sent)
                    let answer = try #require(calls.reviews.last)
                    #expect(answer.pendingRefundToken == review)
                    #expect(answer.refundPreference == preference, "\(review)")
                    #expect(answer.consumptionPercentageMilliunits == share, "\(review)")
                }
            }
        }
    }

    @Test("Google Play: once the lookup's attempts run out the review is answered without the units")
    func googlePlayLastAttempt() async throws {
        try await AppleClientsFakeServer.withRunning { server, base in
            try await LedgerTestSupport.withLedger(.sqlite) { ledger, _ in
                try await Self.grant(ledger, "GPA.1", product: "gems", app: Self.package, store: .googlePlay)
                server.setFallback(Self.path, .init(status: 429))
                let calls = ScriptedPlayCalls()
                let followUps = try Self.playFollowUps(
                    base: base, ledger: ledger, calls: calls, now: TestNow(Self.start), maximumLookupAttempts: 1)
                let target = GooglePlayFollowUpTarget(
                    packageName: Self.package, productID: "gems", token: "review-9", action: .reviewRefund,
                    orderID: "GPA.1")
                #expect(await followUps.claimThenQueue(target))
                await followUps.make(target)
                #expect(try await ledger.followUpRecord(kind: .playRefundReview, key: "review-9")?.state == .sent)
                #expect(calls.reviews.map(\.consumptionPercentageMilliunits) == [nil])
            }
        }
    }

    @Test("explain: the units next to the consumed share, and how the lookup answered")
    func explain() async throws {
        try await AppleClientsFakeServer.withRunning { server, base in
            try await LedgerTestSupport.withLedger(.sqlite) { ledger, _ in
                try await Self.grant(ledger, "2000", product: "coins", app: Self.bundleID, store: .appStore)
                let lookup = try Self.lookup(base: base)
                func explain() async throws -> [String: Any] {
                    try await RefundPolicyExplanation.explain(
                        transactionID: "2000", store: nil, productID: nil, ledger: ledger, catalog: Self.catalog,
                        policy: try Self.policy(), customerConsented: true, now: Self.start, lookup: lookup)
                }
                server.enqueue(Self.path, Self.units(5, of: 10))
                let found = try await explain()
                let facts = try #require(found["facts"] as? [String: Any])
                #expect(facts["units_consumed"] as? Int == 5)
                #expect(facts["units_purchased"] as? Int == 10)
                #expect(facts["consumed_percent"] as? Double == 50)
                #expect(found["consumption_lookup"] as? String == "found")
                #expect(((found["body"] as? [String: Any])?["consumptionPercentage"] as? NSNumber)?.intValue == 50_000)

                server.enqueue(Self.path, .init(status: 502))
                let failed = try await explain()
                #expect(failed["consumption_lookup"] as? String == "lookup failed: HTTP 502")
                #expect((failed["facts"] as? [String: Any])?["units_consumed"] is NSNull)
                #expect(failed["sent"] as? Bool == true, "explain reports the failure; it does not retry")

                let without = try await RefundPolicyExplanation.explain(
                    transactionID: "2000", store: nil, productID: nil, ledger: ledger, catalog: Self.catalog,
                    policy: try Self.policy(), customerConsented: true, now: Self.start)
                #expect(without["consumption_lookup"] is NSNull)
            }
        }
    }
    @Test("the explain command: the lookup's options checked as the worker's settings; its answer in the JSON")
    func explainCommand() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "consumption-lookup-cli-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let catalog = directory.appendingPathComponent("catalog.json")
        try Data(#"{"bundle_ids":["com.example.app"],"products":[{"id":"coins","type":"consumable"}]}"#.utf8)
            .write(to: catalog)
        let policy = directory.appendingPathComponent("refunds.json")
        try Data(Self.policyJSON.utf8).write(to: policy)
        let tokenFile = directory.appendingPathComponent("token")
        try Data("\(Self.token)\n".utf8).write(to: tokenFile)
        // The options alone, not a lookup the test process's environment may name.
        let environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("VERIFY_CONSUMPTION_LOOKUP") }
        try await AppleClientsFakeServer.withRunning { server, base in
            try await LedgerTestSupport.withLedger(.sqlite) { ledger, url in
                try await Self.grant(ledger, "2000", product: "coins", app: Self.bundleID, store: .appStore)
                let explain = [
                    "refund-policy", "explain", "--transaction", "2000", "--ledger-url", url, "--catalog-file",
                    catalog.path, "--refund-policy-file", policy.path, "--customer-consented", "true",
                ]
                let refused = try await CommandProcess.run(
                    explain + ["--consumption-lookup-url", "http://backend.internal/usage"], environment: environment)
                #expect(refused.status == 2)
                #expect(
                    refused.stderr
                        == "verify-worker refund-policy explain: configuration: consumption_lookup_url: must be "
                        + "https://, or http:// to a loopback host (a local backend)\n")

                server.enqueue(Self.path, Self.units(0, of: 20))
                let answered = try await CommandProcess.run(
                    explain + [
                        "--consumption-lookup-url", base + Self.path, "--consumption-lookup-token-file", tokenFile.path,
                    ], environment: environment)
                #expect(answered.status == 0, "\(answered.stderr)")
                let report = try #require(
                    try JSONSerialization.jsonObject(with: Data(answered.stdout.utf8)) as? [String: Any])
                #expect(report["rule"] as? String == "unused")
                #expect(report["consumption_lookup"] as? String == "found")
                #expect((report["facts"] as? [String: Any])?["units_purchased"] as? Int == 20)
                #expect(server.received(path: Self.path).first?.headers["authorization"] == "Bearer \(Self.token)")
                #expect(!answered.stdout.contains(Self.token) && !answered.stderr.contains(Self.token))
            }
        }
    }
}
