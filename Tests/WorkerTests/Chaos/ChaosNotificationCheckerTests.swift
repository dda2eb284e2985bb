import Foundation
import Messages
import Testing

@testable import Chaos

/// The notification family's end invariants on synthetic truths and ledgers: agreement passes, and each kind of
/// drift, a missing or doubled consumption answer, a wrong finish and a reconciler over its budget is found.
@Suite("Chaos: notification invariants")
struct ChaosNotificationCheckerTests {
    static let truth: [String: ChaosTransactionTruth] = [
        "t1": ChaosTransactionTruth(transactionID: "t1", state: "active", expiresMs: 2_000_000),
        "t2": ChaosTransactionTruth(transactionID: "t2", state: "revoked"),
        "t3": ChaosTransactionTruth(
            transactionID: "t3", state: "active", consumptionDeliveryStatuses: ["DELIVERED"], finishCalls: 1),
        "t4": ChaosTransactionTruth(transactionID: "t4", state: "billing_retry", expiresMs: 1_000),
    ]

    static let ledger: [String: ChaosLedgerTransaction] = [
        "t1": ChaosLedgerTransaction(accountID: "alice", state: "active", expiresMs: 2_000_000),
        "t2": ChaosLedgerTransaction(accountID: "bob", state: "revoked", expiresMs: nil),
        "t3": ChaosLedgerTransaction(accountID: "carol", state: "active", expiresMs: nil),
        "t4": ChaosLedgerTransaction(accountID: "dave", state: "expired", expiresMs: 1_000),
    ]

    static let checker = ChaosNotificationChecker(
        owners: ["t1": "alice", "t2": "bob", "t3": "carol", "t4": "dave"], consumptionRequested: ["t3"],
        granted: ["t3"], notGranted: ["t5"])

    @Test("A ledger that agrees with the truth has no drift (billing retry without grace reads as expired)")
    func agreement() {
        #expect(Self.checker.drift(truth: Self.truth, ledger: Self.ledger).isEmpty)
        #expect(Self.checker.consumptionAnswers(truth: Self.truth).isEmpty)
        #expect(Self.checker.finishCalls(truth: Self.truth).isEmpty)
    }

    @Test("A ledger row that differs from the truth in owner, state or expiry, or is missing, is notification_drift")
    func drift() {
        var ledger = Self.ledger
        ledger["t1"]?.expiresMs = 1_999_999
        ledger["t2"]?.state = "active"
        ledger["t3"]?.accountID = "mallory"
        ledger["t4"] = nil
        let found = Self.checker.drift(truth: Self.truth, ledger: ledger)
        #expect(found.map(\.kind) == Array(repeating: "notification_drift", count: 4))
        #expect(found[0].description.contains("expires_ms 1999999, truth 2000000"))
        #expect(found[1].description.contains("state active, truth revoked"))
        #expect(found[2].description.contains("owner mallory, not carol"))
        #expect(found[3].description.contains("no ledger claim"))
        // A subscription whose latest period the ledger holds stands as that period does, whatever the earlier
        // period's own state: a refunded latest period with an earlier one still running is drift if the ledger
        // calls the subscription active. One-time purchases have no subscription state to compare.
        var subscriptionTruth = Self.truth
        subscriptionTruth["t1"]?.type = ChaosNotificationChecker.autoRenewableType
        subscriptionTruth["t1"]?.subscriptionState = "revoked"
        subscriptionTruth["t1"]?.subscriptionLatestID = "t9"
        var subscriptionLedger = Self.ledger
        subscriptionLedger["t1"]?.subscriptionState = "active"
        subscriptionLedger["t1"]?.subscriptionLatestID = "t9"
        #expect(
            Self.checker.drift(truth: subscriptionTruth, ledger: subscriptionLedger).map(\.description) == [
                "transaction t1: the ledger drifted from Apple: subscription state active, truth revoked (latest t9)"
            ])
        subscriptionLedger["t1"]?.subscriptionState = "revoked"
        #expect(Self.checker.drift(truth: subscriptionTruth, ledger: subscriptionLedger).isEmpty)
        subscriptionTruth["t1"]?.type = "Non-Consumable"
        subscriptionLedger["t1"]?.subscriptionState = nil
        #expect(Self.checker.drift(truth: subscriptionTruth, ledger: subscriptionLedger).isEmpty)
        // A transaction the simulator does not know is drift too, not silently skipped.
        var truth = Self.truth
        truth["t1"] = nil
        #expect(
            Self.checker.drift(truth: truth, ledger: Self.ledger).map(\.description) == [
                "transaction t1: the ledger drifted from Apple: the simulator has no truth for it"
            ])
    }

    @Test("No answer, two answers or a wrong deliveryStatus is consumption_answers")
    func consumption() {
        for statuses in [[], ["DELIVERED", "DELIVERED"], ["UNDELIVERED_OTHER"]] {
            var truth = Self.truth
            truth["t3"]?.consumptionDeliveryStatuses = statuses
            #expect(Self.checker.consumptionAnswers(truth: truth).map(\.kind) == ["consumption_answers"])
        }
    }

    @Test("A claim revoked otherwise than Apple says (type or prorated share) is notification_drift")
    func revocationDrift() {
        var truth = Self.truth
        truth["t2"]?.revocationType = "REFUND_PRORATED"
        truth["t2"]?.revocationPercentage = 40_000
        var ledger = Self.ledger
        ledger["t2"]?.revocationType = "REFUND_PRORATED"
        ledger["t2"]?.revocationPercentage = 40_000
        #expect(Self.checker.drift(truth: truth, ledger: ledger).isEmpty)
        ledger["t2"]?.revocationPercentage = 100_000
        #expect(
            Self.checker.drift(truth: truth, ledger: ledger).map(\.description) == [
                "transaction t2: the ledger drifted from Apple: revocation_percentage 100000, truth 40000"
            ])
        // A family member's lost access recorded as a refund.
        truth["t2"]?.revocationType = "FAMILY_REVOKE"
        truth["t2"]?.revocationPercentage = nil
        ledger["t2"]?.revocationType = "REFUND_FULL"
        ledger["t2"]?.revocationPercentage = nil
        #expect(
            Self.checker.drift(truth: truth, ledger: ledger).map(\.description) == [
                "transaction t2: the ledger drifted from Apple: revocation_type REFUND_FULL, truth FAMILY_REVOKE"
            ])
    }

    @Test("An answer other than the refund policy's, or a ledger record not naming its rule, is consumption_answers")
    func consumptionPolicy() {
        var checker = Self.checker
        checker.expectedAnswers["t3"] = ChaosNotificationChecker.expectedAnswer(for: .consumable)
        var truth = Self.truth
        truth["t3"]?.consumptionRefundPreferences = ["DECLINE"]
        let sent: [String: (state: String, detail: String?)] = ["t3": ("sent", "rule chaos-consumables")]
        #expect(checker.consumptionAnswers(truth: truth, records: sent).isEmpty)
        // The body carries another preference, or none (a data-only answer where the rule says no_refund).
        for preference in ["GRANT_FULL", nil] as [String?] {
            truth["t3"]?.consumptionRefundPreferences = [preference]
            #expect(
                checker.consumptionAnswers(truth: truth, records: sent).map(\.description) == [
                    "transaction t3: consumption answers: refundPreference \(preference ?? "none"), the policy's rule "
                        + "chaos-consumables says DECLINE"
                ])
        }
        truth["t3"]?.consumptionRefundPreferences = ["DECLINE"]
        // The record names another rule, none, or is missing.
        for records in [["t3": ("sent", "rule default")], ["t3": ("sent", nil)], [:]] as [[String: (String, String?)]] {
            let found = checker.consumptionAnswers(
                truth: truth, records: records.mapValues { (state: $0.0, detail: $0.1) })
            #expect(found.map(\.kind) == ["consumption_answers"])
        }
        // Anything else than a consumable is answered by the default rule, with the facts and no preference.
        #expect(
            ChaosNotificationChecker.expectedAnswer(for: .nonConsumable)
                == ChaosExpectedConsumptionAnswer(rule: "default", refundPreference: nil))
        #expect(ChaosNotificationChecker.refundPolicy.contains("\"no_refund\""))
    }

    @Test("A granted transaction never finished, or another one finished, is finish_calls")
    func finish() {
        var truth = Self.truth
        truth["t3"]?.finishCalls = 0
        truth["t5"] = ChaosTransactionTruth(transactionID: "t5", state: "expired", finishCalls: 1)
        let found = Self.checker.finishCalls(truth: truth)
        #expect(found.map(\.kind) == ["finish_calls", "finish_calls"])
        #expect(found.map(\.description).joined().contains("granted, never finished"))
        #expect(found.map(\.description).joined().contains("not granted, finished 1 times"))
        // Finished twice (a worker killed after the call, before its record) is allowed.
        truth["t3"]?.finishCalls = 2
        truth["t5"]?.finishCalls = 0
        #expect(Self.checker.finishCalls(truth: truth).isEmpty)
    }

    @Test("More history requests than rate × time plus one per process start is reconcile_budget")
    func budget() {
        #expect(
            ChaosNotificationChecker.reconcileBudget(historyRequests: 52, ratePerSecond: 5, seconds: 10, starts: 2)
                == nil)
        #expect(
            ChaosNotificationChecker.reconcileBudget(historyRequests: 53, ratePerSecond: 5, seconds: 10, starts: 2)?
                .kind == "reconcile_budget")
    }

    @Test(
        "A reconciler's correction is for a transaction Apple knows and for its owner; otherwise reconcile_correction")
    func corrections() {
        func verdict(_ jobID: String, _ account: String) -> Verdict {
            Verdict(
                verdictID: "verdict-" + jobID, jobID: jobID, accountID: account, outcome: .granted, reason: nil,
                decidedBy: .apple, transactions: [], decidedAt: Date(timeIntervalSince1970: 1_800_000_000))
        }
        let truth: [String: ChaosTransactionTruth] = [
            "s-1": ChaosTransactionTruth(transactionID: "s-1", state: "active"),
            "s-1-r1": ChaosTransactionTruth(transactionID: "s-1-r1", originalTransactionID: "s-1", state: "active"),
            "s-2": ChaosTransactionTruth(transactionID: "s-2", state: "revoked"),
        ]
        let owners = ["s-1": "alice", "s-2": "bob"]
        let good = [
            verdict(CorrectionJob.jobID(transactionID: "s-1-r1", expiresDate: Date(), revocationDate: nil), "alice"),
            verdict("reconcile-s-2-0-1799999999000", "bob"),
        ]
        #expect(ChaosNotificationChecker.corrections(good, owners: owners, truth: truth).isEmpty)
        let bad = [
            // Another account than the subscription's owner.
            verdict("reconcile-s-1-r1-1800000000000-0", "mallory"),
            // A transaction Apple does not know.
            verdict("reconcile-s-9-1800000000000-0", "alice"),
            // A transaction Apple knows that nobody owned.
            verdict("reconcile-s-3-1800000000000-0", "alice"),
            // Not a correction job id at all.
            verdict("reconcile-s-1", "alice"),
        ]
        let found = ChaosNotificationChecker.corrections(
            bad, owners: owners,
            truth: truth.merging(["s-3": ChaosTransactionTruth(transactionID: "s-3")]) { first, _ in first })
        #expect(found.map(\.kind) == Array(repeating: "reconcile_correction", count: 4))
        #expect(found.map(\.description).allSatisfy { !$0.contains("receipt") })
        #expect(found.first?.description.contains("mallory") == true)
    }

    @Test("A correction's job id names the transaction and its state; the transaction id is read back, dashes and all")
    func correctionJobIDs() {
        let expires = Date(timeIntervalSince1970: 1_800_000_000.25)
        let id = CorrectionJob.jobID(transactionID: "sub-1-r1", expiresDate: expires, revocationDate: nil)
        #expect(id == "reconcile-sub-1-r1-1800000000250-0")
        #expect(CorrectionJob.transactionID(ofJobID: id) == "sub-1-r1")
        #expect(
            CorrectionJob.transactionID(ofJobID: "reconcile-1000460626643094-1795632890630-0") == "1000460626643094")
        for notOne in ["apple-notification-x", "reconcile-", "reconcile-1-2", "reconcile--1-2", "reconcile-t-x-0"] {
            #expect(CorrectionJob.transactionID(ofJobID: notOne) == nil, "\(notOne)")
        }
    }

    @Test("The lifecycle plan gives each chosen transaction one scenario by product type, interleaved")
    func plan() {
        let transactions: [(id: String, type: ProductType)] =
            (0..<12).map { ("s\($0)", .autoRenewable) } + (0..<3).map { ("c\($0)", .consumable) }
            + (0..<4).map { ("n\($0)", .nonConsumable) }
        // Round robin over the types: 9 of 19 leave three subscriptions out, never a consumable.
        let few = ChaosLifecyclePlan(transactions: transactions, count: 9, seed: 3)
        #expect(few.scenarios.keys.filter { $0.hasPrefix("c") }.count == 3)
        #expect(few.scenarios.keys.filter { $0.hasPrefix("s") }.count == 3)
        let plan = ChaosLifecyclePlan(transactions: transactions, count: 19, seed: 3)
        #expect(plan.scenarios.count == 19)
        let consumables = ["c0", "c1", "c2"].filter { plan.scenarios[$0] == "consumption_request" }
        #expect(plan.consumptionRequested == Set(consumables))
        #expect(plan.consumptionRequested.count == 1)
        // Every event names a chosen transaction; scenarios of two steps keep their order.
        #expect(plan.events.allSatisfy { plan.scenarios[$0.transactionID] != nil })
        for (id, name) in plan.scenarios where name == "refund_reversed" {
            #expect(plan.events.filter { $0.transactionID == id }.map(\.route) == ["sim/refund", "sim/refund/reverse"])
        }
        #expect(Set(plan.scenarios.values).count == 14)
        // A prorated refund names its share, between 25 % and 75 % in milliunits.
        for (id, name) in plan.scenarios where name == "refund_prorated" {
            let steps = plan.events.filter { $0.transactionID == id }
            #expect(steps.map(\.route) == ["sim/refund"])
            let share = steps.first.flatMap { Int($0.extra.dropFirst("\"percentage\": ".count)) } ?? 0
            #expect((25_000...75_000).contains(share))
        }
        #expect(
            plan.consumptionRequestedTypes == Dictionary(uniqueKeysWithValues: consumables.map { ($0, .consumable) }))
        // Billing retry, expiry, extension and the refund of the latest period are all in the family.
        let subscriptions = Set(plan.scenarios.filter { $0.key.hasPrefix("s") }.values)
        #expect(
            subscriptions.isSuperset(of: [
                "expire", "billing_retry", "billing_retry_grace", "extend", "refund_latest",
                "extend_renew_refund_latest",
            ]))
        // The refund of the latest period names the subscription's renewal, known only during the run.
        for (id, name) in plan.scenarios where name == "refund_latest" {
            let steps = plan.events.filter { $0.transactionID == id }
            #expect(steps.map(\.route) == ["sim/renew", "sim/refund"])
            #expect(steps.map(\.latestOfSubscription) == [false, true])
            #expect(steps[1].body(naming: "r1") == "{\"transaction_id\": \"r1\"}")
        }
        // A subscription shared with a family member, whose own transaction is revoked once the run made it.
        #expect(subscriptions.contains("family_revoke"))
    }

    @Test("family_revoke shares a purchase, then revokes the member's transaction; non-consumables and subscriptions")
    func familyRevokePlan() {
        let nonConsumables: [(id: String, type: ProductType)] = (0..<7).map { ("n\($0)", .nonConsumable) }
        let plan = ChaosLifecyclePlan(transactions: nonConsumables, count: 7, seed: 3)
        let shared = plan.scenarios.filter { $0.value == "family_revoke" }.map(\.key)
        #expect(shared.count == 1)
        for id in shared {
            let steps = plan.events.filter { $0.transactionID == id }
            #expect(steps.map(\.route) == [ChaosLifecycleEvent.familyShareRoute, "sim/revoke"])
            // The share names the purchaser's transaction, the revocation the member's (known only during the run).
            #expect(steps.map(\.familyMember) == [false, true])
            #expect(steps.map(\.key) == ["transaction_id", "transaction_id"])
            #expect(steps[1].body(naming: "m1") == "{\"transaction_id\": \"m1\"}")
        }
        // A non-renewing subscription cannot be shared (the simulator answers 400, as Apple offers no sharing).
        let nonRenewing: [(id: String, type: ProductType)] = (0..<7).map { ("p\($0)", .nonRenewing) }
        let none = ChaosLifecyclePlan(transactions: nonRenewing, count: 7, seed: 3)
        #expect(!none.scenarios.values.contains("family_revoke"))
        #expect(!none.events.contains { $0.route == ChaosLifecycleEvent.familyShareRoute || $0.familyMember })
    }

    /// A purchase shared with a family member and the member's access revoked (FAMILY_REVOKE): the purchaser's
    /// transaction `p1` stays active for alice, the member's own `m1` is revoked for the member's account.
    static let familyTruth: [String: ChaosTransactionTruth] = [
        "p1": ChaosTransactionTruth(transactionID: "p1", state: "active", expiresMs: 2_000_000),
        "m1": ChaosTransactionTruth(
            transactionID: "m1", state: "revoked", expiresMs: 2_000_000, revocationType: "FAMILY_REVOKE",
            ownershipType: "FAMILY_SHARED"),
    ]
    static let familyLedger: [String: ChaosLedgerTransaction] = [
        "p1": ChaosLedgerTransaction(accountID: "alice", state: "active", expiresMs: 2_000_000),
        "m1": ChaosLedgerTransaction(
            accountID: "member-0", state: "revoked", expiresMs: 2_000_000, revocationType: "FAMILY_REVOKE",
            ownershipType: "FAMILY_SHARED"),
    ]
    static let familyChecker = ChaosNotificationChecker(owners: ["p1": "alice", "m1": "member-0"])

    @Test("A family revocation that left the member's claim active, or reached the purchaser's, is notification_drift")
    func familyRevokeDrift() {
        #expect(Self.familyChecker.drift(truth: Self.familyTruth, ledger: Self.familyLedger).isEmpty)
        // (a) The member's claim still active after FAMILY_REVOKE.
        var ledger = Self.familyLedger
        ledger["m1"]?.state = "active"
        ledger["m1"]?.revocationType = nil
        #expect(
            Self.familyChecker.drift(truth: Self.familyTruth, ledger: ledger).map(\.description) == [
                "transaction m1: the ledger drifted from Apple: state active, truth revoked; revocation_type null, "
                    + "truth FAMILY_REVOKE"
            ])
        // (b) The member's revocation reached the purchaser's claim (and the member kept access).
        ledger = Self.familyLedger
        ledger["p1"]?.state = "revoked"
        ledger["p1"]?.revocationType = "FAMILY_REVOKE"
        #expect(
            Self.familyChecker.drift(truth: Self.familyTruth, ledger: ledger).map(\.description) == [
                "transaction p1: the ledger drifted from Apple: state revoked, truth active; revocation_type "
                    + "FAMILY_REVOKE, truth null"
            ])
        // The member's transaction claimed as the purchaser's: for the purchaser's account, not stated as shared.
        ledger = Self.familyLedger
        ledger["m1"]?.accountID = "alice"
        ledger["m1"]?.ownershipType = nil
        #expect(
            Self.familyChecker.drift(truth: Self.familyTruth, ledger: ledger).map(\.description) == [
                "transaction m1: the ledger drifted from Apple: owner alice, not member-0; in_app_ownership_type "
                    + "not stated, truth FAMILY_SHARED"
            ])
    }

    @Test("A family member's own job not granted to the member (or never decided) is notification_drift")
    func familyMemberGrant() {
        func verdict(_ account: String, _ outcome: Verdict.Outcome, _ reason: Verdict.Reason?) -> Verdict {
            Verdict(
                verdictID: "verdict-member-0", jobID: "member-0", accountID: account, outcome: outcome,
                reason: reason, decidedBy: .apple, transactions: [],
                decidedAt: Date(timeIntervalSince1970: 1_800_000_000))
        }
        #expect(
            ChaosNotificationChecker.memberGrant(
                transactionID: "m1", account: "member-0", verdict: verdict("member-0", .granted, nil)) == nil)
        #expect(
            ChaosNotificationChecker.memberGrant(
                transactionID: "m1", account: "member-0", verdict: verdict("member-0", .rejected, .replayed))?
                .description
                == "transaction m1: the ledger drifted from Apple: the family member's verification was "
                + "rejected / replayed for member-0, expected granted to member-0")
        #expect(
            ChaosNotificationChecker.memberGrant(
                transactionID: "m1", account: "member-0", verdict: verdict("alice", .granted, nil))?.kind
                == "notification_drift")
        #expect(
            ChaosNotificationChecker.memberGrant(transactionID: "m1", account: "member-0", verdict: nil)?.kind
                == "notification_drift")
    }
}
