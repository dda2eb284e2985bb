import Foundation
import Messages
import Testing

@testable import Entitlements

/// One account across both stores: Google Play verdicts project as App Store ones do, each transaction keeps its
/// store, a product is looked up in its own store's catalog list, and an entitlement is the union over both stores.
@Suite("Entitlements across stores")
struct EntitlementCrossStoreTests {
    typealias F = EntitlementFixtures
    let day = EntitlementFixtures.day

    /// A Google Play subscription's transaction as the worker states it: the order id is the transaction, the
    /// purchase token the subscription.
    static func playSubscription(
        _ order: String, token: String = "tok-sub-1", purchased: Double = 0, expires: Double, revoked: Double? = nil
    ) -> Verdict.Transaction {
        F.transaction(
            order, product: "premium_sub", original: token, purchased: purchased, expires: expires, revoked: revoked,
            orderID: order, purchaseToken: token)
    }

    @Test("a Google Play verdict projects like an App Store one, keeping its store, order id and purchase token")
    func playVerdictProjected() {
        let (state, results) = F.project([
            F.verdict(
                "p1", account: "a1", .granted, decided: 10,
                transactions: [Self.playSubscription("GPA.1111-2222-3333-44444", expires: 30 * day)],
                store: .googlePlay)
        ])
        #expect(results == [.applied])
        let transaction = state.transactions["GPA.1111-2222-3333-44444"]
        #expect(transaction != nil)
        #expect(transaction?.store == .googlePlay)
        #expect(transaction?.orderID == "GPA.1111-2222-3333-44444")
        #expect(transaction?.purchaseToken == "tok-sub-1")
        #expect(transaction?.originalTransactionID == "tok-sub-1")
        #expect(transaction?.productType == .autoRenewable)
        let now = F.entitlements(of: "a1", in: state, at: F.at(day))
        #expect(now["premium"]?.active == true)
        #expect(now["premium"]?.representative.store == .googlePlay)
        #expect(F.eventKinds(state, account: "a1") == [.initialPurchase])
        #expect(state.events.first?.store == .googlePlay)
        #expect(state.history.first?.store == .googlePlay)
        // A renewal keeps the purchase token and gets a new order id: a new period of the same subscription.
        let (renewed, _) = F.project(
            [
                F.verdict(
                    "p2", account: "a1", .granted, decided: 30 * day - 5,
                    transactions: [
                        Self.playSubscription(
                            "GPA.1111-2222-3333-44444..0", purchased: 30 * day - 10, expires: 60 * day)
                    ], store: .googlePlay)
            ], into: state)
        #expect(F.eventKinds(renewed, account: "a1") == [.initialPurchase, .renewal])
        #expect(F.entitlements(of: "a1", in: renewed, at: F.at(45 * day))["premium"]?.active == true)
    }

    @Test(
        "Google Play's grace period is active, account hold is not and is named on_hold; renewal, billing issue, grace and refund events"
    )
    func playLifecycleStates() throws {
        let token = "tok-life"
        func period(
            _ order: String, purchased: Double = 0, expires: Double, grace: Double? = nil, retry: Bool? = nil,
            revoked: Double? = nil
        )
            -> Verdict.Transaction
        {
            F.transaction(
                order, product: "premium_sub", original: token, purchased: purchased, expires: expires,
                revoked: revoked,
                billingRetry: retry, grace: grace, orderID: order, purchaseToken: token)
        }
        // As the worker decides Google Play notification jobs: each verdict states the purchase as Google answers it.
        let (state, _) = F.project([
            F.verdict(
                "buy", account: "a1", .granted, decided: 10, transactions: [period("GPA.1", expires: 30 * day)],
                store: .googlePlay),
            F.verdict(
                "n-grace", account: "a1", .alreadyGranted, reason: .alreadyOwned, decided: 30 * day + 10,
                transactions: [period("GPA.1", expires: 33 * day, grace: 33 * day, retry: true)], store: .googlePlay),
        ])
        let grace = try #require(F.entitlements(of: "a1", in: state, at: F.at(31 * day))["premium"])
        #expect(grace.active && grace.inGracePeriod(at: F.at(31 * day)))
        #expect(state.transactions["GPA.1"]?.state(at: F.at(31 * day)) == "active")

        let (held, _) = F.project(
            [
                F.verdict(
                    "n-hold", account: "a1", .rejected, reason: .expired, decided: 33 * day + 10,
                    transactions: [period("GPA.1", expires: 33 * day, retry: true)], store: .googlePlay)
            ], into: state)
        #expect(F.entitlements(of: "a1", in: held, at: F.at(34 * day))["premium"]?.active == false)
        #expect(held.transactions["GPA.1"]?.state(at: F.at(34 * day)) == "on_hold")

        let (recovered, _) = F.project(
            [
                F.verdict(
                    "n-recovered", account: "a1", .granted, decided: 35 * day,
                    transactions: [period("GPA.1..0", purchased: 35 * day, expires: 65 * day, retry: false)],
                    store: .googlePlay),
                F.verdict(
                    "n-revoked", account: "a1", .rejected, reason: .revoked, decided: 40 * day,
                    transactions: [period("GPA.1..0", purchased: 35 * day, expires: 65 * day, revoked: 40 * day)],
                    store: .googlePlay),
            ], into: held)
        #expect(recovered.transactions["GPA.1"]?.state(at: F.at(36 * day)) == "expired", "a new period ends the hold")
        #expect(F.entitlements(of: "a1", in: recovered, at: F.at(41 * day))["premium"]?.active == false)
        #expect(
            F.eventKinds(recovered, account: "a1") == [
                .initialPurchase, .billingIssue, .gracePeriodEntered, .expiration, .renewal, .refund,
            ])
    }

    @Test("Google Play's paused subscription is not active and is named paused; resumed, it is active again")
    func playPaused() throws {
        let token = "tok-pause"
        func period(_ order: String, purchased: Double = 0, expires: Double, paused: Bool) -> Verdict.Transaction {
            var item = F.transaction(
                order, product: "premium_sub", original: token, purchased: purchased, expires: expires,
                billingRetry: false, orderID: order, purchaseToken: token)
            item.paused = paused
            return item
        }
        let (state, _) = F.project([
            F.verdict(
                "buy", account: "a1", .granted, decided: 10,
                transactions: [period("GPA.2", expires: 30 * day, paused: false)], store: .googlePlay),
            F.verdict(
                "n-paused", account: "a1", .rejected, reason: .expired, decided: 30 * day + 10,
                transactions: [period("GPA.2", expires: 30 * day, paused: true)], store: .googlePlay),
        ])
        #expect(F.entitlements(of: "a1", in: state, at: F.at(31 * day))["premium"]?.active == false)
        #expect(state.transactions["GPA.2"]?.state(at: F.at(31 * day)) == "paused")
        #expect(F.eventKinds(state, account: "a1") == [.initialPurchase, .expiration])

        // A verdict that states nothing about the renewal (an App Store-shaped one) leaves the pause as it was.
        var silent = period("GPA.2", expires: 30 * day, paused: false)
        silent.inBillingRetry = nil
        silent.paused = nil
        let (still, _) = F.project(
            [
                F.verdict(
                    "n-silent", account: "a1", .rejected, reason: .expired, decided: 31 * day,
                    transactions: [silent], store: .googlePlay)
            ], into: state)
        #expect(still.transactions["GPA.2"]?.state(at: F.at(32 * day)) == "paused")

        // Resumed: Google's next period is a new order; the paused one is no longer named paused.
        let (resumed, _) = F.project(
            [
                F.verdict(
                    "n-resumed", account: "a1", .granted, decided: 40 * day,
                    transactions: [period("GPA.2..0", purchased: 40 * day, expires: 70 * day, paused: false)],
                    store: .googlePlay)
            ], into: still)
        #expect(F.entitlements(of: "a1", in: resumed, at: F.at(41 * day))["premium"]?.active == true)
        #expect(resumed.transactions["GPA.2"]?.state(at: F.at(41 * day)) == "expired")
        #expect(resumed.transactions["GPA.2..0"]?.state(at: F.at(41 * day)) == "active")
    }

    @Test("a Google Play upgrade's verdict ends the replaced token's period and keeps the entitlement with its owner")
    func playUpgrade() throws {
        let old = F.transaction(
            "GPA.1", product: "premium_sub", original: "tok-old", purchased: 0, expires: 30 * F.day, orderID: "GPA.1",
            purchaseToken: "tok-old")
        let new = F.transaction(
            "GPA.2", product: "premium_sub", original: "tok-new", purchased: 10 * F.day, expires: 40 * F.day,
            orderID: "GPA.2", purchaseToken: "tok-new")
        var ended = old
        ended.expiresDate = F.at(10 * F.day)
        let (state, _) = F.project([
            F.verdict("buy", account: "a1", .granted, decided: 10, transactions: [old], store: .googlePlay),
            F.verdict(
                "n-upgrade", account: "a1", .granted, decided: 10 * F.day, transactions: [new, ended],
                store: .googlePlay),
        ])
        #expect(state.transactions["GPA.1"]?.state(at: F.at(11 * F.day)) == "expired")
        let premium = try #require(F.entitlements(of: "a1", in: state, at: F.at(11 * F.day))["premium"])
        #expect(premium.active && premium.representative.transactionID == "GPA.2")
    }

    @Test("premium bought on iPhone is active on Android and the reverse: one entitlement over both stores")
    func unionAcrossStores() {
        let iPhoneFirst = [
            F.verdict(
                "i1", account: "a1", .granted, decided: 10,
                transactions: [F.transaction("2000000001", expires: 30 * day)]),
            F.verdict(
                "p1", account: "a1", .granted, decided: 20,
                transactions: [F.transaction("GPA.1-1", product: "premium_forever", orderID: "GPA.1-1")],
                store: .googlePlay),
        ]
        let (state, results) = F.project(iPhoneFirst)
        #expect(results == [.applied, .applied])
        // Buying premium again on Android while it is active is no new purchase of the entitlement.
        #expect(F.eventKinds(state, account: "a1") == [.initialPurchase])
        let summaries = EntitlementSummary.summarize(
            state.transactions(ofAccount: "a1"), catalog: F.catalog, at: F.at(day))
        #expect(summaries.map(\.entitlementID) == ["premium"])
        #expect(summaries.first?.active == true)
        #expect(Set(state.transactions(ofAccount: "a1").map(\.store)) == [.appStore, .googlePlay])
        // The App Store subscription's end does not end premium: the Play purchase still grants it.
        #expect(F.entitlements(of: "a1", in: state, at: F.at(40 * day))["premium"]?.active == true)
        let expired = F.project(
            [
                F.verdict(
                    "i2", account: "a1", .rejected, reason: .expired, decided: 31 * day,
                    transactions: [F.transaction("2000000001", expires: 30 * day)])
            ], into: state
        ).0
        #expect(!expired.events.dropFirst(state.events.count).contains { $0.kind == .expiration && !$0.active })
        #expect(F.entitlements(of: "a1", in: expired, at: F.at(40 * day))["premium"]?.active == true)

        // The reverse: premium bought on Android is active for the account on iPhone.
        let (reverse, _) = F.project([
            F.verdict(
                "p1", account: "a2", .granted, decided: 10,
                transactions: [Self.playSubscription("GPA.2-1", token: "tok-a2", expires: 30 * day)],
                store: .googlePlay)
        ])
        #expect(F.entitlements(of: "a2", in: reverse, at: F.at(day))["premium"]?.active == true)
        #expect(F.entitlements(of: "a2", in: reverse, at: F.at(31 * day))["premium"]?.active == false)
    }

    @Test("the clock's sweep sees no expiration while the other store's purchase still grants the entitlement")
    func sweepAcrossStores() {
        let (state, _) = F.project([
            F.verdict(
                "i1", account: "a1", .granted, decided: 10,
                transactions: [F.transaction("2000000001", expires: 30 * day)]),
            F.verdict(
                "p1", account: "a1", .granted, decided: 20,
                transactions: [Self.playSubscription("GPA.10-1", expires: 60 * day)], store: .googlePlay),
        ])
        let transactions = state.transactions(ofAccount: "a1")
        #expect(
            ExpirationSweep.events(
                account: "a1", transactions: transactions, catalog: F.catalog, window: F.at(29 * day)...F.at(31 * day)
            ).isEmpty)
        let end = ExpirationSweep.events(
            account: "a1", transactions: transactions, catalog: F.catalog, window: F.at(59 * day)...F.at(61 * day))
        #expect(end.map(\.kind) == [.expiration])
        #expect(end.first?.store == .googlePlay)
    }

    @Test("a refund on one store ends only what that store's transactions gave")
    func refundOnOneStore() {
        let (state, _) = F.project([
            F.verdict(
                "i1", account: "a1", .granted, decided: 10,
                transactions: [F.transaction("2000000001", product: "lifetime")]),
            F.verdict(
                "p1", account: "a1", .granted, decided: 20,
                transactions: [Self.playSubscription("GPA.3-1", expires: 30 * day)], store: .googlePlay),
            F.verdict(
                "p2", account: "a1", .rejected, reason: .revoked, decided: 30,
                transactions: [Self.playSubscription("GPA.3-1", expires: 30 * day, revoked: 25)], store: .googlePlay),
        ])
        #expect(state.transactions["GPA.3-1"]?.revokedAt == F.at(25))
        #expect(state.transactions["2000000001"]?.revokedAt == nil)
        let now = F.entitlements(of: "a1", in: state, at: F.at(day))
        #expect(now["premium"]?.active == true)
        #expect(now["premium"]?.representative.store == .appStore)
        let refund = state.events.first { $0.kind == .refund }
        #expect(refund?.store == .googlePlay)
        #expect(refund?.active == true)
        // Then the App Store purchase is refunded too: premium ends.
        let (both, _) = F.project(
            [
                F.verdict(
                    "n1", account: "a1", .rejected, reason: .revoked, decided: 40,
                    transactions: [F.transaction("2000000001", product: "lifetime", revoked: 35)])
            ], into: state)
        #expect(F.entitlements(of: "a1", in: both, at: F.at(day))["premium"]?.active == false)
    }

    @Test("a transaction id of one store named by the other store's verdict is not that transaction: unchanged")
    func transactionIDsAreEachStoresOwn() {
        let (state, _) = F.project([
            F.verdict(
                "p1", account: "a1", .granted, decided: 10,
                transactions: [F.transaction("shared-1", product: "premium_forever", orderID: "shared-1")],
                store: .googlePlay),
            F.verdict(
                "n1", account: "a1", .rejected, reason: .revoked, decided: 20,
                transactions: [F.transaction("shared-1", product: "lifetime", revoked: 15)]),
        ])
        #expect(state.transactions["shared-1"]?.store == .googlePlay)
        #expect(state.transactions["shared-1"]?.revokedAt == nil)
        #expect(F.entitlements(of: "a1", in: state, at: F.at(day))["premium"]?.active == true)
        let notes = state.history.last { $0.kind == .verdict }?.notes ?? []
        #expect(notes.contains { $0.contains("a transaction of google_play has this id") })
    }

    @Test("one product id in both stores is looked up in the verdict's store: different entitlements and types")
    func sameProductIDInBothStores() {
        let catalog = Catalog(
            products: [
                .init(id: "pro", type: .autoRenewable, entitlements: ["premium"]),
                .init(id: "gold", type: .consumable),
            ],
            playProducts: [
                .init(id: "pro", type: .nonConsumable, entitlements: ["ad_free"]),
                .init(id: "gold", type: .consumable),
            ])
        let (state, _) = F.project(
            [
                F.verdict(
                    "i1", account: "ios", .granted, decided: 10,
                    transactions: [F.transaction("2000000001", product: "pro", expires: 30 * day)]),
                F.verdict(
                    "p1", account: "android", .granted, decided: 10,
                    transactions: [F.transaction("GPA.4-1", product: "pro", orderID: "GPA.4-1")], store: .googlePlay),
                F.verdict(
                    "i2", account: "both", .granted, decided: 10,
                    transactions: [F.transaction("2000000002", product: "gold", quantity: 2)]),
                F.verdict(
                    "p2", account: "both", .granted, decided: 10,
                    transactions: [F.transaction("GPA.4-2", product: "gold", quantity: 5, orderID: "GPA.4-2")],
                    store: .googlePlay),
            ], catalog: catalog)
        let ios = F.entitlements(of: "ios", in: state, at: F.at(day), catalog: catalog)
        let android = F.entitlements(of: "android", in: state, at: F.at(day), catalog: catalog)
        #expect(Set(ios.keys) == ["premium"])
        #expect(Set(android.keys) == ["ad_free"])
        #expect(state.transactions["2000000001"]?.productType == .autoRenewable)
        #expect(state.transactions["GPA.4-1"]?.productType == .nonConsumable)
        // A non-consumable never expires; the App Store's subscription of the same id does.
        #expect(
            F.entitlements(of: "android", in: state, at: F.at(400 * day), catalog: catalog)["ad_free"]?.active == true)
        #expect(F.entitlements(of: "ios", in: state, at: F.at(400 * day), catalog: catalog)["premium"]?.active == false)
        // Consumables are counted per store.
        #expect(state.consumableDeltas[ConsumableKey(accountID: "both", productID: "gold", store: .appStore)] == 2)
        #expect(state.consumableDeltas[ConsumableKey(accountID: "both", productID: "gold", store: .googlePlay)] == 5)
    }

    @Test("a Play product the catalog does not list is judged as an unlisted App Store one, never by the other store")
    func unknownPlayProduct() {
        // `lifetime` is an App Store product granting premium; Google Play lists no such product.
        let (state, results) = F.project([
            F.verdict(
                "p1", account: "android", .granted, decided: 10,
                transactions: [F.transaction("GPA.5-1", product: "lifetime", orderID: "GPA.5-1")], store: .googlePlay),
            F.verdict(
                "i1", account: "ios", .granted, decided: 10,
                transactions: [F.transaction("2000000001", product: "unlisted.thing")]),
            F.verdict(
                "p2", account: "android", .granted, decided: 10,
                transactions: [F.transaction("GPA.5-2", product: "unlisted.thing", orderID: "GPA.5-2")],
                store: .googlePlay),
        ])
        #expect(results == [.applied, .applied, .applied])
        let android = F.entitlements(of: "android", in: state, at: F.at(day))
        #expect(android["premium"] == nil)
        #expect(Set(android.keys) == ["lifetime", "unlisted.thing"])
        let ios = F.entitlements(of: "ios", in: state, at: F.at(day))
        #expect(Set(ios.keys) == ["unlisted.thing"])
        #expect(state.transactions["GPA.5-2"]?.productType == state.transactions["2000000001"]?.productType)
    }

    @Test("a verdict without store (written before the field) is the App Store's")
    func verdictWithoutStore() throws {
        let verdict = F.verdict(
            "i1", account: "a1", .granted, decided: 10, transactions: [F.transaction("lifetime-1", product: "lifetime")]
        )
        let bytes = F.verdictJSON(verdict, replacing: ["store": NSNull()])
        #expect(!String(decoding: bytes, as: UTF8.self).contains("\"store\""))
        guard case .verdict(let read, _) = VerdictReader().read(bytes, position: "receipt-verdicts/0/1") else {
            Issue.record("a verdict without store was not read")
            return
        }
        var state = ProjectionState()
        #expect(
            EntitlementProjection.apply(.verdict(read), to: &state, catalog: F.catalog, recordedAt: F.at(1)) == .applied
        )
        #expect(state.transactions["lifetime-1"]?.store == .appStore)
        #expect(F.entitlements(of: "a1", in: state, at: F.at(day))["premium"]?.active == true)
        #expect(state.history.first?.store == .appStore)
    }

    @Test("an event carries its transaction's store; an event stored before the field reads as the App Store's")
    func eventStore() throws {
        let (state, _) = F.project([
            F.verdict(
                "p1", account: "a1", .granted, decided: 10,
                transactions: [Self.playSubscription("GPA.6-1", expires: 30 * day)], store: .googlePlay)
        ])
        let event = try #require(state.events.first)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(event.json)) as? [String: Any])
        #expect(object["store"] as? String == "google_play")
        let decoded = try RFC3339.jsonDecoder().decode(LifecycleEvent.self, from: Data(event.json))
        #expect(decoded == event)
        var old = object
        old["store"] = nil
        let oldEvent = try RFC3339.jsonDecoder().decode(
            LifecycleEvent.self, from: JSONSerialization.data(withJSONObject: old))
        #expect(oldEvent.store == .appStore)
        #expect(oldEvent.eventID == event.eventID)
    }
}

/// The API shows one account across stores: each transaction, entitlement and consumable with its store.
@Suite("Entitlement API across stores", .timeLimit(.minutes(2)))
struct EntitlementCrossStoreAPITests {
    typealias F = EntitlementFixtures
    static let day = EntitlementFixtures.day

    /// An account with an App Store subscription, a Google Play lifetime purchase and consumables of both stores.
    static let verdicts = [
        F.verdict(
            "i1", account: "acct-x", .granted, decided: 10,
            transactions: [F.transaction("2000000001", expires: 5 * day)]),
        F.verdict(
            "p1", account: "acct-x", .granted, decided: 20,
            transactions: [
                F.transaction(
                    "GPA.9-1", product: "premium_forever", original: "tok-9-1", purchased: 20, orderID: "GPA.9-1",
                    purchaseToken: "tok-9-1")
            ], store: .googlePlay),
        F.verdict(
            "p2", account: "acct-x", .granted, decided: 30,
            transactions: [
                F.transaction("GPA.9-2", product: "gems_50", purchased: 30, quantity: 2, orderID: "GPA.9-2")
            ],
            store: .googlePlay),
        F.verdict(
            "i2", account: "acct-x", .granted, decided: 40,
            transactions: [F.transaction("2000000002", product: "gems_50", purchased: 40)]),
        F.verdict(
            "p3", account: "acct-y", .granted, decided: 50,
            transactions: [F.transaction("GPA.9-3", product: "premium_forever", purchased: 50, orderID: "GPA.9-3")],
            store: .googlePlay),
        F.verdict(
            "p4", account: "acct-y", .rejected, reason: .revoked, decided: 60,
            transactions: [
                F.transaction("GPA.9-3", product: "premium_forever", purchased: 50, revoked: 55, orderID: "GPA.9-3")
            ], store: .googlePlay),
    ]

    @Test("transactions, entitlements and consumables each name their store; Google Play's order id and token")
    func storesInAnswers() async throws {
        try await EntitlementAPIHarness.with(verdicts: Self.verdicts, now: F.at(10 * Self.day)) { h in
            let transactions = try await h.get("/v1/accounts/acct-x/transactions")
            #expect(transactions.status == 200)
            let list = transactions.json["transactions"] as? [[String: Any]] ?? []
            let byID = Dictionary(uniqueKeysWithValues: list.map { ($0["transaction_id"] as? String ?? "", $0) })
            #expect(byID["2000000001"]?["store"] as? String == "app_store")
            #expect(byID["2000000001"]?["order_id"] is NSNull)
            #expect(byID["GPA.9-1"]?["store"] as? String == "google_play")
            #expect(byID["GPA.9-1"]?["order_id"] as? String == "GPA.9-1")
            #expect(byID["GPA.9-1"]?["entitlements"] as? [String] == ["premium"])
            #expect(byID["GPA.9-1"]?["purchase_token"] as? String == "tok-9-1")
            #expect(byID["GPA.9-1"]?["original_transaction_id"] as? String == "tok-9-1")
            #expect(byID["2000000001"]?["purchase_token"] is NSNull)

            // The App Store subscription expired on day 5; premium stands on the Google Play purchase.
            let entitlements = try await h.get("/v1/accounts/acct-x/entitlements")
            let premium = (entitlements.json["entitlements"] as? [[String: Any]] ?? []).first {
                $0["id"] as? String == "premium"
            }
            #expect(premium?["active"] as? Bool == true)
            #expect(premium?["store"] as? String == "google_play")
            #expect(premium?["product_id"] as? String == "premium_forever")
            let consumables = entitlements.json["consumables"] as? [[String: Any]] ?? []
            #expect(
                consumables.map {
                    "\($0["product_id"] as? String ?? "") \($0["store"] as? String ?? "") \($0["count"] as? Int ?? 0)"
                }
                    == ["gems_50 app_store 1", "gems_50 google_play 2"])

            let lookup = try await h.get("/v1/transactions/GPA.9-1")
            #expect(lookup.json["account_id"] as? String == "acct-x")
            let byToken = try await h.get("/v1/transactions/tok-9-1")
            #expect(byToken.json["matched_by"] as? String == "original_transaction_id")
            #expect(byToken.json["account_id"] as? String == "acct-x")
            let history = try await h.get("/v1/accounts/acct-x/history")
            let entries = history.json["entries"] as? [[String: Any]] ?? []
            #expect(entries.first { $0["job_id"] as? String == "p1" }?["store"] as? String == "google_play")
            #expect(entries.first { $0["job_id"] as? String == "i1" }?["store"] as? String == "app_store")
        }
    }

    @Test("a Google Play refund is explained as Google Play's, in the verdict and in its event")
    func playWordsInHistory() async throws {
        try await EntitlementAPIHarness.with(verdicts: Self.verdicts, now: F.at(10 * Self.day)) { h in
            let entries = try await h.get("/v1/accounts/acct-y/history").json["entries"] as? [[String: Any]] ?? []
            let explanations = entries.compactMap { $0["explanation"] as? String }
            #expect(
                explanations.contains("Google Play refunded, voided or revoked the purchase. Its entitlement ends."))
            #expect(
                explanations.contains("Google Play refunded or revoked the purchase: the entitlement it gave ends."))
            #expect(!explanations.contains { $0.contains("Apple") })
        }
    }
}
