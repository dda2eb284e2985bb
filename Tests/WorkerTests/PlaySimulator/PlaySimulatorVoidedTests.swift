import Foundation
import Messages
import PlaySimulator
import Testing

@Suite("Play simulator: the Voided Purchases API", .timeLimit(.minutes(2)))
struct PlaySimulatorVoidedTests {
    static let path = PlaySimHarness.api + "voidedpurchases"
    static let day: TimeInterval = 86_400

    static func tokens(_ reply: PlaySimHarness.Reply) -> [String] {
        (reply.json["voidedPurchases"] as? [[String: Any]] ?? []).compactMap { $0["purchaseToken"] as? String }
    }

    /// Mints and refunds a one-time purchase now; returns its token.
    func refunded(_ sim: PlaySimHarness) async throws -> String {
        let token = try #require(try await sim.mint()["purchase_token"] as? String)
        try await sim.lifecycle(token, "refund")
        return token
    }

    @Test(
        "records in voiding order with Google's fields; type 0 lists one-time products only, type 1 subscriptions too")
    func fieldsAndType() async throws {
        try await PlaySimHarness.with({ $0.accessTokenLifetime = 31_536_000 }) { sim in
            let bearer = try await sim.accessToken()
            let minted = try await sim.mint()
            let product = try #require(minted["purchase_token"] as? String)
            let purchaseTime = try #require(minted["purchase_time_ms"] as? Int64)
            sim.advance(days: 1)
            try await sim.lifecycle(product, "refund")
            let voidedAt = sim.clock.now().epochMilliseconds
            sim.advance(days: 1)
            let plan = try #require(
                try await sim.subscribe()["purchase_token"] as? String)
            try await sim.lifecycle(plan, "revoke", ["refund": true])

            let onlyProducts = try await sim.get(Self.path, bearer: bearer)
            #expect(onlyProducts.status == 200)
            let records = try #require(onlyProducts.json["voidedPurchases"] as? [[String: Any]])
            #expect(records.count == 1)
            let record = try #require(records.first)
            #expect(record["kind"] as? String == "androidpublisher#voidedPurchase")
            #expect(record["purchaseToken"] as? String == product)
            #expect(record["orderId"] as? String == minted["order_id"] as? String)
            #expect(record["purchaseTimeMillis"] as? String == String(purchaseTime))
            #expect(record["voidedTimeMillis"] as? String == String(voidedAt))
            #expect(record["voidedSource"] as? Int == 2)
            #expect(record["voidedReason"] as? Int == 0)
            #expect(record["voidedQuantity"] == nil)
            let both = try await sim.get(Self.path + "?type=1", bearer: bearer)
            #expect(Self.tokens(both) == [product, plan])
            #expect((try await sim.get(Self.path + "?type=2", bearer: bearer)).status == 400)
            // Authenticated like the other routes.
            #expect((try await sim.get(Self.path)).status == 401)
        }
    }

    @Test("startTime at 30 days is accepted, a millisecond older is 400; endTime in the future is 400")
    func windowEdges() async throws {
        try await PlaySimHarness.with({ $0.accessTokenLifetime = 31_536_000 }) { sim in
            let bearer = try await sim.accessToken()
            sim.advance(days: 40)
            let now = sim.clock.now().epochMilliseconds
            let oldest = now - Int64(30 * Self.day * 1000)
            #expect((try await sim.get(Self.path + "?startTime=\(oldest)", bearer: bearer)).status == 200)
            #expect((try await sim.get(Self.path + "?startTime=\(oldest + 1)", bearer: bearer)).status == 200)
            let tooOld = try await sim.get(Self.path + "?startTime=\(oldest - 1)", bearer: bearer)
            #expect(tooOld.status == 400)
            #expect(tooOld.reason == "invalid")
            #expect((try await sim.get(Self.path + "?endTime=\(now)", bearer: bearer)).status == 200)
            #expect((try await sim.get(Self.path + "?endTime=\(now + 1)", bearer: bearer)).status == 400)
            #expect((try await sim.get(Self.path + "?startTime=abc", bearer: bearer)).status == 400)
        }
    }

    @Test("a record is listed inside [startTime, endTime] and drops out once older than 30 days")
    func windowsAndDropOut() async throws {
        try await PlaySimHarness.with({ $0.accessTokenLifetime = 31_536_000 }) { sim in
            let bearer = try await sim.accessToken()
            let first = try await refunded(sim)
            let firstAt = sim.clock.now().epochMilliseconds
            sim.advance(days: 2)
            let second = try await refunded(sim)
            let secondAt = sim.clock.now().epochMilliseconds
            sim.advance(days: 1)
            #expect(Self.tokens(try await sim.get(Self.path, bearer: bearer)) == [first, second])
            #expect(
                Self.tokens(try await sim.get(Self.path + "?startTime=\(firstAt + 1)", bearer: bearer)) == [second])
            #expect(Self.tokens(try await sim.get(Self.path + "?endTime=\(secondAt - 1)", bearer: bearer)) == [first])
            #expect(
                Self.tokens(
                    try await sim.get(Self.path + "?startTime=\(secondAt)&endTime=\(secondAt)", bearer: bearer))
                    == [second])
            // 30 days after the first was voided it is still listed; a millisecond later it is gone.
            sim.clock.advance(by: 30 * Self.day - 3 * Self.day)
            #expect(Self.tokens(try await sim.get(Self.path, bearer: bearer)) == [first, second])
            sim.clock.advance(by: 0.001)
            #expect(Self.tokens(try await sim.get(Self.path, bearer: bearer)) == [second])
        }
    }

    @Test("pagination by nextPageToken, maxResults per page; stats count the pages")
    func pagination() async throws {
        try await PlaySimHarness.with({ $0.accessTokenLifetime = 31_536_000 }) { sim in
            let bearer = try await sim.accessToken()
            var expected: [String] = []
            for _ in 0..<5 {
                expected.append(try await refunded(sim))
                sim.clock.advance(by: 1)
            }
            _ = try await sim.post("sim/stats/reset", [:])
            var listed: [String] = []
            var next: String? = nil
            var pages = 0
            repeat {
                let query = next.map { "?maxResults=2&token=\($0)" } ?? "?maxResults=2"
                let page = try await sim.get(Self.path + query, bearer: bearer)
                #expect(page.status == 200)
                listed += Self.tokens(page)
                next = (page.json["tokenPagination"] as? [String: Any])?["nextPageToken"] as? String
                pages += 1
            } while next != nil && pages < 10
            #expect(listed == expected)
            #expect(pages == 3)
            let stats = try await sim.get("sim/stats").json
            #expect((stats["voided_purchases"] as? [String: Any])?["pages"] as? Int == 3)
            #expect((stats["voided_purchases"] as? [String: Any])?["records"] as? Int == 5)
            #expect((stats["requests"] as? [String: Any])?["purchases.voidedpurchases.list"] as? Int == 3)
            #expect((try await sim.get(Self.path + "?token=garbage", bearer: bearer)).status == 400)
        }
    }

    @Test("an approved chargeback voids the reviewed order (reason 7), even after the subscription renewed")
    func chargebackVoidsReviewedOrder() async throws {
        try await PlaySimHarness.with({ $0.accessTokenLifetime = 31_536_000 }) { sim in
            let bearer = try await sim.accessToken()
            let minted = try await sim.subscribe()
            let token = try #require(minted["purchase_token"] as? String)
            let review = try #require(try await sim.lifecycle(token, "chargeback")["review"] as? [String: Any])
            #expect(review["order_id"] as? String == minted["order_id"] as? String)
            sim.advance(days: 29)
            try await sim.lifecycle(token, "renew")
            try await sim.lifecycle(token, "chargeback_resolve")
            let record = try #require(
                (try await sim.get(Self.path + "?type=1", bearer: bearer).json["voidedPurchases"] as? [[String: Any]])?
                    .first)
            #expect(record["orderId"] as? String == minted["order_id"] as? String)
            #expect(record["voidedReason"] as? Int == 7)
            #expect(record["voidedSource"] as? Int == 2)
            #expect(try await sim.truth(token)["state"] as? String == "revoked")
        }
    }

    @Test("quantity-based partial refunds are listed only with includeQuantityBasedPartialRefund=true")
    func partialRefunds() async throws {
        try await PlaySimHarness.with({ $0.accessTokenLifetime = 31_536_000 }) { sim in
            let bearer = try await sim.accessToken()
            let token = try #require(try await sim.mint(extra: ["quantity": 3])["purchase_token"] as? String)
            try await sim.lifecycle(token, "refund", ["quantity": 1])
            #expect(Self.tokens(try await sim.get(Self.path, bearer: bearer)).isEmpty)
            let partial = try await sim.get(Self.path + "?includeQuantityBasedPartialRefund=true", bearer: bearer)
            let record = try #require((partial.json["voidedPurchases"] as? [[String: Any]])?.first)
            #expect(record["voidedQuantity"] as? Int == 1)
        }
    }

    @Test("an unacknowledged purchase Google refunded after three days is listed with reason 8; faults apply")
    func unacknowledgedAndFaults() async throws {
        try await PlaySimHarness.with({ $0.accessTokenLifetime = 31_536_000 }) { sim in
            let bearer = try await sim.accessToken()
            let token = try #require(try await sim.mint()["purchase_token"] as? String)
            sim.advance(days: 4)
            let record = try #require(
                (try await sim.get(Self.path, bearer: bearer).json["voidedPurchases"] as? [[String: Any]])?.first)
            #expect(record["purchaseToken"] as? String == token)
            #expect(record["voidedReason"] as? Int == 8)
            _ = try await sim.post(
                "sim/faults", ["rules": [["route": "purchases.voidedpurchases.list", "fault": "http_503", "count": 1]]])
            #expect((try await sim.get(Self.path, bearer: bearer)).status == 503)
            #expect((try await sim.get(Self.path, bearer: bearer)).status == 200)
        }
    }
}
