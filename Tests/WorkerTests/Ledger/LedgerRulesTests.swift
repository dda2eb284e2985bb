import Foundation
import Messages
import Testing

@testable import Decision
@testable import Ledger

/// The rule table of docs/LEDGER.md, case by case. Pure: no database, no clock, no I/O.
@Suite("Ledger decision rules")
struct LedgerRulesTests {
    typealias F = LedgerFixtures

    @Test("a new authentic purchase is claimed for the job's account and granted")
    func newAuthenticPurchaseIsGranted() throws {
        let t = F.purchase("t1")
        let decision = try #require(F.decision(F.decide(F.job(), F.apple([t]))))
        #expect(decision.verdict.outcome == .granted)
        #expect(decision.verdict.reason == nil)
        #expect(decision.verdict.decidedBy == .apple)
        #expect(decision.verdict.verdictID == Verdict.verdictID(for: F.job()))
        #expect(decision.verdict.transactions.map(\.transactionID) == ["t1"])
        guard case .claim(let claim) = try #require(decision.writes.first) else {
            Issue.record("expected a claim")
            return
        }
        #expect(decision.writes.count == 1)
        #expect(claim.accountID == "acct-A" && claim.grantedJobID == "job-1" && claim.productType == .nonConsumable)
        #expect(claim.verdictID == decision.verdict.verdictID)
    }

    @Test("the same job again gets exactly the first verdict, even though the claim now exists")
    func redeliveryReturnsTheRecordedVerdict() throws {
        let t = F.purchase("t1")
        let first = try #require(F.decision(F.decide(F.job(), F.apple([t]))))
        let later = F.policy(now: F.days(3))
        let again = try #require(
            F.decision(
                F.decide(
                    F.job(), F.apple([t]), claims: [F.claim(t, account: "acct-A", job: "job-1")],
                    prior: first.verdict, policy: later)))
        #expect(again.verdict == first.verdict)
        #expect(again.isRecorded)
        #expect(again.writes.isEmpty)
        // Also before Apple is called: the pre-Apple check answers from the recorded verdict.
        let pre = DecisionRules.decideFromLedger(
            job: F.job(), localEvidence: F.local([t]), snapshot: LedgerSnapshot(priorVerdict: first.verdict),
            policy: later)
        #expect(pre?.verdict == first.verdict)
    }

    @Test("a job id recorded for another content: job_id_reused under the new job's own id, nothing written")
    func jobIDReusedWithAnotherContent() throws {
        let t = F.purchase("t1")
        let first = try #require(F.decision(F.decide(F.job(), F.apple([t]))))
        var other = F.job()
        other.proof = .receipt("MIIanotherReceipt")
        let recordedAt = F.days(1)
        let input = DecisionInput(
            job: other, evidence: F.apple([F.purchase("t2")]), snapshot: LedgerSnapshot(priorVerdict: first.verdict),
            policy: F.policy(now: F.days(3)), recordedAt: recordedAt)
        let reused = try #require(F.decision(DecisionRules.decide(input)))
        #expect(reused.verdict.outcome == .rejected)
        #expect(reused.verdict.reason == .jobIDReused)
        #expect(reused.verdict.decidedBy == .ledger)
        #expect(reused.verdict.verdictID == Verdict.verdictID(for: other))
        #expect(reused.verdict.verdictID != first.verdict.verdictID)
        #expect(reused.verdict.decidedAt == recordedAt)
        #expect(reused.verdict.transactions.isEmpty)
        #expect(reused.isRecorded)
        #expect(reused.writes.isEmpty)
        // Another account with the same proof is another content too.
        var otherAccount = F.job()
        otherAccount.accountID = "acct-B"
        let forB = try #require(
            F.decision(F.decide(otherAccount, F.apple([t]), prior: first.verdict)))
        #expect(forB.verdict.reason == .jobIDReused)
        #expect(forB.verdict.accountID == "acct-B")
    }

    @Test("a verdict recorded before content digests (the job id's legacy verdict id) is the same job's")
    func legacyRecordedVerdict() throws {
        let t = F.purchase("t1")
        var legacy = try #require(F.decision(F.decide(F.job(), F.apple([t])))).verdict
        legacy.verdictID = Verdict.legacyVerdictID(jobID: legacy.jobID)
        let again = try #require(F.decision(F.decide(F.job(), F.apple([t]), prior: legacy)))
        #expect(again.verdict == legacy)
        #expect(again.isRecorded)
    }

    @Test("the same transaction for the same account in a new job is already_granted by the ledger, before Apple")
    func sameAccountNewJobIsAlreadyGranted() throws {
        let t = F.purchase("t1")
        let decision = try #require(
            DecisionRules.decideFromLedger(
                job: F.job("job-2"), localEvidence: F.local([t]),
                snapshot: LedgerSnapshot(claims: [F.claim(t, account: "acct-A")]), policy: F.policy()))
        #expect(decision.verdict.outcome == .alreadyGranted)
        #expect(decision.verdict.reason == .alreadyOwned)
        #expect(decision.verdict.decidedBy == .ledger)
        #expect(decision.writes.isEmpty)
    }

    @Test("the same transaction for another account is rejected as replayed, before Apple")
    func otherAccountIsReplayed() throws {
        let t = F.purchase("t1")
        let decision = try #require(
            DecisionRules.decideFromLedger(
                job: F.job("job-2", account: "acct-B"), localEvidence: F.local([t]),
                snapshot: LedgerSnapshot(claims: [F.claim(t, account: "acct-A")]), policy: F.policy()))
        #expect(decision.verdict.outcome == .rejected)
        #expect(decision.verdict.reason == .replayed)
        #expect(decision.verdict.decidedBy == .ledger)
        #expect(decision.writes.isEmpty)
    }

    @Test("a new transaction with unverified evidence needs Apple; with Apple unavailable it is unverifiable")
    func unverifiedNewTransactionNeedsApple() throws {
        let t = F.purchase("t1")
        #expect(F.decide(F.job(), F.local([t])) == .needsApple)
        var unavailable = F.local([t])
        unavailable.appleUnavailable = true
        let decision = try #require(F.decision(F.decide(F.job(), unavailable)))
        #expect(decision.verdict.outcome == .unverifiable)
        #expect(decision.verdict.reason == .appleUnavailable)
        #expect(decision.writes.isEmpty)
        // Apple unavailable does not stop what the ledger alone decides.
        let replay = try #require(
            F.decision(F.decide(F.job(account: "acct-B"), unavailable, claims: [F.claim(t, account: "acct-A")])))
        #expect(replay.verdict.reason == .replayed)
    }

    @Test(
        "precise rejections",
        arguments: [
            ("evidence says malformed", PurchaseEvidence.Source.prefilter, Verdict.Reason.malformed),
            ("evidence says other app", .prefilter, .wrongBundle),
            ("apple 21003", .apple, .notAuthenticated),
            ("apple rejected", .apple, .appleRejected),
        ])
    func rejectionsFromEvidence(name: String, source: PurchaseEvidence.Source, reason: Verdict.Reason) throws {
        var evidence = F.apple([F.purchase("t1")])
        evidence.source = source
        evidence.rejection = reason
        let decision = try #require(F.decision(F.decide(F.job(), evidence)), "\(name)")
        #expect(decision.verdict.outcome == .rejected)
        #expect(decision.verdict.reason == reason)
        #expect(decision.verdict.decidedBy == evidence.decidedBy)
        #expect(decision.writes.isEmpty)
    }

    @Test("catalog, bundle, authenticity and environment rejections")
    func catalogAndEnvironmentRejections() throws {
        func reason(
            _ evidence: PurchaseEvidence, job: ReceiptJob = F.job(), policy: DecisionPolicy = F.policy()
        )
            -> Verdict.Reason?
        {
            F.decision(F.decide(job, evidence, policy: policy))?.verdict.reason
        }
        var otherApp = F.apple([F.purchase("t1")])
        otherApp.bundleID = "com.other.app"
        #expect(reason(otherApp) == .wrongBundle)
        #expect(reason(otherApp, policy: F.policy(catalog: nil)) == .wrongBundle)  // job.bundleID differs
        #expect(reason(F.apple([F.purchase("t1", product: "com.example.unknown")])) == .unknownProduct)
        var forged = F.local([F.purchase("t1")])
        forged.source = .signature
        forged.authenticity = .notAuthenticated
        #expect(reason(forged) == .notAuthenticated)
        let sandbox = F.apple([F.purchase("t1")], environment: .sandbox)
        #expect(reason(sandbox) == .environmentNotAllowed)
        #expect(reason(F.apple([F.purchase("t1")], environment: .xcode)) == .environmentNotAllowed)
        // App Review buys in sandbox: allowed when configured.
        let allowed = try #require(F.decision(F.decide(F.job(), sandbox, policy: F.policy(allowSandbox: true))))
        #expect(allowed.verdict.outcome == .granted)
        #expect(allowed.verdict.environment == "Sandbox")
        // An authentic proof without the product the job asked for: a reason of its own.
        #expect(
            reason(F.apple([F.purchase("t1")]), job: F.job(expectedProduct: "com.example.gems")) == .productMismatch)
        #expect(reason(F.apple([])) == .noTransaction)
    }

    @Test("the expected product is checked before ownership: an owned proof without it is never already_granted")
    func expectedProductBeforeOwnership() throws {
        let t = F.purchase("t1")
        let owned = [F.claim(t, account: "acct-A", job: "job-0")]
        let job = F.job(expectedProduct: "com.example.monthly")
        // Read locally (not authenticated) without an expected subscription: the ledger must not answer
        // already_owned, and Apple decides (its answer may add the subscription's later transactions).
        #expect(F.decide(job, F.local([t]), claims: owned) == .needsApple)
        #expect(
            DecisionRules.decideFromLedger(
                job: job, localEvidence: F.local([t]), snapshot: LedgerSnapshot(claims: owned), policy: F.policy())
                == nil)
        // Read locally without an expected product of another type: Apple's answer would hold the receipt's own
        // purchases, so the proof decides, without a call: product_mismatch by the prefilter.
        for other in ["com.example.gems", "com.example.season", "com.example.unsold"] {
            let local = try #require(F.decision(F.decide(F.job(expectedProduct: other), F.local([t]), claims: owned)))
            #expect(local.verdict.reason == .productMismatch, "\(other)")
            #expect(local.verdict.decidedBy == .prefilter, "\(other)")
        }
        // Apple's (or a verified signature's) evidence without the product: product_mismatch, owned or not.
        let apple = try #require(F.decision(F.decide(job, F.apple([t]), claims: owned)))
        #expect(apple.verdict.reason == .productMismatch)
        // Apple unavailable: unverifiable, never already_granted.
        var unavailable = F.local([t])
        unavailable.appleUnavailable = true
        let undecided = try #require(F.decision(F.decide(job, unavailable, claims: owned)))
        #expect(undecided.verdict.outcome == .unverifiable)
        // With the expected product in the proof, ownership answers as before.
        let same = try #require(
            F.decision(F.decide(F.job(expectedProduct: t.productID), F.local([t]), claims: owned)))
        #expect(same.verdict.outcome == .alreadyGranted)
    }

    @Test("subscriptions: current period granted, expired rejected, grace period honoured, billing retry ends access")
    func subscriptionPeriods() throws {
        let current = F.renewal("s2", purchased: F.days(-5), expires: F.days(25))
        let old = F.renewal("s1", original: "sub-1", purchased: F.days(-35), expires: F.days(-5))
        let granted = try #require(F.decision(F.decide(F.job(), F.apple([current, old]))))
        #expect(granted.verdict.outcome == .granted)
        #expect(granted.verdict.transactions.map(\.transactionID) == ["s1", "s2"])  // purchase order
        #expect(granted.writes.count == 2)

        let expired = try #require(F.decision(F.decide(F.job(), F.apple([old]))))
        #expect(expired.verdict.outcome == .rejected && expired.verdict.reason == .expired)
        #expect(expired.writes.count == 1)  // claimed all the same: the history belongs to this account now

        let inGrace = F.renewal("s1", purchased: F.days(-35), expires: F.days(-1), grace: F.days(5), billingRetry: true)
        let grace = try #require(F.decision(F.decide(F.job(), F.apple([inGrace]))))
        #expect(grace.verdict.outcome == .granted)
        #expect(grace.verdict.transactions.first?.expiresDate == F.days(5))

        let retrying = F.renewal("s1", purchased: F.days(-35), expires: F.days(-1), billingRetry: true)
        let retry = try #require(F.decision(F.decide(F.job(), F.apple([retrying]))))
        #expect(retry.verdict.reason == .expired)

        // The ledger answers for its own account's current subscription, without Apple.
        let owned = try #require(
            DecisionRules.decideFromLedger(
                job: F.job("job-2"), localEvidence: F.local([current]),
                snapshot: LedgerSnapshot(claims: [F.claim(current, account: "acct-A")]), policy: F.policy()))
        #expect(owned.verdict.outcome == .alreadyGranted)
        // …but not for one the ledger believes over: a renewal may exist, so Apple is asked.
        #expect(
            DecisionRules.decideFromLedger(
                job: F.job("job-2"), localEvidence: F.local([old]),
                snapshot: LedgerSnapshot(claims: [F.claim(old, account: "acct-A")]), policy: F.policy()) == nil)
    }

    @Test("a renewal of this account's subscription is claimed and extends the stored expiry")
    func renewalOfOwnSubscription() throws {
        let old = F.renewal("s1", purchased: F.days(-35), expires: F.days(-5))
        let new = F.renewal("s2", purchased: F.days(-5), expires: F.days(25))
        let decision = try #require(
            F.decision(F.decide(F.job("job-2"), F.apple([old, new]), claims: [F.claim(old, account: "acct-A")])))
        #expect(decision.verdict.outcome == .granted)
        #expect(decision.writes.count == 1)
        guard case .claim(let claim) = decision.writes.first else {
            Issue.record("expected a claim")
            return
        }
        #expect(claim.transactionID == "s2" && claim.originalTransactionID == "sub-1" && claim.accountID == "acct-A")
    }

    @Test("double account: an expired subscription moves to a new account when Apple confirms a current period")
    func expiredSubscriptionMovesWithAppleConfirmation() throws {
        let old = F.renewal("s1", purchased: F.days(-60), expires: F.days(-30))
        let renewed = F.renewal("s9", purchased: F.days(-1), expires: F.days(29))
        let claims = [F.claim(old, account: "acct-A")]
        let job = F.job("job-B", account: "acct-B")
        // Before Apple: the ledger cannot decide (the first account's period is over).
        #expect(
            DecisionRules.decideFromLedger(
                job: job, localEvidence: F.local([old, renewed]), snapshot: LedgerSnapshot(claims: claims),
                policy: F.policy()) == nil)
        // A verified signature is not enough: Apple must confirm.
        var signed = F.apple([old, renewed])
        signed.source = .signature
        #expect(F.decide(job, signed, claims: claims) == .needsApple)
        let decision = try #require(F.decision(F.decide(job, F.apple([old, renewed]), claims: claims)))
        #expect(decision.verdict.outcome == .granted)
        #expect(decision.verdict.accountID == "acct-B")
        #expect(
            decision.writes.first
                == .moveSubscription(
                    originalTransactionID: "sub-1", from: "acct-A", to: "acct-B", transactionIDs: ["s1"]))
        #expect(decision.writes.count == 2)
    }

    @Test("double account: a subscription still current for its owner is a replay, decided before Apple")
    func currentSubscriptionOfAnotherAccountIsReplayed() throws {
        let current = F.renewal("s1", purchased: F.days(-5), expires: F.days(25))
        let renewal = F.renewal("s2", purchased: F.days(-1), expires: F.days(29))
        let job = F.job("job-B", account: "acct-B")
        let claims = [F.claim(current, account: "acct-A")]
        let pre = try #require(
            DecisionRules.decideFromLedger(
                job: job, localEvidence: F.local([current, renewal]), snapshot: LedgerSnapshot(claims: claims),
                policy: F.policy()))
        #expect(pre.verdict.reason == .replayed)
        #expect(pre.writes.isEmpty)
        let withApple = try #require(F.decision(F.decide(job, F.apple([current, renewal]), claims: claims)))
        #expect(withApple.verdict.reason == .replayed)
        #expect(withApple.writes.isEmpty)
    }

    @Test("refunds and revocations turn a grant into rejected/revoked and record the revocation")
    func revocationOfAGrant() throws {
        let t = F.purchase("t1")
        var refunded = t
        refunded.revokedAt = F.days(-1)
        let decision = try #require(
            F.decision(F.decide(F.job("job-2"), F.apple([refunded]), claims: [F.claim(t, account: "acct-A")])))
        #expect(decision.verdict.outcome == .rejected && decision.verdict.reason == .revoked)
        #expect(decision.verdict.transactions.first?.revokedAt == F.days(-1))
        #expect(decision.writes == [.revoke(transactionID: "t1", revokedAt: F.days(-1))])
        // Afterwards the ledger alone answers "revoked" for this account.
        let stored = F.claim(refunded, account: "acct-A")
        let later = try #require(
            DecisionRules.decideFromLedger(
                job: F.job("job-3"), localEvidence: F.local([t]), snapshot: LedgerSnapshot(claims: [stored]),
                policy: F.policy()))
        #expect(later.verdict.reason == .revoked)
        // A refunded purchase never seen before is not claimed.
        let fresh = try #require(F.decision(F.decide(F.job(), F.apple([refunded]))))
        #expect(fresh.verdict.reason == .revoked && fresh.writes.isEmpty)
    }

    @Test("several transactions: all considered in purchase order, each new one claimed, granted if one is new")
    func severalTransactionsInOneReceipt() throws {
        let a = F.purchase("t-a", product: "com.example.gems", purchased: F.days(-3))
        let b = F.purchase("t-b", product: "com.example.gems", purchased: F.days(-2))
        let c = F.purchase("t-c", product: "com.example.pro", purchased: F.days(-1))
        let mine = F.claim(a, account: "acct-A", type: .consumable)
        let decision = try #require(F.decision(F.decide(F.job(), F.apple([c, a, b]), claims: [mine])))
        #expect(decision.verdict.outcome == .granted)
        #expect(decision.verdict.transactions.map(\.transactionID) == ["t-a", "t-b", "t-c"])
        let claimed = decision.writes.compactMap { write -> String? in
            if case .claim(let c) = write { return c.transactionID }
            return nil
        }
        #expect(claimed == ["t-b", "t-c"])
        // Another account's transaction next to a new one: the new one is granted, the other is left alone.
        let theirs = F.claim(a, account: "acct-B", type: .consumable)
        let mixed = try #require(F.decision(F.decide(F.job(), F.apple([a, b]), claims: [theirs])))
        #expect(mixed.verdict.outcome == .granted)
        #expect(mixed.writes.count == 1)
        // Everything owned already: already_granted; everything someone else's: replayed.
        let all = [F.claim(a, account: "acct-A", type: .consumable), F.claim(b, account: "acct-A", type: .consumable)]
        #expect(F.decision(F.decide(F.job("j2"), F.apple([a, b]), claims: all))?.verdict.outcome == .alreadyGranted)
        // The same transaction listed twice (in_app and latest_receipt_info) counts once.
        let twice = try #require(F.decision(F.decide(F.job(), F.apple([b, b]))))
        #expect(twice.verdict.transactions.count == 1 && twice.writes.count == 1)
    }

    @Test("notifications update the ledger and speak to the account that owns the original transaction")
    func notifications() throws {
        let first = F.renewal("s1", purchased: F.days(-35), expires: F.days(-5))
        let owned = [F.claim(first, account: "acct-A")]
        func notification(_ kind: SubscriptionNotification.Kind, _ transaction: PurchaseTransaction) -> PurchaseEvidence
        {
            var evidence = F.apple([transaction])
            evidence.source = .signature
            evidence.appleStatus = nil
            evidence.notification = SubscriptionNotification(kind: kind)
            return evidence
        }
        let renewal = F.renewal("s2", purchased: F.days(-5), expires: F.days(25))
        let renewed = try #require(
            F.decision(F.decide(F.notificationJob(), notification(.renewed, renewal), claims: owned)))
        #expect(renewed.verdict.accountID == "acct-A")
        #expect(renewed.verdict.outcome == .granted)
        #expect(renewed.verdict.decidedBy == .signature)
        guard case .claim(let claim) = renewed.writes.first else {
            Issue.record("expected a claim")
            return
        }
        #expect(claim.accountID == "acct-A" && claim.transactionID == "s2")

        var refund = first
        refund.revokedAt = F.days(-1)
        let refunded = try #require(
            F.decision(F.decide(F.notificationJob("n2"), notification(.refunded, refund), claims: owned)))
        #expect(refunded.verdict.accountID == "acct-A" && refunded.verdict.reason == .revoked)
        #expect(refunded.writes == [.revoke(transactionID: "s1", revokedAt: F.days(-1))])

        var failing = first
        failing.gracePeriodExpiresDate = F.days(3)
        failing.isInBillingRetry = true
        let grace = try #require(
            F.decision(F.decide(F.notificationJob("n3"), notification(.renewalFailed, failing), claims: owned)))
        #expect(grace.verdict.outcome == .alreadyGranted)
        #expect(grace.verdict.transactions.first?.expiresDate == F.days(3))
        #expect(
            grace.writes == [
                .extendSubscription(transactionID: "s1", expiresDate: nil, gracePeriodExpiresDate: F.days(3))
            ])

        let expired = try #require(
            F.decision(F.decide(F.notificationJob("n4"), notification(.expired, first), claims: owned)))
        #expect(expired.verdict.accountID == "acct-A" && expired.verdict.reason == .expired)

        let unowned = try #require(F.decision(F.decide(F.notificationJob("n5"), notification(.renewed, renewal))))
        #expect(unowned.verdict.reason == .unclaimed)
        #expect(unowned.writes.isEmpty)
    }

    @Test("a lost race is decided again from the fresh snapshot with the same evidence")
    func reDecideAfterLostRace() throws {
        let t = F.purchase("t1")
        let evidence = F.apple([t])
        let stale = try #require(F.decision(F.decide(F.job(), evidence)))
        #expect(stale.verdict.outcome == .granted)
        // The claim failed: another account got there first. Same evidence, fresh snapshot.
        let fresh = try #require(F.decision(F.decide(F.job(), evidence, claims: [F.claim(t, account: "acct-Z")])))
        #expect(fresh.verdict.reason == .replayed)
        #expect(fresh.writes.isEmpty)
        #expect(fresh.verdict.verdictID == stale.verdict.verdictID)
    }

    @Test("decisions are deterministic and decided_at has the JSON's millisecond precision")
    func determinism() throws {
        let input = (F.job(), F.apple([F.purchase("t1")]))
        let one = F.decide(input.0, input.1)
        let two = F.decide(input.0, input.1)
        #expect(one == two)
        let verdict = try #require(F.decision(one)).verdict
        #expect(abs(verdict.decidedAt.timeIntervalSince(F.now)) < 0.001)
        // What is published and what a redelivery reads back are both decoded from the stored JSON (see the
        // backend suite). Note: Messages' RFC 3339 round trip can lose a millisecond (x.122 -> x.121), so the
        // in-memory decision is never published as is.
        let codec = MessageCodec()
        let roundTrip = try codec.decodeVerdict(codec.encode(verdict))
        #expect(abs(roundTrip.decidedAt.timeIntervalSince(verdict.decidedAt)) < 0.002)
    }
}
