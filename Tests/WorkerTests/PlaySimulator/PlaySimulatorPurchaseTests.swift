import Crypto
import Foundation
import PlaySimulator
import Testing
import _CryptoExtras

@Suite("Play simulator: purchases", .timeLimit(.minutes(2)))
struct PlaySimulatorPurchaseTests {
    @Test("a minted purchase's signed JSON verifies (SHA1withRSA) with the licensing key the simulator serves")
    func signedPurchaseVerifies() async throws {
        try await PlaySimHarness.with { sim in
            let minted = try await sim.mint(extra: ["obfuscated_account_id": "acct-42"])
            let json = try #require(minted["purchase_json"] as? String)
            let signatureText = try #require(minted["signature"] as? String)
            let signature = try #require(Data(base64Encoded: signatureText))

            let served = try await sim.get("sim/apps/\(PlaySimHarness.package)/licensing-key")
            #expect(served.status == 200)
            let spkiText = try #require(served.json["licensing_key"] as? String)
            let spki = try #require(Data(base64Encoded: spkiText))
            let key = try _RSA.Signing.PublicKey(derRepresentation: spki)
            #expect(key.keySizeInBits == 2048)
            let rsaSignature = _RSA.Signing.RSASignature(rawRepresentation: signature)
            #expect(
                key.isValidSignature(
                    rsaSignature, for: Insecure.SHA1.hash(data: Data(json.utf8)), padding: .insecurePKCS1v1_5))
            // One byte changed and the signature no longer holds.
            #expect(
                !key.isValidSignature(
                    rsaSignature, for: Insecure.SHA1.hash(data: Data((json + " ").utf8)), padding: .insecurePKCS1v1_5))

            // The JSON is Play Billing's originalJson, naming the purchase the simulator answers for.
            let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
            #expect(object["packageName"] as? String == PlaySimHarness.package)
            #expect(object["productId"] as? String == "com.example.app.coins")
            #expect(object["purchaseToken"] as? String == minted["purchase_token"] as? String)
            #expect(object["orderId"] as? String == minted["order_id"] as? String)
            #expect(object["purchaseState"] as? Int == 0)
            #expect(object["obfuscatedAccountId"] as? String == "acct-42")
            #expect(object["acknowledged"] as? Bool == false)
            let orderId = try #require(minted["order_id"] as? String)
            #expect(orderId.wholeMatch(of: /GPA\.\d{4}-\d{4}-\d{4}-\d{5}/) != nil)
            let token = try #require(minted["purchase_token"] as? String)
            #expect(
                token.utf8.allSatisfy {
                    $0 == 0x2E || $0 == 0x2D || $0 == 0x5F || (0x30...0x39).contains($0)
                        || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0)
                })
        }
    }

    @Test("acknowledge twice: 204 both times, acknowledged once; the read says ACKNOWLEDGED")
    func acknowledgeTwice() async throws {
        try await PlaySimHarness.with { sim in
            let bearer = try await sim.accessToken()
            let token = try #require(try await sim.mint(type: "non_consumable")["purchase_token"] as? String)
            let before = try await sim.get(PlaySimHarness.productPath(token), bearer: bearer)
            #expect(before.status == 200)
            #expect(before.json["acknowledgementState"] as? String == "ACKNOWLEDGEMENT_STATE_PENDING")

            let path = PlaySimHarness.acknowledgePath(product: "com.example.app.coins", token)
            let first = try await sim.post(path, ["developerPayload": "grant-1"], bearer: bearer)
            let acknowledgedAt = try #require(try await sim.truth(token)["acknowledged_at_ms"] as? Int64)
            sim.clock.advance(by: 60)
            let second = try await sim.post(path, ["developerPayload": "grant-2"], bearer: bearer)
            #expect(first.status == 204 && first.data.isEmpty)
            #expect(second.status == 204 && second.data.isEmpty)

            let after = try await sim.get(PlaySimHarness.productPath(token), bearer: bearer)
            #expect(after.json["acknowledgementState"] as? String == "ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED")
            let truth = try await sim.truth(token)
            #expect(truth["acknowledge_calls"] as? Int == 2)
            #expect(truth["acknowledged_at_ms"] as? Int64 == acknowledgedAt)
            #expect(truth["developer_payload"] as? String == "grant-1")
        }
    }

    @Test("consume: CONSUMED and acknowledged; a second consume is 204 and changes nothing; wrong product is 400")
    func consume() async throws {
        try await PlaySimHarness.with { sim in
            let bearer = try await sim.accessToken()
            let token = try #require(try await sim.mint(extra: ["quantity": 3])["purchase_token"] as? String)
            let wrong = try await sim.post(PlaySimHarness.consumePath(product: "other", token), [:], bearer: bearer)
            #expect(wrong.status == 400)
            let path = PlaySimHarness.consumePath(product: "com.example.app.coins", token)
            #expect(try await sim.post(path, [:], bearer: bearer).status == 204)
            #expect(try await sim.post(path, [:], bearer: bearer).status == 204)

            let read = try await sim.get(PlaySimHarness.productPath(token), bearer: bearer)
            let item = try #require((read.json["productLineItem"] as? [[String: Any]])?.first)
            let offer = try #require(item["productOfferDetails"] as? [String: Any])
            #expect(offer["consumptionState"] as? String == "CONSUMPTION_STATE_CONSUMED")
            #expect(offer["quantity"] as? Int == 3)
            #expect(read.json["acknowledgementState"] as? String == "ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED")
            let truth = try await sim.truth(token)
            #expect(truth["consume_calls"] as? Int == 2)
            #expect(truth["consumed"] as? Bool == true)
            // Consumed means acknowledged: three days later it is still purchased.
            sim.advance(days: 4)
            let later = try await sim.get(PlaySimHarness.productPath(token), bearer: try await sim.accessToken())
            #expect((later.json["purchaseStateContext"] as? [String: Any])?["purchaseState"] as? String == "PURCHASED")
        }
    }

    @Test(
        "a purchase nobody acknowledges is refunded after three days on the simulator's clock; an acknowledged one is not"
    )
    func threeDayRefund() async throws {
        try await PlaySimHarness.with { sim in
            let bearer = try await sim.accessToken()
            let forgotten = try #require(try await sim.mint(type: "non_consumable")["purchase_token"] as? String)
            let kept = try #require(try await sim.mint(type: "non_consumable")["purchase_token"] as? String)
            let subscription = try #require(
                try await sim.mint(product: "premium", type: "auto_renewable")["purchase_token"] as? String)
            #expect(
                try await sim.post(
                    PlaySimHarness.acknowledgePath(product: "com.example.app.coins", kept), [:], bearer: bearer
                ).status == 204)

            func state(_ token: String, _ bearer: String) async throws -> String? {
                let reply = try await sim.get(PlaySimHarness.productPath(token), bearer: bearer)
                return (reply.json["purchaseStateContext"] as? [String: Any])?["purchaseState"] as? String
            }
            sim.clock.advance(by: 3 * 86_400 - 1)
            // The first access token lived an hour; a new one for the rest of the test.
            let later = try await sim.accessToken()
            #expect(try await state(forgotten, later) == "PURCHASED")
            sim.clock.advance(by: 1)
            let refunded = try await sim.get(PlaySimHarness.productPath(forgotten), bearer: later)
            #expect(
                (refunded.json["purchaseStateContext"] as? [String: Any])?["purchaseState"] as? String == "CANCELLED")
            let offer =
                ((refunded.json["productLineItem"] as? [[String: Any]])?.first?["productOfferDetails"])
                as? [String: Any]
            #expect(offer?["refundableQuantity"] as? Int == 0)
            let kept2 = try await sim.get(PlaySimHarness.productPath(kept), bearer: later)
            #expect((kept2.json["purchaseStateContext"] as? [String: Any])?["purchaseState"] as? String == "PURCHASED")
            let truth = try await sim.truth(forgotten)
            #expect(truth["state"] as? String == "refunded")
            #expect(truth["refunded_at_ms"] as? Int64 == truth["acknowledge_deadline_ms"] as? Int64)

            // Too late to acknowledge: Google's invalidPurchaseState.
            let late = try await sim.post(
                PlaySimHarness.acknowledgePath(product: "com.example.app.coins", forgotten), [:], bearer: later)
            #expect(late.status == 400)
            #expect(late.reason == "invalidPurchaseState")

            let sub = try await sim.get(PlaySimHarness.subscriptionPath(subscription), bearer: later)
            #expect(sub.json["subscriptionState"] as? String == "SUBSCRIPTION_STATE_EXPIRED")
            #expect((sub.json["canceledStateContext"] as? [String: Any])?["systemInitiatedCancellation"] != nil)
        }
    }

    @Test("a renewal keeps the purchase token and gets the next order id, GPA….0 then GPA….1")
    func renewal() async throws {
        try await PlaySimHarness.with { sim in
            let bearer = try await sim.accessToken()
            let minted = try await sim.mint(product: "premium", type: "auto_renewable", extra: ["period_days": 30])
            let token = try #require(minted["purchase_token"] as? String)
            let orderId = try #require(minted["order_id"] as? String)
            let firstExpiry = try #require(minted["expiry_time_ms"] as? Int64)

            func lineItem() async throws -> [String: Any] {
                let reply = try await sim.get(PlaySimHarness.subscriptionPath(token), bearer: bearer)
                #expect(reply.status == 200)
                #expect(reply.json["subscriptionState"] as? String == "SUBSCRIPTION_STATE_ACTIVE")
                return try #require((reply.json["lineItems"] as? [[String: Any]])?.first)
            }
            #expect(try await lineItem()["latestSuccessfulOrderId"] as? String == orderId)
            for renewal in 0..<2 {
                let renewed = try await sim.post("sim/renew", ["purchase_token": token])
                #expect(renewed.status == 200)
                #expect(renewed.json["purchase_token"] as? String == token)
                #expect(try await lineItem()["latestSuccessfulOrderId"] as? String == "\(orderId)..\(renewal)")
            }
            let truth = try await sim.truth(token)
            #expect(truth["order_ids"] as? [String] == [orderId, "\(orderId)..0", "\(orderId)..1"])
            #expect(truth["expiry_time_ms"] as? Int64 == firstExpiry + 2 * 30 * 86_400_000)
        }
    }

    @Test("an upgrade carries linkedPurchaseToken; the old subscription ends replaced")
    func upgrade() async throws {
        try await PlaySimHarness.with { sim in
            let bearer = try await sim.accessToken()
            let old = try #require(
                try await sim.mint(product: "basic", type: "auto_renewable")["purchase_token"] as? String)
            let new = try #require(
                try await sim.mint(product: "premium", type: "auto_renewable", extra: ["linked_purchase_token": old])[
                    "purchase_token"] as? String)
            #expect(new != old)
            let upgraded = try await sim.get(PlaySimHarness.subscriptionPath(new), bearer: bearer)
            #expect(upgraded.json["linkedPurchaseToken"] as? String == old)
            #expect(upgraded.json["subscriptionState"] as? String == "SUBSCRIPTION_STATE_ACTIVE")
            let replaced = try await sim.get(PlaySimHarness.subscriptionPath(old), bearer: bearer)
            #expect(replaced.json["subscriptionState"] as? String == "SUBSCRIPTION_STATE_EXPIRED")
            #expect((replaced.json["canceledStateContext"] as? [String: Any])?["replacementCancellation"] != nil)
            #expect(try await sim.truth(old)["replaced_by_token"] as? String == new)
            // A token replaced once cannot be replaced again.
            let again = try await sim.post(
                "sim/mint",
                [
                    "package_name": PlaySimHarness.package, "product_id": "gold", "type": "auto_renewable",
                    "linked_purchase_token": old,
                ])
            #expect(again.status == 400)
            // A period no billing plan has is refused, not written.
            let endless = try await sim.post(
                "sim/mint",
                [
                    "package_name": PlaySimHarness.package, "product_id": "forever", "type": "auto_renewable",
                    "period_days": 1e300,
                ])
            #expect(endless.status == 400)
        }
    }

    @Test("a pending purchase has no order and cannot be acknowledged until its payment completes; or it is cancelled")
    func pending() async throws {
        try await PlaySimHarness.with { sim in
            let bearer = try await sim.accessToken()
            let minted = try await sim.mint(type: "non_consumable", extra: ["pending": true])
            let token = try #require(minted["purchase_token"] as? String)
            #expect(minted["order_id"] == nil)
            let json = try #require(minted["purchase_json"] as? String)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
            #expect(object["purchaseState"] as? Int == 4)
            #expect(object["orderId"] == nil)

            func purchaseState(_ token: String) async throws -> String? {
                let reply = try await sim.get(PlaySimHarness.productPath(token), bearer: bearer)
                return (reply.json["purchaseStateContext"] as? [String: Any])?["purchaseState"] as? String
            }
            #expect(try await purchaseState(token) == "PENDING")
            let early = try await sim.post(
                PlaySimHarness.acknowledgePath(product: "com.example.app.coins", token), [:], bearer: bearer)
            #expect(early.status == 400 && early.reason == "invalidPurchaseState")
            // Pending for days is no refund: the three days start when the payment completes.
            sim.advance(days: 5)
            let bearer2 = try await sim.accessToken()
            let completed = try await sim.post("sim/pending/complete", ["purchase_token": token])
            #expect(completed.status == 200)
            #expect((completed.json["order_id"] as? String)?.hasPrefix("GPA.") == true)
            let read = try await sim.get(PlaySimHarness.productPath(token), bearer: bearer2)
            #expect((read.json["purchaseStateContext"] as? [String: Any])?["purchaseState"] as? String == "PURCHASED")
            #expect(read.json["orderId"] as? String == completed.json["order_id"] as? String)
            #expect(
                try await sim.post(
                    PlaySimHarness.acknowledgePath(product: "com.example.app.coins", token), [:], bearer: bearer2
                ).status == 204)

            let abandoned = try #require(
                try await sim.mint(product: "premium", type: "auto_renewable", extra: ["pending": true])[
                    "purchase_token"]
                    as? String)
            let pendingSub = try await sim.get(PlaySimHarness.subscriptionPath(abandoned), bearer: bearer2)
            #expect(pendingSub.json["subscriptionState"] as? String == "SUBSCRIPTION_STATE_PENDING")
            #expect(try await sim.post("sim/pending/cancel", ["purchase_token": abandoned]).status == 200)
            let canceled = try await sim.get(PlaySimHarness.subscriptionPath(abandoned), bearer: bearer2)
            #expect(canceled.json["subscriptionState"] as? String == "SUBSCRIPTION_STATE_PENDING_PURCHASE_CANCELED")
        }
    }

    @Test("test purchases and obfuscated account ids appear where Google puts them")
    func testPurchaseAndAccountId() async throws {
        try await PlaySimHarness.with { sim in
            let bearer = try await sim.accessToken()
            let product = try #require(
                try await sim.mint(extra: ["test": true, "obfuscated_account_id": "a1b2"])["purchase_token"] as? String)
            let read = try await sim.get(PlaySimHarness.productPath(product), bearer: bearer)
            #expect((read.json["testPurchaseContext"] as? [String: Any])?["fopType"] as? String == "TEST")
            #expect(read.json["obfuscatedExternalAccountId"] as? String == "a1b2")

            let sub = try #require(
                try await sim.mint(
                    product: "premium", type: "auto_renewable", extra: ["test": true, "obfuscated_account_id": "a1b2"])[
                        "purchase_token"] as? String)
            let subRead = try await sim.get(PlaySimHarness.subscriptionPath(sub), bearer: bearer)
            #expect(subRead.json["testPurchase"] is [String: Any])
            #expect(
                (subRead.json["externalAccountIdentifiers"] as? [String: Any])?["obfuscatedExternalAccountId"]
                    as? String == "a1b2")

            let plain = try #require(try await sim.mint()["purchase_token"] as? String)
            let plainRead = try await sim.get(PlaySimHarness.productPath(plain), bearer: bearer)
            #expect(plainRead.json["testPurchaseContext"] == nil)
            #expect(plainRead.json["obfuscatedExternalAccountId"] == nil)

            // A token of another package or that never existed.
            let unknown = try await sim.get(PlaySimHarness.productPath("never.minted-token"), bearer: bearer)
            #expect(unknown.status == 404 && unknown.reason == "purchaseTokenNotFound")
        }
    }
}
