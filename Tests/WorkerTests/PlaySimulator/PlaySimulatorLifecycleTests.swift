import Foundation
import Messages
import PlaySimulator
import Testing

@Suite("Play simulator: the life of a purchase", .timeLimit(.minutes(2)))
struct PlaySimulatorLifecycleTests {
    static let month: TimeInterval = 30 * 86_400

    /// `lineItems[0]` of a SubscriptionPurchaseV2.
    static func item(_ read: [String: Any]) -> [String: Any] {
        (read["lineItems"] as? [[String: Any]])?.first ?? [:]
    }

    static func expiry(_ read: [String: Any]) -> String? { item(read)["expiryTime"] as? String }

    static func autoRenew(_ read: [String: Any]) -> Bool? {
        (item(read)["autoRenewingPlan"] as? [String: Any])?["autoRenewEnabled"] as? Bool
    }

    /// The kinds of the notifications published so far.
    static func kinds(_ sim: PlaySimHarness) -> [String] { sim.simulator.pushRecords().map(\.notification.kind) }

    func subscription(_ sim: PlaySimHarness, _ bearer: String, _ token: String) async throws -> [String: Any] {
        let reply = try await sim.get(PlaySimHarness.subscriptionPath(token), bearer: bearer)
        #expect(reply.status == 200)
        return reply.json
    }

    func product(_ sim: PlaySimHarness, _ bearer: String, _ token: String) async throws -> [String: Any] {
        let reply = try await sim.get(PlaySimHarness.productPath(token), bearer: bearer)
        #expect(reply.status == 200)
        return reply.json
    }

    @Test("renew: the next order id, the expiry a period later, SUBSCRIPTION_RENEWED")
    func renew() async throws {
        try await PlaySimHarness.withPushes { sim, _ in
            let bearer = try await sim.accessToken()
            let minted = try await sim.subscribe(extra: ["test": true])
            let token = try #require(minted["purchase_token"] as? String)
            let orderId = try #require(minted["order_id"] as? String)
            let start = sim.clock.now()
            sim.advance(days: 29)
            let answer = try await sim.lifecycle(token, "renew")
            #expect((answer["purchase"] as? [String: Any])?["latest_order_id"] as? String == "\(orderId)..0")
            let read = try await subscription(sim, bearer, token)
            #expect(read["subscriptionState"] as? String == "SUBSCRIPTION_STATE_ACTIVE")
            #expect(Self.item(read)["latestSuccessfulOrderId"] as? String == "\(orderId)..0")
            #expect(Self.expiry(read) == RFC3339.format(start.addingTimeInterval(2 * Self.month)))
            #expect(read["testPurchase"] != nil)
            #expect(read["acknowledgementState"] as? String == "ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED")
            #expect(Self.kinds(sim) == ["SUBSCRIPTION_PURCHASED", "SUBSCRIPTION_RENEWED"])
        }
    }

    @Test("grace period, then hold (by the clock and by the event), then recover: states, expiries, notifications")
    func graceHoldRecover() async throws {
        try await PlaySimHarness.withPushes { sim, _ in
            let bearer = try await sim.accessToken()
            let minted = try await sim.subscribe()
            let token = try #require(minted["purchase_token"] as? String)
            let orderId = try #require(minted["order_id"] as? String)
            sim.advance(days: 29)
            try await sim.lifecycle(token, "grace_period", ["grace_period_s": 3 * 86_400])
            var read = try await subscription(sim, bearer, token)
            #expect(read["subscriptionState"] as? String == "SUBSCRIPTION_STATE_IN_GRACE_PERIOD")
            #expect(Self.expiry(read) == RFC3339.format(sim.clock.now().addingTimeInterval(3 * 86_400)))
            #expect(Self.autoRenew(read) == true)
            #expect(try await sim.truth(token)["entitled"] as? Bool == true)

            // The grace period runs out: Google puts the subscription on hold from its end.
            let graceEnd = sim.clock.now().addingTimeInterval(3 * 86_400)
            sim.advance(days: 4)
            read = try await subscription(sim, bearer, token)
            #expect(read["subscriptionState"] as? String == "SUBSCRIPTION_STATE_ON_HOLD")
            try await sim.lifecycle(token, "hold")
            read = try await subscription(sim, bearer, token)
            #expect(read["subscriptionState"] as? String == "SUBSCRIPTION_STATE_ON_HOLD")
            #expect(Self.expiry(read) == RFC3339.format(graceEnd))
            let truth = try await sim.truth(token)
            #expect(truth["state"] as? String == "on_hold")
            #expect(truth["entitled"] as? Bool == false)
            #expect(truth["on_hold_since_ms"] as? Int64 == graceEnd.epochMilliseconds)

            sim.advance(days: 2)
            try await sim.lifecycle(token, "recover")
            read = try await subscription(sim, bearer, token)
            #expect(read["subscriptionState"] as? String == "SUBSCRIPTION_STATE_ACTIVE")
            #expect(Self.item(read)["latestSuccessfulOrderId"] as? String == "\(orderId)..0")
            #expect(Self.expiry(read) == RFC3339.format(sim.clock.now().addingTimeInterval(Self.month)))
            #expect(
                Self.kinds(sim) == [
                    "SUBSCRIPTION_PURCHASED", "SUBSCRIPTION_IN_GRACE_PERIOD", "SUBSCRIPTION_ON_HOLD",
                    "SUBSCRIPTION_RECOVERED",
                ])
            // Hold straight from active, and recovery from it.
            try await sim.lifecycle(token, "hold")
            #expect(
                try await subscription(sim, bearer, token)["subscriptionState"] as? String
                    == "SUBSCRIPTION_STATE_ON_HOLD")
            #expect(Self.expiry(try await subscription(sim, bearer, token)) == RFC3339.format(sim.clock.now()))
        }
    }

    @Test("pause and resume: PAUSED with pausedStateContext.autoResumeTime, then active with the next order")
    func pauseResume() async throws {
        try await PlaySimHarness.withPushes { sim, _ in
            let bearer = try await sim.accessToken()
            let minted = try await sim.subscribe()
            let token = try #require(minted["purchase_token"] as? String)
            let orderId = try #require(minted["order_id"] as? String)
            sim.advance(days: 29)
            try await sim.lifecycle(token, "pause", ["pause_s": 7 * 86_400])
            var read = try await subscription(sim, bearer, token)
            #expect(read["subscriptionState"] as? String == "SUBSCRIPTION_STATE_PAUSED")
            #expect(
                (read["pausedStateContext"] as? [String: Any])?["autoResumeTime"] as? String
                    == RFC3339.format(sim.clock.now().addingTimeInterval(7 * 86_400)))
            #expect(Self.expiry(read) == RFC3339.format(sim.clock.now()))
            #expect(try await sim.truth(token)["entitled"] as? Bool == false)
            let conflict = try await sim.post("sim/lifecycle", ["purchase_token": token, "event": "renew"])
            #expect(conflict.status == 409)

            sim.advance(days: 7)
            try await sim.lifecycle(token, "resume")
            read = try await subscription(sim, bearer, token)
            #expect(read["subscriptionState"] as? String == "SUBSCRIPTION_STATE_ACTIVE")
            #expect(read["pausedStateContext"] == nil)
            #expect(Self.item(read)["latestSuccessfulOrderId"] as? String == "\(orderId)..0")
            #expect(Self.kinds(sim) == ["SUBSCRIPTION_PURCHASED", "SUBSCRIPTION_PAUSED", "SUBSCRIPTION_RENEWED"])
        }
    }

    @Test("cancel keeps access until expiry, restart turns auto-renew back on, expire ends it now")
    func cancelRestartExpire() async throws {
        try await PlaySimHarness.withPushes { sim, _ in
            let bearer = try await sim.accessToken()
            let token = try #require(
                try await sim.subscribe()["purchase_token"] as? String)
            let start = sim.clock.now()
            sim.advance(days: 1)
            try await sim.lifecycle(token, "cancel")
            var read = try await subscription(sim, bearer, token)
            #expect(read["subscriptionState"] as? String == "SUBSCRIPTION_STATE_CANCELED")
            #expect(Self.autoRenew(read) == false)
            #expect(Self.expiry(read) == RFC3339.format(start.addingTimeInterval(Self.month)))
            let context = read["canceledStateContext"] as? [String: Any]
            #expect(
                (context?["userInitiatedCancellation"] as? [String: Any])?["cancelTime"] as? String
                    == RFC3339.format(sim.clock.now()))
            try await sim.lifecycle(token, "restart")
            read = try await subscription(sim, bearer, token)
            #expect(read["subscriptionState"] as? String == "SUBSCRIPTION_STATE_ACTIVE")
            #expect(Self.autoRenew(read) == true)
            sim.advance(days: 1)
            try await sim.lifecycle(token, "expire")
            read = try await subscription(sim, bearer, token)
            #expect(read["subscriptionState"] as? String == "SUBSCRIPTION_STATE_EXPIRED")
            #expect(Self.expiry(read) == RFC3339.format(sim.clock.now()))
            #expect((read["canceledStateContext"] as? [String: Any])?["systemInitiatedCancellation"] != nil)
            #expect(
                Self.kinds(sim) == [
                    "SUBSCRIPTION_PURCHASED", "SUBSCRIPTION_CANCELED", "SUBSCRIPTION_RESTARTED", "SUBSCRIPTION_EXPIRED",
                ])
        }
    }

    @Test("revoke with refund: access ends now (developerInitiatedCancellation), the order is voided")
    func revoke() async throws {
        try await PlaySimHarness.withPushes { sim, _ in
            let bearer = try await sim.accessToken()
            let minted = try await sim.subscribe(extra: ["obfuscated_account_id": "acct-7"])
            let token = try #require(minted["purchase_token"] as? String)
            sim.advance(days: 3)
            try await sim.lifecycle(token, "revoke", ["refund": true])
            let read = try await subscription(sim, bearer, token)
            #expect(read["subscriptionState"] as? String == "SUBSCRIPTION_STATE_EXPIRED")
            #expect(Self.expiry(read) == RFC3339.format(sim.clock.now()))
            #expect((read["canceledStateContext"] as? [String: Any])?["developerInitiatedCancellation"] != nil)
            let truth = try await sim.truth(token)
            #expect(truth["state"] as? String == "revoked")
            #expect(truth["voided"] as? Bool == true)
            #expect(truth["obfuscated_account_id"] as? String == "acct-7")
            #expect(truth["google_state"] as? String == "SUBSCRIPTION_STATE_EXPIRED")
            #expect(Self.kinds(sim) == ["SUBSCRIPTION_PURCHASED", "SUBSCRIPTION_REVOKED", "VOIDED_PURCHASE"])
            let voided = try #require(
                sim.simulator.pushRecords().last.flatMap {
                    (try? JSONSerialization.jsonObject(with: Data($0.data))) as? [String: Any]
                }?["voidedPurchaseNotification"] as? [String: Any])
            #expect(voided["purchaseToken"] as? String == token)
            #expect(voided["orderId"] as? String == minted["order_id"] as? String)
            #expect(voided["productType"] as? Int == 1)
            #expect(voided["refundType"] as? Int == 1)
        }
    }

    @Test(
        "refund of a one-time product: a quantity-based partial refund, then the rest: CANCELLED, refundableQuantity 0")
    func refundOneTime() async throws {
        try await PlaySimHarness.withPushes { sim, _ in
            let bearer = try await sim.accessToken()
            let token = try #require(try await sim.mint(extra: ["quantity": 5])["purchase_token"] as? String)
            let acknowledge = try await sim.post(
                PlaySimHarness.acknowledgePath(product: "com.example.app.coins", token), [:], bearer: bearer)
            #expect(acknowledge.status == 204)
            try await sim.lifecycle(token, "refund", ["quantity": 2])
            var read = try await product(sim, bearer, token)
            var offer = ((read["productLineItem"] as? [[String: Any]])?.first?["productOfferDetails"]) as? [String: Any]
            #expect((read["purchaseStateContext"] as? [String: Any])?["purchaseState"] as? String == "PURCHASED")
            #expect(offer?["refundableQuantity"] as? Int == 3)
            sim.advance(days: 1)
            try await sim.lifecycle(token, "refund")
            read = try await product(sim, bearer, token)
            offer = ((read["productLineItem"] as? [[String: Any]])?.first?["productOfferDetails"]) as? [String: Any]
            #expect((read["purchaseStateContext"] as? [String: Any])?["purchaseState"] as? String == "CANCELLED")
            #expect(offer?["refundableQuantity"] as? Int == 0)
            #expect(read["acknowledgementState"] as? String == "ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED")
            let truth = try await sim.truth(token)
            #expect(truth["state"] as? String == "refunded")
            #expect(truth["voided"] as? Bool == true)
            #expect(truth["entitled"] as? Bool == false)
            let refundTypes = sim.simulator.pushRecords().compactMap { record -> Int? in
                let object = (try? JSONSerialization.jsonObject(with: Data(record.data))) as? [String: Any]
                return (object?["voidedPurchaseNotification"] as? [String: Any])?["refundType"] as? Int
            }
            #expect(refundTypes == [2, 2])
            #expect(Self.kinds(sim) == ["ONE_TIME_PRODUCT_PURCHASED", "VOIDED_PURCHASE", "VOIDED_PURCHASE"])
            let again = try await sim.post("sim/lifecycle", ["purchase_token": token, "event": "refund"])
            #expect(again.status == 409)
        }
    }

    @Test("chargeback: a refund review with its token and a 24-hour deadline, then Google refunds (reason chargeback)")
    func chargeback() async throws {
        try await PlaySimHarness.withPushes { sim, _ in
            let bearer = try await sim.accessToken()
            let minted = try await sim.mint(type: "non_consumable")
            let token = try #require(minted["purchase_token"] as? String)
            let answer = try await sim.lifecycle(token, "chargeback")
            let review = try #require(answer["review"] as? [String: Any])
            #expect(review["order_id"] as? String == minted["order_id"] as? String)
            #expect(
                review["deadline_ms"] as? Int64 == sim.clock.now().addingTimeInterval(86_400).epochMilliseconds)
            let published = try #require(
                sim.simulator.pushRecords().last.flatMap {
                    (try? JSONSerialization.jsonObject(with: Data($0.data))) as? [String: Any]
                }?["pendingRefundReviewNotification"] as? [String: Any])
            #expect(published["purchaseToken"] as? String == token)
            #expect(published["orderId"] as? String == minted["order_id"] as? String)
            #expect(published["pendingRefundToken"] as? String == review["pending_refund_token"] as? String)
            // Still purchased while Google decides.
            var read = try await product(sim, bearer, token)
            #expect((read["purchaseStateContext"] as? [String: Any])?["purchaseState"] as? String == "PURCHASED")
            let twice = try await sim.post("sim/lifecycle", ["purchase_token": token, "event": "chargeback"])
            #expect(twice.status == 409)

            try await sim.lifecycle(token, "chargeback_resolve", ["approve": true])
            read = try await product(sim, bearer, token)
            #expect((read["purchaseStateContext"] as? [String: Any])?["purchaseState"] as? String == "CANCELLED")
            let reviews = try #require(try await sim.get("sim/reviews").json["reviews"] as? [[String: Any]])
            #expect(reviews.first?["refunded"] as? Bool == true)
            #expect(Self.kinds(sim) == ["ONE_TIME_PRODUCT_PURCHASED", "PENDING_REFUND_REVIEW", "VOIDED_PURCHASE"])
        }
    }

    @Test(
        "upgrade: a new token linked to the old one, which ends now (replacementCancellation); SUBSCRIPTION_PURCHASED")
    func upgrade() async throws {
        try await PlaySimHarness.withPushes { sim, _ in
            let bearer = try await sim.accessToken()
            let old = try #require(
                try await sim.subscribe(extra: ["obfuscated_account_id": "acct-1"])[
                    "purchase_token"] as? String)
            sim.advance(days: 10)
            let answer = try await sim.lifecycle(old, "upgrade", ["product_id": "platinum"])
            let replacement = try #require(answer["replacement"] as? [String: Any])
            let new = try #require(replacement["purchase_token"] as? String)
            let newRead = try await subscription(sim, bearer, new)
            #expect(newRead["linkedPurchaseToken"] as? String == old)
            #expect(Self.item(newRead)["productId"] as? String == "platinum")
            #expect(
                (newRead["externalAccountIdentifiers"] as? [String: Any])?["obfuscatedExternalAccountId"] as? String
                    == "acct-1")
            let oldRead = try await subscription(sim, bearer, old)
            #expect(oldRead["subscriptionState"] as? String == "SUBSCRIPTION_STATE_EXPIRED")
            #expect((oldRead["canceledStateContext"] as? [String: Any])?["replacementCancellation"] != nil)
            #expect(Self.expiry(oldRead) == RFC3339.format(sim.clock.now()))
            #expect(sim.simulator.pushRecords().last?.notification.purchaseToken == new)
            #expect(Self.kinds(sim) == ["SUBSCRIPTION_PURCHASED", "SUBSCRIPTION_PURCHASED"])
        }
    }

    @Test("pending purchases: completed (PURCHASED) and cancelled, each with its notification")
    func pending() async throws {
        try await PlaySimHarness.withPushes { sim, _ in
            let bearer = try await sim.accessToken()
            let product = try #require(try await sim.mint(extra: ["pending": true])["purchase_token"] as? String)
            let plan = try #require(
                try await sim.mint(product: "gold", type: "auto_renewable", extra: ["pending": true])["purchase_token"]
                    as? String)
            #expect(Self.kinds(sim).isEmpty)
            let completed = try await sim.lifecycle(product, "pending_complete")
            #expect(completed["purchase_json"] as? String != nil)
            var read = try await self.product(sim, bearer, product)
            #expect((read["purchaseStateContext"] as? [String: Any])?["purchaseState"] as? String == "PURCHASED")
            try await sim.lifecycle(plan, "pending_cancel")
            read = try await subscription(sim, bearer, plan)
            #expect(read["subscriptionState"] as? String == "SUBSCRIPTION_STATE_PENDING_PURCHASE_CANCELED")
            #expect(Self.kinds(sim) == ["ONE_TIME_PRODUCT_PURCHASED", "SUBSCRIPTION_PENDING_PURCHASE_CANCELED"])
            let cancelled = try await sim.mint(extra: ["pending": true])
            try await sim.lifecycle(try #require(cancelled["purchase_token"] as? String), "pending_cancel")
            #expect(Self.kinds(sim).last == "ONE_TIME_PRODUCT_CANCELED")
        }
    }

    @Test("GET /sim/truth lists every purchase of a package with its lifecycle state; unknown events are 400")
    func truthList() async throws {
        try await PlaySimHarness.with({ $0.accessTokenLifetime = 31_536_000 }) { sim in
            let first = try #require(try await sim.mint()["purchase_token"] as? String)
            sim.clock.advance(by: 1)
            let second = try #require(
                try await sim.subscribe()["purchase_token"] as? String)
            try await sim.lifecycle(second, "grace_period")
            let listed = try #require(
                try await sim.get("sim/truth?package=\(PlaySimHarness.package)").json["purchases"] as? [[String: Any]])
            #expect(listed.map { $0["purchase_token"] as? String } == [first, second])
            #expect(listed.last?["state"] as? String == "in_grace_period")
            #expect(listed.last?["google_state"] as? String == "SUBSCRIPTION_STATE_IN_GRACE_PERIOD")
            let other = try await sim.get("sim/truth?package=com.other.app").json["purchases"] as? [Any]
            #expect(other?.isEmpty == true)
            let unknown = try await sim.post("sim/lifecycle", ["purchase_token": first, "event": "explode"])
            #expect(unknown.status == 400)
            let missing = try await sim.post("sim/lifecycle", ["purchase_token": "nope", "event": "refund"])
            #expect(missing.status == 404)
        }
    }
}
