import Foundation
import Messages
import Testing

@testable import Entitlements

/// The projection as a pure function: one rule per test, from verdicts to entitlements and lifecycle events.
@Suite("Entitlement projection")
struct EntitlementProjectionTests {
    typealias F = EntitlementFixtures
    let day = EntitlementFixtures.day

    @Test("a granted subscription is active until its expiry, and the purchase is one initial_purchase event")
    func grantedSubscription() {
        let (state, results) = F.project([
            F.verdict(
                "j1", account: "a1", .granted, decided: 10, transactions: [F.transaction("t1", expires: 30 * day)])
        ])
        #expect(results == [.applied])
        let now = F.entitlements(of: "a1", in: state, at: F.at(day))
        #expect(now["premium"]?.active == true)
        #expect(now["premium"]?.representative.expiresDate == F.at(30 * day))
        #expect(F.entitlements(of: "a1", in: state, at: F.at(31 * day))["premium"]?.active == false)
        #expect(F.eventKinds(state, account: "a1") == [.initialPurchase])
        #expect(state.history.map(\.kind) == [.verdict, .event])
    }

    @Test("the same verdict twice changes nothing the second time (de-duplicated on verdict_id)")
    func redelivery() {
        let verdict = F.verdict(
            "j1", account: "a1", .granted, decided: 10, transactions: [F.transaction("t1", expires: day)])
        let (state, results) = F.project([verdict, verdict])
        #expect(results == [.applied, .duplicate])
        #expect(state.events.count == 1)
        #expect(state.history.count == 2)
    }

    @Test("one job id with two different verdict ids is two verdicts (no assumption of one verdict per job)")
    func sameJobTwoVerdicts() {
        var first = F.verdict(
            "j1", account: "a1", .granted, decided: 10, transactions: [F.transaction("t1", expires: day)])
        var second = F.verdict(
            "j1", account: "a1", .granted, decided: 20,
            transactions: [F.transaction("t2", original: "t1", expires: 2 * day)])
        first.verdictID = "00000000-0000-5000-8000-000000000001"
        second.verdictID = "00000000-0000-5000-8000-000000000002"
        let (state, results) = F.project([first, second])
        #expect(results == [.applied, .applied])
        #expect(state.transactions(ofAccount: "a1").count == 2)
    }

    @Test("a non-consumable never expires but a refund revokes it, with a refund event")
    func nonConsumableRefund() {
        let (state, _) = F.project([
            F.verdict(
                "j1", account: "a1", .granted, decided: 10, transactions: [F.transaction("t1", product: "no.ads")]),
            F.verdict(
                "n1", account: "a1", .rejected, reason: .revoked, decided: 20,
                transactions: [F.transaction("t1", product: "no.ads", revoked: 15)]),
        ])
        #expect(F.entitlements(of: "a1", in: state, at: F.at(10))["no.ads"]?.active == false)
        #expect(F.eventKinds(state, account: "a1") == [.initialPurchase, .refund])
        let (kept, _) = F.project([
            F.verdict(
                "j1", account: "a1", .granted, decided: 10, transactions: [F.transaction("t1", product: "no.ads")])
        ])
        #expect(F.entitlements(of: "a1", in: kept, at: F.at(100 * 365 * day))["no.ads"]?.active == true)
    }

    @Test("a consumable grants no entitlement; the account gets a count of units, less refunds")
    func consumables() {
        let (state, _) = F.project([
            F.verdict(
                "j1", account: "a1", .granted, decided: 1, transactions: [F.transaction("c1", product: "coins.100")]),
            F.verdict(
                "j2", account: "a1", .granted, decided: 2,
                transactions: [F.transaction("c2", product: "coins.100", quantity: 3)]),
            F.verdict(
                "n1", account: "a1", .rejected, reason: .revoked, decided: 3,
                transactions: [F.transaction("c1", product: "coins.100", revoked: 3)]),
        ])
        #expect(F.entitlements(of: "a1", in: state, at: F.at(5)).isEmpty)
        #expect(state.consumableDeltas[ConsumableKey(accountID: "a1", productID: "coins.100")] == 3)
        #expect(state.events.isEmpty)
    }

    @Test("a verdict older than the one applied does not roll a transaction back (out of order)")
    func outOfOrder() {
        let newer = F.verdict(
            "n1", account: "a1", .rejected, reason: .revoked, decided: 50,
            transactions: [F.transaction("t1", expires: 30 * day, revoked: 40)])
        let older = F.verdict(
            "j1", account: "a1", .alreadyGranted, reason: .alreadyOwned, decided: 10,
            transactions: [F.transaction("t1", expires: 30 * day)])
        let (state, results) = F.project([
            F.verdict(
                "j0", account: "a1", .granted, decided: 5, transactions: [F.transaction("t1", expires: 30 * day)]),
            newer, older,
        ])
        #expect(results == [.applied, .applied, .stale])
        #expect(state.transactions["t1"]?.revokedAt == F.at(40))
        #expect(state.history.last { $0.kind == .verdict }?.effect == .stale)
    }

    @Test("a renewal (new transaction of the same subscription) extends the entitlement: renewal event")
    func renewal() {
        let (state, _) = F.project([
            F.verdict(
                "j1", account: "a1", .granted, decided: 10, transactions: [F.transaction("t1", expires: 30 * day)]),
            F.verdict(
                "n1", account: "a1", .granted, decided: 30 * day - 5,
                transactions: [F.transaction("t2", original: "t1", purchased: 30 * day - 10, expires: 60 * day)]),
        ])
        #expect(F.eventKinds(state, account: "a1") == [.initialPurchase, .renewal])
        #expect(F.entitlements(of: "a1", in: state, at: F.at(45 * day))["premium"]?.active == true)
    }

    @Test("a new period of another product of the same subscription is a product change")
    func productChange() {
        let (state, _) = F.project([
            F.verdict(
                "j1", account: "a1", .granted, decided: 10, transactions: [F.transaction("t1", expires: 30 * day)]),
            F.verdict(
                "j2", account: "a1", .granted, decided: 20 * day,
                transactions: [
                    F.transaction("t2", product: "pro.yearly", original: "t1", purchased: 20 * day, expires: 385 * day)
                ]),
        ])
        #expect(F.eventKinds(state, account: "a1") == [.initialPurchase, .productChange])
    }

    @Test("billing retry with grace, as the verdict's renewal info states it: billing_issue and grace_period_entered")
    func grace() {
        let (state, _) = F.project([
            F.verdict(
                "j1", account: "a1", .granted, decided: 10, transactions: [F.transaction("t1", expires: 30 * day)]),
            F.verdict(
                "n1", account: "a1", .alreadyGranted, reason: .alreadyOwned, decided: 30 * day,
                transactions: [F.transaction("t1", expires: 46 * day, billingRetry: true, grace: 46 * day)]),
        ])
        #expect(F.eventKinds(state, account: "a1") == [.initialPurchase, .billingIssue, .gracePeriodEntered])
        let premium = F.entitlements(of: "a1", in: state, at: F.at(40 * day))["premium"]
        #expect(premium?.active == true)
        #expect(premium?.inGracePeriod(at: F.at(40 * day)) == true)
        // A renewal after the retry ends the billing retry.
        let (renewed, _) = F.project(
            [
                F.verdict(
                    "n2", account: "a1", .granted, decided: 41 * day,
                    transactions: [F.transaction("t2", original: "t1", purchased: 41 * day, expires: 71 * day)])
            ], into: state)
        #expect(renewed.transactions["t1"]?.inBillingRetry == false)
        #expect(
            F.entitlements(of: "a1", in: renewed, at: F.at(50 * day))["premium"]?.inGracePeriod(at: F.at(50 * day))
                == false)
    }

    @Test("an expired verdict records the transactions as the account's history and publishes an expiration")
    func expired() {
        let (state, results) = F.project([
            F.verdict(
                "j1", account: "a1", .granted, decided: 10, transactions: [F.transaction("t1", expires: 30 * day)]),
            F.verdict(
                "n1", account: "a1", .rejected, reason: .expired, decided: 31 * day,
                transactions: [F.transaction("t1", expires: 30 * day)]),
            F.verdict(
                "j2", account: "a2", .rejected, reason: .expired, decided: 40 * day,
                transactions: [F.transaction("old", expires: 3 * day)]),
        ])
        #expect(results == [.applied, .noChange, .applied])
        #expect(F.eventKinds(state, account: "a1") == [.initialPurchase, .expiration])
        #expect(state.transactions["old"]?.accountID == "a2")
        #expect(F.eventKinds(state, account: "a2").isEmpty)
        #expect(F.entitlements(of: "a2", in: state, at: F.at(40 * day))["premium"]?.active == false)
    }

    @Test("the same expiration seen twice has one event id")
    func expirationOnce() {
        let granted = F.verdict(
            "j1", account: "a1", .granted, decided: 10, transactions: [F.transaction("t1", expires: 30 * day)])
        let (a, _) = F.project([
            granted,
            F.verdict(
                "n1", account: "a1", .rejected, reason: .expired, decided: 31 * day,
                transactions: [F.transaction("t1", expires: 30 * day)]),
        ])
        let (b, _) = F.project([
            granted,
            F.verdict(
                "n2", account: "a1", .rejected, reason: .expired, decided: 32 * day,
                transactions: [F.transaction("t1", expires: 30 * day)]),
        ])
        #expect(a.events.last?.kind == .expiration)
        #expect(a.events.last?.eventID == b.events.last?.eventID)
    }

    @Test("a replayed verdict, an unknown reason code and unverifiable grant nothing")
    func nothingGranted() {
        let (state, results) = F.project([
            F.verdict(
                "j1", account: "a1", .granted, decided: 10, transactions: [F.transaction("t1", product: "no.ads")]),
            F.verdict(
                "j2", account: "a2", .rejected, reason: .replayed, decided: 20,
                transactions: [F.transaction("t1", product: "no.ads")]),
            F.verdict(
                "j3", account: "a2", .rejected, reason: Verdict.Reason("fraud_suspected"), decided: 30,
                transactions: [F.transaction("t9", product: "no.ads")]),
            F.verdict(
                "j4", account: "a2", .unverifiable, reason: .appleUnavailable, decided: 40,
                transactions: [F.transaction("t8", product: "no.ads")]),
        ])
        #expect(results == [.applied, .noChange, .noChange, .noChange])
        #expect(state.transactions(ofAccount: "a2").isEmpty)
        #expect(state.transactions["t1"]?.accountID == "a1")
        #expect(state.history.filter { $0.accountID == "a2" }.count == 3)
    }

    @Test("already_granted confirms ownership but never takes a transaction from another account")
    func alreadyGrantedNeverMoves() {
        let (state, _) = F.project([
            F.verdict(
                "j1", account: "a1", .granted, decided: 10, transactions: [F.transaction("t1", product: "no.ads")]),
            F.verdict(
                "j2", account: "a2", .alreadyGranted, reason: .alreadyOwned, decided: 20,
                transactions: [F.transaction("t1", product: "no.ads"), F.transaction("t5", product: "lifetime")]),
        ])
        #expect(state.transactions["t1"]?.accountID == "a1")
        #expect(state.transactions["t5"]?.accountID == "a2")
    }

    @Test("a granted current period moves an expired subscription from its old owner: transfer to both")
    func transfer() {
        let (state, _) = F.project([
            F.verdict(
                "j1", account: "a1", .granted, decided: 10, transactions: [F.transaction("t1", expires: 30 * day)]),
            F.verdict(
                "j2", account: "a2", .granted, decided: 40 * day,
                transactions: [
                    F.transaction("t1", expires: 30 * day),
                    F.transaction("t2", original: "t1", purchased: 39 * day, expires: 69 * day),
                ]),
        ])
        #expect(state.transactions["t1"]?.accountID == "a2")
        #expect(state.transactions["t2"]?.accountID == "a2")
        #expect(state.transactions(ofAccount: "a1").isEmpty)
        #expect(F.eventKinds(state, account: "a1") == [.initialPurchase, .transfer])
        #expect(F.eventKinds(state, account: "a2") == [.transfer])
        let moved = state.events.first { $0.accountID == "a2" }
        #expect(moved?.fromAccountID == "a1" && moved?.toAccountID == "a2" && moved?.active == true)
        #expect(F.entitlements(of: "a2", in: state, at: F.at(50 * day))["premium"]?.active == true)
    }

    @Test("a granted verdict older than the subscription's move does not take it back")
    func lateGrantDoesNotUndoMove() {
        let (state, _) = F.project([
            F.verdict(
                "j2", account: "a2", .granted, decided: 40 * day,
                transactions: [
                    F.transaction("t1", expires: 30 * day),
                    F.transaction("t2", original: "t1", purchased: 39 * day, expires: 69 * day),
                ]),
            F.verdict(
                "j1", account: "a1", .granted, decided: 10, transactions: [F.transaction("t1", expires: 30 * day)]),
        ])
        #expect(state.transactions["t1"]?.accountID == "a2")
        #expect(state.transactions(ofAccount: "a1").isEmpty)
    }

    @Test("a replayed transaction inside a granted verdict stays with its owner; the new one is granted")
    func mixedVerdict() {
        let (state, _) = F.project([
            F.verdict(
                "j1", account: "a1", .granted, decided: 10, transactions: [F.transaction("t1", product: "no.ads")]),
            F.verdict(
                "j2", account: "a2", .granted, decided: 20,
                transactions: [F.transaction("t1", product: "no.ads"), F.transaction("t2", product: "lifetime")]),
        ])
        #expect(state.transactions["t1"]?.accountID == "a1")
        #expect(state.transactions["t2"]?.accountID == "a2")
        #expect(F.entitlements(of: "a2", in: state, at: F.at(30))["no.ads"] == nil)
        #expect(F.entitlements(of: "a2", in: state, at: F.at(30))["premium"]?.active == true)
    }

    @Test("a second product granting an active entitlement publishes no second initial_purchase")
    func secondProductSameEntitlement() {
        let (state, _) = F.project([
            F.verdict(
                "j1", account: "a1", .granted, decided: 10, transactions: [F.transaction("t1", expires: 30 * day)]),
            F.verdict(
                "j2", account: "a1", .granted, decided: 20, transactions: [F.transaction("t2", product: "lifetime")]),
        ])
        #expect(F.eventKinds(state, account: "a1") == [.initialPurchase])
        #expect(F.entitlements(of: "a1", in: state, at: F.at(40 * day))["premium"]?.active == true)
    }

    @Test("a product missing from the catalog grants an entitlement named after it")
    func unmappedProduct() {
        let (state, _) = F.project([
            F.verdict(
                "j1", account: "a1", .granted, decided: 10, transactions: [F.transaction("t1", product: "brand.new")])
        ])
        #expect(F.entitlements(of: "a1", in: state, at: F.at(1000 * day))["brand.new"]?.active == true)
    }

    @Test("unreadable messages are recorded as ignored in the account's history, once")
    func ignored() {
        var state = ProjectionState()
        let message = UnreadableMessage(
            dedupeID: "v-9", accountID: "a1", verdictID: "v-9", schema: "receipt-verdict/v2", outcome: "granted",
            code: "unsupported_schema", problem: "schema is not receipt-verdict/v1")
        let first = EntitlementProjection.apply(
            .unreadable(message), to: &state, catalog: F.catalog, recordedAt: F.at(0))
        let second = EntitlementProjection.apply(
            .unreadable(message), to: &state, catalog: F.catalog, recordedAt: F.at(0))
        #expect(first == .ignored && second == .duplicate)
        #expect(state.history.count == 1)
        #expect(state.history.first?.kind == .ignored)
        #expect(state.transactions.isEmpty)
    }

    @Test("event ids are deterministic: the same verdicts projected again give the same ids")
    func deterministicEventIDs() {
        let verdicts = [
            F.verdict(
                "j1", account: "a1", .granted, decided: 10, transactions: [F.transaction("t1", expires: 30 * day)]),
            F.verdict(
                "n1", account: "a1", .rejected, reason: .revoked, decided: 20,
                transactions: [F.transaction("t1", expires: 30 * day, revoked: 20)]),
        ]
        let (a, _) = F.project(verdicts)
        let (b, _) = F.project(verdicts)
        #expect(a.events.map(\.eventID) == b.events.map(\.eventID))
        #expect(Set(a.events.map(\.eventID)).count == a.events.count)
    }

    // MARK: Renewal info, never inferred from dates

    @Test(
        "an extension (the same transaction lasting longer, no billing retry) is renewal_extended, not billing trouble")
    func renewalExtension() {
        for stated in [false, nil] as [Bool?] {
            let (state, _) = F.project([
                F.verdict(
                    "j1", account: "a1", .granted, decided: 10, transactions: [F.transaction("t1", expires: 30 * day)]),
                F.verdict(
                    "n1", account: "a1", .alreadyGranted, reason: .alreadyOwned, decided: 20 * day,
                    transactions: [F.transaction("t1", expires: 37 * day, billingRetry: stated)]),
            ])
            #expect(F.eventKinds(state, account: "a1") == [.initialPurchase, .renewalExtended])
            #expect(state.transactions["t1"]?.inBillingRetry == false)
            #expect(state.transactions["t1"]?.inGracePeriod == false)
            let premium = F.entitlements(of: "a1", in: state, at: F.at(35 * day))["premium"]
            #expect(premium?.active == true)
            #expect(premium?.inGracePeriod(at: F.at(35 * day)) == false)
        }
    }

    @Test("a billing retry without grace is billing_issue alone (no grace period), and the entitlement has ended")
    func billingRetryWithoutGrace() {
        let (state, _) = F.project([
            F.verdict(
                "j1", account: "a1", .granted, decided: 10, transactions: [F.transaction("t1", expires: 30 * day)]),
            F.verdict(
                "n1", account: "a1", .rejected, reason: .expired, decided: 30 * day,
                transactions: [F.transaction("t1", expires: 30 * day, billingRetry: true)]),
        ])
        #expect(F.eventKinds(state, account: "a1") == [.initialPurchase, .billingIssue])
        #expect(state.transactions["t1"]?.inBillingRetry == true)
        #expect(state.transactions["t1"]?.inGracePeriod == false)
        #expect(F.entitlements(of: "a1", in: state, at: F.at(31 * day))["premium"]?.active == false)
    }

    // MARK: A subscription stands as its latest transaction

    /// Two periods of one subscription where the earlier one's expiry (extended, or kept when a later period's
    /// dates were stated earlier) is later than the latest period's end.
    func periods(latestExpires: Double = 50, latestRevoked: Double? = nil, billingRetry: Bool? = nil) -> [Verdict] {
        [
            F.verdict(
                "j1", account: "a1", .granted, decided: 10, transactions: [F.transaction("t1", expires: 30 * day)]),
            F.verdict(
                "n1", account: "a1", .alreadyGranted, reason: .alreadyOwned, decided: 20 * day,
                transactions: [F.transaction("t1", expires: 80 * day, billingRetry: false)]),
            F.verdict(
                "n2", account: "a1", .granted, decided: 25 * day,
                transactions: [F.transaction("t2", original: "t1", purchased: 25 * day, expires: 55 * day)]),
            F.verdict(
                "n3", account: "a1", .rejected, reason: latestRevoked == nil ? .expired : .revoked, decided: 40 * day,
                transactions: [
                    F.transaction(
                        "t2", original: "t1", purchased: 25 * day, expires: latestExpires * day,
                        revoked: latestRevoked.map { $0 * day }, billingRetry: billingRetry)
                ]),
        ]
    }

    @Test("(a) billing retry then expiry of the latest period ends access, though an earlier period lasts longer")
    func billingRetryThenExpiry() {
        var verdicts = periods(latestExpires: 35, billingRetry: true)
        verdicts.append(
            F.verdict(
                "n4", account: "a1", .rejected, reason: .expired, decided: 45 * day,
                transactions: [
                    F.transaction("t2", original: "t1", purchased: 25 * day, expires: 35 * day, billingRetry: false)
                ]))
        let (state, _) = F.project(verdicts)
        let premium = F.entitlements(of: "a1", in: state, at: F.at(50 * day))["premium"]
        #expect(premium?.active == false)
        #expect(premium?.representative.transactionID == "t2")
        #expect(F.eventKinds(state, account: "a1").contains(.billingIssue))
        #expect(state.transactions["t2"]?.inBillingRetry == false)
    }

    @Test("(b) an expiry of the latest period before an earlier period's end ends access")
    func earlyExpiry() {
        let (state, _) = F.project(periods(latestExpires: 38))
        #expect(F.entitlements(of: "a1", in: state, at: F.at(40 * day))["premium"]?.active == false)
        #expect(F.eventKinds(state, account: "a1").last == .expiration)
    }

    @Test("(c) a refund of the latest period of a resubscribed subscription ends access: refund, nothing active")
    func refundOfLatest() {
        let (state, _) = F.project(periods(latestRevoked: 39))
        let premium = F.entitlements(of: "a1", in: state, at: F.at(40 * day))["premium"]
        #expect(premium?.active == false)
        #expect(premium?.representative.transactionID == "t2")
        let refund = state.events.first { $0.kind == .refund }
        #expect(refund?.active == false)
        #expect(F.entitlements(of: "a1", in: state, at: F.at(70 * day))["premium"]?.active == false)
    }

    @Test("(d) an extended earlier period does not outlive a later period that expired; the sweep sees it end")
    func extendedEarlierPeriod() {
        let (state, _) = F.project(Array(periods(latestExpires: 55).prefix(3)))
        #expect(F.entitlements(of: "a1", in: state, at: F.at(60 * day))["premium"]?.active == false)
        let swept = ExpirationSweep.events(
            account: "a1", transactions: state.transactions(ofAccount: "a1"), catalog: F.catalog,
            window: F.at(50 * day)...F.at(60 * day))
        #expect(swept.map(\.kind) == [.expiration])
        #expect(swept.first?.transactionID == "t2")
    }
}
