import Decision
import Foundation
import Ledger
import Logging
import Messages
import Testing

@testable import GooglePlayClients
@testable import Worker

/// Google Play's pending refund reviews: one `orders.reviewrefund` answer per review across Pub/Sub's redeliveries
/// and workers, built from the ledger's claim on the order and the catalog's `play_products`.
@Suite("Google Play refund reviews: one answer per review, from the ledger", .timeLimit(.minutes(2)))
struct GooglePlayRefundReviewTests {
    static let package = "com.example.app"
    static let start = Date(timeIntervalSince1970: 1_800_000_000)
    static let catalog = Catalog(playProducts: [
        .init(id: "com.example.app.coins", type: .consumable),
        .init(
            id: "com.example.app.unlock", type: .nonConsumable, refundPreference: "DECLINE",
            sampleContentProvided: true),
        .init(id: "com.example.app.premium", type: .autoRenewable, basePlans: ["monthly"]),
    ])

    static func followUps(
        _ ledger: any Ledger, _ calls: any GooglePlayPurchaseCalls, holder: String, now: TestNow,
        answers: Bool = true
    ) -> GooglePlayFollowUps {
        GooglePlayFollowUps(
            calls: calls, store: ledger,
            configuration: GooglePlayFollowUpsConfiguration(
                catalog: catalog, holder: holder, answersRefundReviews: answers, claimLease: .seconds(300),
                retryDelay: .seconds(60), sweepInterval: .seconds(3600),
                claimRetryBackoff: .milliseconds(1) ... .milliseconds(5)),
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }), now: { now.now })
    }

    static func claim(
        _ orderID: String, product: String, type: ProductType, purchased: Date = start, expires: Date? = nil,
        revokedAt: Date? = nil
    ) -> TransactionClaim {
        TransactionClaim(
            transactionID: orderID, originalTransactionID: "token-\(orderID)", accountID: "acct-1", productID: product,
            productType: type, purchaseDate: purchased, expiresDate: expires, revokedAt: revokedAt,
            grantedJobID: "job-\(orderID)", verdictID: "verdict-\(orderID)", createdAt: start, updatedAt: start)
    }

    static func grant(_ ledger: any Ledger, _ claim: TransactionClaim) async throws {
        let job = ReceiptJob(
            jobID: claim.grantedJobID, accountID: claim.accountID,
            proof: .googlePlay(
                GooglePlayPurchase(packageName: package, productID: claim.productID, purchaseToken: "t")))
        let verdict = Verdict(job: job, outcome: .granted, decidedBy: .googlePlay, decidedAt: start)
        _ = try await ledger.apply(LedgerDecision(verdict: verdict, writes: [.claim(claim)]))
    }

    /// The answer to Google's review of the order whose ledger claim is `claim` (nil: nobody was granted it), for
    /// `productID`, under the policy without a file, as the worker builds it.
    static func answer(claim: TransactionClaim?, productID: String, now: Date) -> RefundAnswer {
        let facts = RefundFacts(
            store: .googlePlay, claim: claim, productID: productID, app: nil, environment: nil, accountClaims: [],
            catalog: catalog, now: now)
        return RefundAnswer(facts: facts, catalog: catalog, policy: RefundPolicy(catalog: catalog))
    }

    @Test("the answer: the catalog's preference while the customer has it, else the default; a period's share used")
    func answerRules() {
        let now = Self.start.addingTimeInterval(7.5 * 86_400)
        let month = Self.start.addingTimeInterval(30 * 86_400)
        let unlock = Self.claim("GPA.1", product: "com.example.app.unlock", type: .nonConsumable)
        let kept = Self.answer(claim: unlock, productID: unlock.productID, now: now)
        #expect(
            kept
                == RefundAnswer(
                    delivered: true, sampleContentProvided: true,
                    decision: RefundPolicy.Decision(rule: "catalog:com.example.app.unlock", answer: .noRefund)))
        #expect(kept.googleRefundPreference == "DECLINE")
        // The catalog's shorthand holds while the customer has the purchase; without it the default is data only.
        var revoked = unlock
        revoked.revokedAt = now
        #expect(
            Self.answer(claim: revoked, productID: unlock.productID, now: now)
                .googleRefundPreference == "NEUTRAL")
        #expect(
            Self.answer(claim: nil, productID: unlock.productID, now: now)
                .googleRefundPreference == "NEUTRAL")
        let premium = Self.claim("GPA.2", product: "com.example.app.premium", type: .autoRenewable, expires: month)
        let answer = Self.answer(claim: premium, productID: premium.productID, now: now)
        #expect(
            answer
                == RefundAnswer(delivered: true, sampleContentProvided: false, consumptionPercentageMilliunits: 25_000))
        #expect(answer.googleRefundPreference == "NEUTRAL")
        #expect(answer.decision.rule == "default")
        // At the edges of the period: 0 before it starts, 100 % (Google's maximum) after it ended.
        let before = Self.answer(claim: premium, productID: premium.productID, now: Self.start.addingTimeInterval(-1))
        #expect(before.consumptionPercentageMilliunits == 0)
        let after = Self.answer(claim: premium, productID: premium.productID, now: month.addingTimeInterval(1))
        #expect(after.consumptionPercentageMilliunits == GooglePlayRefundReview.fullConsumption)
        let coins = Self.claim("GPA.3", product: "com.example.app.coins", type: .consumable)
        #expect(
            Self.answer(claim: coins, productID: coins.productID, now: now)
                .consumptionPercentageMilliunits == nil)
    }

    @Test("a play product's refund answer keys: read, written back, and refused when malformed")
    func catalogKeys() throws {
        let text = """
            {"play_products":[{"id":"p","type":"non_consumable","refund_preference":"APPROVE",
            "sample_content_provided":true}]}
            """
        let catalog = try Catalog.load(json: Data(text.utf8))
        #expect(catalog.playProducts["p"]?.refundPreference == "APPROVE")
        #expect(catalog.playProducts["p"]?.sampleContentProvided == true)
        let again = try Catalog.load(json: try JSONEncoder().encode(catalog))
        #expect(again == catalog)
        for bad in [
            #"{"id":"p","type":"non_consumable","refund_preference":"GRANT_FULL"}"#,
            #"{"id":"p","type":"non_consumable","refund_preference":7}"#,
            #"{"id":"p","type":"non_consumable","sample_content_provided":"yes"}"#,
        ] {
            #expect(throws: CatalogError.self) { try Catalog.load(json: Data("{\"play_products\":[\(bad)]}".utf8)) }
        }
    }

    @Test(
        "one answer per review across redeliveries and two workers, built from the order's claim",
        arguments: LedgerBackend.allCases)
    func oncePerReview(backend: LedgerBackend) async throws {
        try await LedgerTestSupport.withLedger(backend) { ledger, _ in
            try await Self.grant(ledger, Self.claim("GPA.10", product: "com.example.app.unlock", type: .nonConsumable))
            let calls = ScriptedPlayCalls()
            let now = TestNow(Self.start.addingTimeInterval(3600))
            let first = Self.followUps(ledger, calls, holder: "worker-a", now: now)
            let second = Self.followUps(ledger, calls, holder: "worker-b", now: now)
            let recorded = await withTaskGroup(of: Bool.self) { group in
                for followUps in [first, second, first, second] {
                    group.addTask {
                        await followUps.refundReviewRequested(
                            packageName: Self.package, productID: "com.example.app.unlock", orderID: "GPA.10",
                            pendingRefundToken: "review-1")
                    }
                }
                return await group.reduce(into: [Bool]()) { $0.append($1) }
            }
            #expect(recorded == [true, true, true, true])
            await GooglePlayFollowUpsTests.drain(first, second)
            #expect(calls.made.count == 1)
            #expect(calls.made.first?.productID == "GPA.10")
            #expect(
                calls.reviews == [
                    GooglePlayRefundReview(
                        pendingRefundToken: "review-1", sampleContentProvided: true, refundPreference: "DECLINE")
                ])
            let record = try #require(try await ledger.followUpRecord(kind: .playRefundReview, key: "review-1"))
            #expect(record.state == .sent)
            #expect(record.call.transactionID == "GPA.10")
        }
    }

    @Test("answers off: nothing recorded, nothing called")
    func off() async throws {
        try await LedgerTestSupport.withLedger(.sqlite) { ledger, _ in
            let calls = ScriptedPlayCalls()
            let followUps = Self.followUps(ledger, calls, holder: "w", now: TestNow(Self.start), answers: false)
            #expect(
                await followUps.refundReviewRequested(
                    packageName: Self.package, productID: "com.example.app.unlock", orderID: "GPA.11",
                    pendingRefundToken: "review-2"))
            await GooglePlayFollowUpsTests.drain(followUps)
            #expect(calls.made.isEmpty)
            let record = try await ledger.followUpRecord(kind: .playRefundReview, key: "review-2")
            #expect(record == nil)
        }
    }

    @Test(
        "a 503 is put back and the sweep answers it; Google's refusal (a second answer, the deadline passed) fails it")
    func retriedThenRefused() async throws {
        try await LedgerTestSupport.withLedger(.sqlite) { ledger, _ in
            let unavailable = GooglePlayOutcome<GooglePlayAccepted>.retryable(
                GooglePlayRetryAdvice(reason: .httpStatus(503)))
            let refused = GooglePlayOutcome<GooglePlayAccepted>.rejected(
                GooglePlayAPIError(code: .badRequest, httpStatus: 400, detail: "review already answered"))
            let calls = ScriptedPlayCalls(["review-3": [unavailable], "review-4": [refused]])
            let now = TestNow(Self.start)
            let followUps = Self.followUps(ledger, calls, holder: "w", now: now)
            for (order, review) in [("GPA.12", "review-3"), ("GPA.13", "review-4")] {
                #expect(
                    await followUps.refundReviewRequested(
                        packageName: Self.package, productID: "com.example.app.premium", orderID: order,
                        pendingRefundToken: review))
            }
            await GooglePlayFollowUpsTests.drain(followUps)
            let retried = try await ledger.followUpRecord(kind: .playRefundReview, key: "review-3")
            let failed = try await ledger.followUpRecord(kind: .playRefundReview, key: "review-4")
            #expect(retried?.state == .pending)
            #expect(failed?.state == .failed)
            #expect(await followUps.refreshOldestUnacknowledged() == 0)
            now.advance(by: 61)
            let sweeper = Self.followUps(ledger, calls, holder: "w2", now: now)
            await sweeper.sweep()
            let answered = try await ledger.followUpRecord(kind: .playRefundReview, key: "review-3")
            #expect(answered?.state == .sent)
            // Not delivered (the ledger holds no claim on the order), no policy file: the default, data only.
            #expect(calls.reviews.last?.refundPreference == "NEUTRAL")
            #expect(calls.made.filter { $0.token == "review-3" }.count == 2)
        }
    }
    static func reviewJob(messageID: String, order: String, review: String) -> ReceiptJob {
        let notification = """
            {"version":"1.0","packageName":"\(package)","eventTimeMillis":"1800000000000",
            "pendingRefundReviewNotification":{"purchaseToken":"token-x","orderId":"\(order)",
            "pendingRefundToken":"\(review)"}}
            """
        return GooglePlayNotificationJob.job(
            packageName: package, purchaseToken: "token-x", notification: notification, messageID: messageID,
            submittedAt: start)
    }

    @Test("a review notification's verdict asks for its answer once it was read against the ledger; else nothing")
    func fromNotificationVerdicts() async throws {
        try await LedgerTestSupport.withLedger(.sqlite) { ledger, _ in
            let calls = ScriptedPlayCalls()
            let followUps = Self.followUps(ledger, calls, holder: "w", now: TestNow(Self.start))
            let followsUp = VerdictFollowUps.followsUp(appStore: nil, googlePlay: followUps)
            let afterDelivery = try #require(VerdictFollowUps.afterDelivery(appStore: nil, googlePlay: followUps))
            let job = Self.reviewJob(messageID: "100", order: "GPA.20", review: "review-20")
            let redelivered = Self.reviewJob(messageID: "101", order: "GPA.20", review: "review-20")
            let applied = Verdict(
                job: job, outcome: .alreadyGranted, decidedBy: .googlePlay,
                transactions: [.init(transactionID: "GPA.20", productID: "com.example.app.unlock", orderID: "GPA.20")],
                decidedAt: Self.start)
            let unverifiable = Verdict(
                job: job, outcome: .unverifiable, reason: .googlePlayUnavailable, decidedBy: .googlePlay,
                decidedAt: Self.start)
            #expect(followsUp(applied, job))
            #expect(!followsUp(unverifiable, job))
            #expect(await afterDelivery(unverifiable, job))
            #expect(await afterDelivery(applied, job))
            #expect(await afterDelivery(applied, redelivered))
            // A Play notification of another kind asks for nothing.
            let renewal = GooglePlayNotificationJob.job(
                packageName: Self.package, purchaseToken: "token-x",
                notification: #"{"packageName":"com.example.app","subscriptionNotification":"#
                    + #"{"version":"1.0","notificationType":2,"purchaseToken":"token-x"}}"#,
                messageID: "102", submittedAt: Self.start)
            #expect(!followsUp(applied, renewal))
            await GooglePlayFollowUpsTests.drain(followUps)
            #expect(calls.made.map(\.token) == ["review-20"])
            let record = try await ledger.followUpRecord(kind: .playRefundReview, key: "review-20")
            #expect(record?.call.environment == "com.example.app/orders/com.example.app.unlock")
        }
    }
}
