import Foundation
import Messages
import Testing

@testable import Chaos

/// The Play lifecycle's end invariants on synthetic truths and ledgers: agreement passes, and each kind of drift, a
/// refund review answered twice, not at all, refused or late, and a reconciler over its quota share is found.
@Suite("Chaos: Play lifecycle invariants")
struct ChaosPlayLifecycleCheckerTests {
    static let truth: [String: ChaosPlayLifecycleTruth] = [
        "sub-active": ChaosPlayLifecycleTruth(state: "active", expiryMs: 2_000_000),
        "sub-grace": ChaosPlayLifecycleTruth(state: "in_grace_period", expiryMs: 3_000_000),
        "sub-hold": ChaosPlayLifecycleTruth(state: "on_hold", expiryMs: 1_000),
        "sub-revoked": ChaosPlayLifecycleTruth(state: "revoked", expiryMs: 1_500),
        "one-time": ChaosPlayLifecycleTruth(state: "purchased"),
        "refunded": ChaosPlayLifecycleTruth(state: "refunded"),
    ]

    static let ledger: [String: ChaosPlayLedgerPurchase] = [
        "sub-active": ChaosPlayLedgerPurchase(accountID: "alice", state: "active", expiresMs: 2_000_000),
        "sub-grace": ChaosPlayLedgerPurchase(accountID: "bob", state: "active", expiresMs: 3_000_000),
        // Ended at the worker's read, a little after Google's end.
        "sub-hold": ChaosPlayLedgerPurchase(accountID: "carol", state: "expired", expiresMs: 1_250),
        // A revoked period keeps its date: the revocation is its end.
        "sub-revoked": ChaosPlayLedgerPurchase(accountID: "dave", state: "revoked", expiresMs: 9_000_000),
        "one-time": ChaosPlayLedgerPurchase(accountID: "erin", state: "active", expiresMs: nil),
        "refunded": ChaosPlayLedgerPurchase(accountID: "frank", state: "revoked", expiresMs: nil),
    ]

    static let checker = ChaosPlayLifecycleChecker(
        owners: [
            "sub-active": "alice", "sub-grace": "bob", "sub-hold": "carol", "sub-revoked": "dave", "one-time": "erin",
            "refunded": "frank",
        ],
        reviewedOrders: ["GPA.1", "GPA.2"])

    static let reviews = [
        ChaosPlayRefundReview(orderID: "GPA.1", answers: [.init(secondsAfterCreation: 2.5, status: 200)]),
        ChaosPlayRefundReview(orderID: "GPA.2", answers: [.init(secondsAfterCreation: 0.4, status: 200)]),
    ]

    @Test("A ledger that agrees with Google Play's truth has no drift; every review answered once in time passes")
    func agreement() {
        #expect(Self.checker.drift(truth: Self.truth, ledger: Self.ledger).isEmpty)
        #expect(Self.checker.refundReviewAnswers(Self.reviews).isEmpty)
    }

    @Test("A ledger that differs from the truth in owner, state or expiry, or has no claim, is play_notification_drift")
    func drift() {
        var ledger = Self.ledger
        ledger["sub-active"]?.expiresMs = 1_999_999
        ledger["sub-grace"]?.state = "expired"
        ledger["sub-hold"]?.expiresMs = 999
        ledger["one-time"]?.accountID = "mallory"
        ledger["refunded"] = nil
        ledger["sub-revoked"]?.state = "expired"
        let found = Self.checker.drift(truth: Self.truth, ledger: ledger)
        #expect(found.map(\.kind) == Array(repeating: "play_notification_drift", count: 6))
        let text = found.map(\.description).joined(separator: "\n")
        #expect(text.contains("owner mallory, not erin"))
        #expect(text.contains("no ledger claim; the truth is refunded"))
        #expect(text.contains("state expired, truth revoked"))
        #expect(text.contains("expires_ms 1999999, truth 2000000"))
        #expect(text.contains("state expired, truth in_grace_period"))
        #expect(text.contains("expires_ms 999, before the truth's end 1000 (on_hold)"))
        // A purchase the simulator does not know is drift too.
        var truth = Self.truth
        truth["one-time"] = nil
        #expect(
            Self.checker.drift(truth: truth, ledger: Self.ledger).map(\.description) == [
                "Google Play purchase token one-time…: the ledger drifted from Google Play: the Play simulator has no "
                    + "truth for it"
            ])
    }

    @Test("A review answered twice, not at all, refused, late, or never opened is play_refund_review_answers")
    func reviewAnswers() {
        let checker = ChaosPlayLifecycleChecker(
            owners: [:], reviewedOrders: ["GPA.twice", "GPA.none", "GPA.refused", "GPA.late", "GPA.missing"])
        let found = checker.refundReviewAnswers([
            ChaosPlayRefundReview(
                orderID: "GPA.twice",
                answers: [.init(secondsAfterCreation: 1, status: 200), .init(secondsAfterCreation: 3, status: 400)]),
            ChaosPlayRefundReview(orderID: "GPA.none", answers: []),
            ChaosPlayRefundReview(orderID: "GPA.refused", answers: [.init(secondsAfterCreation: 1, status: 400)]),
            ChaosPlayRefundReview(orderID: "GPA.late", answers: [.init(secondsAfterCreation: 86_401, status: 200)]),
        ])
        #expect(found.map(\.kind) == Array(repeating: "play_refund_review_answers", count: 5))
        #expect(
            found.map(\.description) == [
                "Google Play refund review of GPA.late: answered 86401 s after the review opened",
                "Google Play refund review of GPA.missing: the Play simulator has no review of it",
                "Google Play refund review of GPA.none: no answer",
                "Google Play refund review of GPA.refused: the answer was refused (400)",
                "Google Play refund review of GPA.twice: 2 answers (statuses [200, 400]), expected one",
            ])
        // At exactly 24 hours Google still takes the answer.
        #expect(
            ChaosPlayLifecycleChecker(owners: [:], reviewedOrders: ["GPA.edge"]).refundReviewAnswers([
                ChaosPlayRefundReview(orderID: "GPA.edge", answers: [.init(secondsAfterCreation: 86_400, status: 200)])
            ]).isEmpty)
    }

    @Test("More Play calls than the share of each wall-clock minute each process lived in is play_reconcile_budget")
    func budget() {
        // One process from 00:30 to 02:10 (three minutes), one restarted within its last minute (one more): 4 × 150.
        let lives: [(startMs: Int64, endMs: Int64)] = [(30_000, 130_000), (131_000, 170_000)]
        #expect(ChaosPlayLifecycleChecker.reconcileBudget(spent: 600, callsPerMinute: 150, lives: lives) == nil)
        let over = ChaosPlayLifecycleChecker.reconcileBudget(spent: 601, callsPerMinute: 150, lives: lives)
        #expect(over?.kind == "play_reconcile_budget")
        #expect(over?.description.contains("601 Google Play calls from 2 processes over 4 wall-clock minutes") == true)
    }

    @Test("The Play lifecycle plan covers every product type, each purchase one scenario, events interleaved")
    func plan() {
        let purchases: [(token: String, type: ProductType)] =
            (0..<14).map { ("s\($0)", .autoRenewable) } + (0..<3).map { ("n\($0)", .nonConsumable) }
            + (0..<2).map { ("c\($0)", .consumable) }
        let plan = ChaosPlayLifecyclePlan(purchases: purchases, count: 19, seed: 8)
        #expect(plan.scenarios.count == 19)
        #expect(
            Set(plan.scenarios.filter { $0.key.hasPrefix("s") }.values) == [
                "renew", "grace_period", "hold", "pause", "cancel", "revoke", "refund", "chargeback", "upgrade",
                "grace_recover", "pause_resume", "hold_recover", "expire", "renew_twice",
            ])
        #expect(Set(plan.scenarios.filter { $0.key.hasPrefix("n") }.values) == ["refund", "chargeback", "revoke"])
        #expect(Set(plan.scenarios.filter { $0.key.hasPrefix("c") }.values) == ["chargeback", "refund"])
        // Every event of the plan: the scenarios' steps, first steps before second ones.
        #expect(plan.events.count == 19 + 4)
        let firstSecondStep = plan.events.firstIndex { $0.event == "recover" || $0.event == "resume" } ?? 0
        #expect(firstSecondStep >= 19)
        // Only a replacement's and a refund review's notifications are never dropped (and a pending purchase's
        // completion's, below).
        #expect(
            Set(plan.events.filter(\.isAnnouncedOnlyByItsNotification).map(\.event)) == ["upgrade", "chargeback"])
        // Pending purchases a verification job found pending are completed, each its own scenario.
        let withPending = ChaosPlayLifecyclePlan(purchases: purchases, count: 19, seed: 8, pending: ["p0", "p1"])
        #expect(withPending.scenarios["p0"] == "pending_completed" && withPending.scenarios.count == 21)
        #expect(withPending.events.filter { $0.event == "pending_complete" }.map(\.token).sorted() == ["p0", "p1"])
        #expect(withPending.events.first { $0.token == "p0" }?.isAnnouncedOnlyByItsNotification == true)
        #expect(
            ChaosPlayLifecycleEvent(token: "t", event: "grace_period", extra: #""grace_period_s": 5"#).body
                == #"{"purchase_token": "t", "event": "grace_period", "grace_period_s": 5}"#)
    }
}
