import Foundation
import GooglePlayClients
import Ledger
import Logging
import Messages
import PlaySimulator
import RateLimiter
import StoreHTTP
import Testing

@testable import Decision
@testable import Worker

/// The Developer API client as the follow-ups call it.
private struct ClientCalls: GooglePlayPurchaseCalls {
    let client: GooglePlayAPIClient<ContinuousClock>

    func acknowledge(
        packageName: String, productID: String, token: String, subscription: Bool, deadline: ContinuousClock.Instant
    ) async -> GooglePlayOutcome<GooglePlayAccepted> {
        await client.acknowledge(
            packageName: packageName, productID: productID, token: token, subscription: subscription, deadline: deadline
        )
    }

    func consume(
        packageName: String, productID: String, token: String, deadline: ContinuousClock.Instant
    ) async -> GooglePlayOutcome<GooglePlayAccepted> {
        await client.consume(packageName: packageName, productID: productID, token: token, deadline: deadline)
    }

    func reviewRefund(
        packageName: String, orderID: String, review: GooglePlayRefundReview, deadline: ContinuousClock.Instant
    ) async -> GooglePlayOutcome<GooglePlayAccepted> {
        await client.reviewRefund(packageName: packageName, orderID: orderID, review: review, deadline: deadline)
    }
}

/// The follow-ups against the Play simulator through the real Developer API client: the purchases they acknowledge
/// or consume are still the customer's after Google's three days, where one nobody acknowledged is refunded.
@Suite("Google Play follow-ups: against the Play simulator", .timeLimit(.minutes(2)))
struct GooglePlayFollowUpsSimulatorTests {
    /// The real Developer API client of the simulator's service account, over `engine`.
    static func client(of sim: PlaySimHarness, engine: CurlHTTPEngine) throws -> GooglePlayAPIClient<ContinuousClock> {
        let account = try GooglePlayServiceAccount(json: sim.account.keyFileJSON())
        let gate = AppleCallGate(
            configuration: .googlePlay(), clock: ContinuousClock(), metrics: NoRateLimiterMetrics())
        let clock = sim.clock
        let tokens = GooglePlayAccessTokens(
            account: account, tokenURL: sim.account.tokenURI, transport: engine, now: { clock.now() },
            admission: GooglePlayAccessTokens.admission(through: gate))
        return GooglePlayAPIClient(
            configuration: GooglePlayAPIConfiguration(baseURL: sim.base, tokenURL: sim.account.tokenURI),
            transport: engine, tokens: tokens, gate: gate, clock: ContinuousClock())
    }

    @Test("acknowledged and consumed through the real client: not refunded after the simulated three days")
    func notRefunded() async throws {
        try await PlaySimHarness.with { sim in
            let engine = try CurlHTTPEngine()
            defer { engine.shutdown() }
            let client = try Self.client(of: sim, engine: engine)

            let products: [(id: String, type: String)] = [
                ("com.example.app.unlock", "non_consumable"), ("com.example.app.coins", "consumable"),
                ("com.example.app.premium", "auto_renewable"),
            ]
            var minted: [GooglePlayPurchase] = []
            for product in products {
                let answer = try await sim.mint(product: product.id, type: product.type)
                let token = try #require(answer["purchase_token"] as? String)
                minted.append(
                    GooglePlayPurchase(packageName: PlaySimHarness.package, productID: product.id, purchaseToken: token)
                )
            }
            let purchases = minted
            let forgotten = try #require(
                try await sim.mint(product: "com.example.app.unlock", type: "non_consumable")["purchase_token"]
                    as? String)

            try await LedgerTestSupport.withLedger(.sqlite) { ledger, _ in
                let followUps = GooglePlayFollowUps(
                    calls: ClientCalls(client: client), store: ledger,
                    configuration: GooglePlayFollowUpsConfiguration(
                        catalog: GooglePlayFollowUpsTests.catalog, holder: "worker-a", sweepInterval: .seconds(3600)),
                    logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
                for (index, purchase) in purchases.enumerated() {
                    let job = ReceiptJob(
                        jobID: "play-\(index)", accountID: "acct-\(index)", proof: .googlePlay(purchase))
                    let verdict = Verdict(
                        job: job, outcome: .granted, decidedBy: .apple,
                        transactions: [.init(transactionID: purchase.purchaseToken, productID: purchase.productID)],
                        decidedAt: Date())
                    #expect(await followUps.verdictDelivered(verdict, job: job))
                    // A redelivery asks for nothing more.
                    #expect(await followUps.verdictDelivered(verdict, job: job))
                }
                await GooglePlayFollowUpsTests.drain(followUps)
                for purchase in purchases {
                    let kind: FollowUpRecord.Kind =
                        purchase.productID == "com.example.app.coins" ? .playConsume : .playAcknowledge
                    let record = try await ledger.followUpRecord(kind: kind, key: purchase.purchaseToken)
                    #expect(record?.state == .sent, "\(purchase.productID): \(record?.detail ?? "no record")")
                }
                #expect(await followUps.refreshOldestUnacknowledged() == 0)
            }

            sim.advance(days: 3.5)
            for purchase in purchases {
                let truth = try await sim.truth(purchase.purchaseToken)
                #expect(truth["acknowledged"] as? Bool == true, "\(purchase.productID)")
                #expect(truth["state"] as? String != "refunded", "\(purchase.productID)")
                let calls =
                    purchase.productID == "com.example.app.coins"
                    ? (truth["consume_calls"] as? Int, truth["acknowledge_calls"] as? Int)
                    : (truth["acknowledge_calls"] as? Int, truth["consume_calls"] as? Int)
                #expect(calls.0 == 1 && (calls.1 ?? 0) == 0, "\(purchase.productID): one call of its kind")
            }
            #expect(try await sim.truth(purchases[1].purchaseToken)["consumed"] as? Bool == true)
            #expect(try await sim.truth(forgotten)["state"] as? String == "refunded")
        }
    }
    @Test(
        "a refund review answered once through the real client: the simulator records one answer, a repeat is refused")
    func refundReviewAnswered() async throws {
        try await PlaySimHarness.with { sim in
            let engine = try CurlHTTPEngine()
            defer { engine.shutdown() }
            let client = try Self.client(of: sim, engine: engine)
            let minted = try await sim.mint(product: "com.example.app.unlock", type: "non_consumable")
            let token = try #require(minted["purchase_token"] as? String)
            let opened = try await sim.post("/sim/lifecycle", ["purchase_token": token, "event": "chargeback"])
            let review = try #require(opened.json["review"] as? [String: Any], "\(opened.status)")
            let orderID = try #require(review["order_id"] as? String)
            let pendingRefundToken = try #require(review["pending_refund_token"] as? String)

            try await LedgerTestSupport.withLedger(.sqlite) { ledger, _ in
                let catalog = Catalog(playProducts: [
                    .init(id: "com.example.app.unlock", type: .nonConsumable, refundPreference: "DECLINE")
                ])
                let followUps = GooglePlayFollowUps(
                    calls: ClientCalls(client: client), store: ledger,
                    configuration: GooglePlayFollowUpsConfiguration(
                        catalog: catalog, holder: "worker-a", answersRefundReviews: true,
                        refundPolicy: RefundPolicy(rules: [
                            .init(name: "never-delivered", delivered: false, answer: .fullRefund)
                        ]),
                        sweepInterval: .seconds(3600)),
                    logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
                for _ in 0..<2 {
                    #expect(
                        await followUps.refundReviewRequested(
                            packageName: PlaySimHarness.package, productID: "com.example.app.unlock",
                            orderID: orderID, pendingRefundToken: pendingRefundToken))
                }
                await GooglePlayFollowUpsTests.drain(followUps)
                let record = try await ledger.followUpRecord(kind: .playRefundReview, key: pendingRefundToken)
                #expect(record?.state == .sent, "\(record?.detail ?? "no record")")
                #expect(record?.detail == "rule never-delivered")
            }
            let reviews = try await sim.get("/sim/reviews").json["reviews"] as? [[String: Any]] ?? []
            let answers = reviews.first?["answers"] as? [[String: Any]] ?? []
            #expect(answers.count == 1)
            let body = answers.first?["body"] as? [String: Any]
            // The ledger holds no claim on the order here: the customer has nothing, and the policy's rule for that
            // approves the refund.
            #expect(body?["refundPreference"] as? String == "APPROVE")
            #expect(body?["pendingRefundToken"] as? String == pendingRefundToken)
            // Google takes one answer per review: the client reports a second as refused.
            let again = await client.reviewRefund(
                packageName: PlaySimHarness.package, orderID: orderID,
                review: GooglePlayRefundReview(
                    pendingRefundToken: pendingRefundToken, sampleContentProvided: false, refundPreference: "NEUTRAL"))
            guard case .rejected = again else {
                Issue.record("a second answer: \(again)")
                return
            }
        }
    }
}
