import Entitlements
import Foundation
import Messages
import Testing

@testable import Chaos

/// The invariant checker on synthetic runs: a clean one passes, and each kind of broken promise is found.
@Suite("Chaos: invariant checker")
struct ChaosInvariantCheckerTests {
    static let decidedAt = Date(timeIntervalSince1970: 1_800_000_000)

    static let jobs = [
        ChaosSubmittedJob(jobID: "j1", accountID: "alice", grantableTransactionID: "1001", category: "genuine"),
        ChaosSubmittedJob(jobID: "j2", accountID: "bob", grantableTransactionID: "1001", category: "repeat"),
        ChaosSubmittedJob(jobID: "j3", accountID: "carol", category: "other_app"),
        ChaosSubmittedJob(jobID: "j4", accountID: "dave", mustBeRejected: true, category: "fuzz_job"),
    ]

    static func verdict(
        _ jobID: String, _ account: String, _ outcome: Verdict.Outcome, _ reason: Verdict.Reason? = nil,
        transactions: [String] = [], at date: Date = decidedAt
    ) -> Verdict {
        Verdict(
            verdictID: "verdict-" + jobID, jobID: jobID, accountID: account, outcome: outcome, reason: reason,
            decidedBy: .signature,
            transactions: transactions.map { Verdict.Transaction(transactionID: $0, productID: "p") }, decidedAt: date)
    }

    static let clean: [Verdict] = [
        verdict("j1", "alice", .granted, transactions: ["1001"]),
        verdict("j2", "bob", .rejected, .replayed),
        verdict("j3", "carol", .rejected, .wrongBundle),
        verdict("j4", "dave", .rejected, .malformed),
        // A redelivery: identical.
        verdict("j1", "alice", .granted, transactions: ["1001"]),
    ]

    static let cleanLedger = ChaosLedgerView(
        recordedVerdicts: Dictionary(uniqueKeysWithValues: clean.prefix(4).map { ($0.jobID, $0) }),
        claims: ["1001": ChaosClaim(transactionID: "1001", accountID: "alice", grantedJobID: "j1")])

    static let checker = ChaosInvariantChecker(jobs: jobs, malformedKeys: ["m1"])

    func kinds(
        _ verdicts: [Verdict], deadLetters: [(key: String, reason: String)] = [("m1", "not_json")],
        ledger: ChaosLedgerView? = cleanLedger
    ) -> [String] {
        Self.checker.check(verdicts: verdicts, deadLetters: deadLetters, ledger: ledger).violations.map(\.kind)
    }

    @Test("A clean run has no violation and counts duplicates")
    func clean() {
        let (violations, tally) = Self.checker.check(
            verdicts: Self.clean, deadLetters: [("m1", "not_json"), ("m1", "not_json")], ledger: Self.cleanLedger)
        #expect(violations.isEmpty)
        #expect(tally.jobsDecided == 4)
        #expect(tally.duplicatesDelivered == 1)
        #expect(tally.grantedTransactions == 1)
        #expect(tally.outcomes == ["granted": 1, "rejected": 3])
    }

    @Test("A job without a verdict")
    func missing() {
        #expect(kinds(Self.clean.filter { $0.jobID != "j3" }) == ["missing_verdict"])
    }

    @Test("A job id reused with another content: each content its own verdict id; one id naming two verdicts is caught")
    func reusedJobID() {
        let grant = ChaosSubmittedJob(
            jobID: "r1", accountID: "alice", grantableTransactionID: "2001", category: "job_id_reused",
            contentDigest: "genuine")
        let junk = ChaosSubmittedJob(
            jobID: "r1", accountID: "mallory", mustBeRejected: true, category: "job_id_reused", contentDigest: "junk")
        let checker = ChaosInvariantChecker(jobs: [grant, junk], malformedKeys: [])
        func verdict(_ job: ChaosSubmittedJob, _ outcome: Verdict.Outcome, id: ChaosSubmittedJob? = nil) -> Verdict {
            Verdict(
                verdictID: Verdict.verdictID(jobID: "r1", contentDigest: (id ?? job).contentDigest ?? ""),
                jobID: "r1", accountID: job.accountID, outcome: outcome, reason: outcome == .granted ? nil : .malformed,
                decidedBy: .prefilter,
                transactions: outcome == .granted ? [Verdict.Transaction(transactionID: "2001", productID: "p")] : [],
                decidedAt: Self.decidedAt)
        }
        func kinds(_ verdicts: [Verdict]) -> [String] {
            checker.check(verdicts: verdicts, deadLetters: [], ledger: nil).violations.map(\.kind)
        }
        #expect(kinds([verdict(junk, .rejected), verdict(grant, .granted)]).isEmpty)
        #expect(kinds([verdict(grant, .granted), verdict(junk, .rejected)]).isEmpty)
        // The junk's rejection published under the grant's id: a consumer de-duplicating on it drops the grant.
        let hidden = kinds([verdict(junk, .rejected, id: grant), verdict(grant, .granted)])
        #expect(hidden.contains("inconsistent_verdicts"))
        #expect(hidden.contains("missing_verdict"))
    }

    @Test("A verdict for a job never submitted")
    func unknown() {
        #expect(kinds(Self.clean + [Self.verdict("zz", "eve", .rejected, .malformed)]) == ["unknown_verdict"])
    }

    @Test("A redelivered job with a different decision")
    func inconsistent() {
        let other = Self.verdict("j3", "carol", .rejected, .malformed)
        #expect(kinds(Self.clean + [other]) == ["inconsistent_verdicts"])
        let violation = Self.checker.check(
            verdicts: Self.clean + [other], deadLetters: [("m1", "x")], ledger: nil
        ).violations.first
        #expect(violation?.description.contains("(reason)") == true)
    }

    @Test("A redelivery decided again with the same decision is counted, not a violation")
    func redecided() {
        let again = Self.verdict("j3", "carol", .rejected, .wrongBundle, at: Self.decidedAt.addingTimeInterval(1))
        let (violations, tally) = Self.checker.check(
            verdicts: Self.clean + [again], deadLetters: [("m1", "x")], ledger: nil)
        #expect(violations.isEmpty)
        #expect(tally.redecided == 1)
        #expect(tally.duplicatesDelivered == 2)
    }

    @Test("A verdict for another account")
    func wrongAccount() {
        var verdicts = Self.clean
        verdicts[2] = Self.verdict("j3", "mallory", .rejected, .wrongBundle)
        #expect(kinds(verdicts, ledger: nil) == ["wrong_account"])
    }

    @Test("One transaction granted to two accounts")
    func twoAccounts() {
        var verdicts = Self.clean
        verdicts[1] = Self.verdict("j2", "bob", .granted, transactions: ["1001"])
        #expect(kinds(verdicts, ledger: nil) == ["granted_to_several_accounts"])
    }

    @Test("One transaction granted twice to the same account")
    func grantedTwice() {
        let jobs =
            Self.jobs + [
                ChaosSubmittedJob(jobID: "j5", accountID: "alice", grantableTransactionID: "1001", category: "repeat")
            ]
        let verdicts = Self.clean + [Self.verdict("j5", "alice", .granted, transactions: ["1001"])]
        let found = ChaosInvariantChecker(jobs: jobs, malformedKeys: ["m1"])
            .check(verdicts: verdicts, deadLetters: [("m1", "x")], ledger: nil).violations.map(\.kind)
        #expect(found == ["granted_twice"])
    }

    @Test("A grant for a proof that is not an authentic purchase")
    func inauthentic() {
        var verdicts = Self.clean
        verdicts[2] = Self.verdict("j3", "carol", .granted, transactions: ["2002"])
        #expect(kinds(verdicts, ledger: nil) == ["inauthentic_granted"])
    }

    @Test("An authentic purchase nobody was granted")
    func notGranted() {
        var verdicts = Self.clean.filter { $0.jobID != "j1" }
        verdicts.append(Self.verdict("j1", "alice", .unverifiable, .appleUnavailable))
        let violations = Self.checker.check(verdicts: verdicts, deadLetters: [("m1", "x")], ledger: nil).violations
        #expect(violations.map(\.kind) == ["authentic_not_granted"])
        #expect(violations.first?.description.contains("unverifiable/apple_unavailable") == true)
    }

    @Test("Adversarial input that is not rejected")
    func notRejected() {
        var verdicts = Self.clean
        verdicts[3] = Self.verdict("j4", "dave", .unverifiable, .appleUnavailable)
        #expect(kinds(verdicts, ledger: nil) == ["not_rejected"])
    }

    @Test("The ledger disagrees: no record of a grant, another verdict, a missing or foreign claim")
    func ledger() {
        var noRecord = Self.cleanLedger
        noRecord.recordedVerdicts["j1"] = nil
        #expect(kinds(Self.clean, ledger: noRecord) == ["ledger_missing_verdict"])

        var otherVerdict = Self.cleanLedger
        otherVerdict.recordedVerdicts["j3"] = Self.verdict("j3", "carol", .rejected, .malformed)
        #expect(kinds(Self.clean, ledger: otherVerdict) == ["ledger_verdict_differs"])

        var noClaim = Self.cleanLedger
        noClaim.claims = [:]
        #expect(kinds(Self.clean, ledger: noClaim) == ["ledger_claim_missing"])

        var foreignClaim = Self.cleanLedger
        foreignClaim.claims["1001"] = ChaosClaim(transactionID: "1001", accountID: "bob", grantedJobID: "j2")
        #expect(kinds(Self.clean, ledger: foreignClaim) == ["ledger_claim_differs"])
    }

    @Test("Rejections the ledger never recorded are not violations")
    func unrecordedRejections() {
        var ledger = Self.cleanLedger
        ledger.recordedVerdicts = ["j1": Self.clean[0]]
        #expect(kinds(Self.clean, ledger: ledger).isEmpty)
    }

    @Test("Commit lag returns to zero: a partition committed short of its end once everything settled is a violation")
    func uncommittedPartitions() {
        let ends: [Int32: Int64] = [0: 10, 1: 0, 2: 7]
        #expect(ChaosInvariantChecker.uncommittedPartitions(committed: [0: 10, 1: nil, 2: 7], ends: ends).isEmpty)
        let stalled = ChaosInvariantChecker.uncommittedPartitions(committed: [0: 10, 2: 6], ends: ends)
        #expect(stalled == [.partitionNotCommitted(partition: 2, committed: 6, end: 7)])
        #expect(stalled.first?.kind == "partition_not_committed")
        #expect(
            ChaosInvariantChecker.uncommittedPartitions(committed: [:], ends: [3: 1])
                .map(\.description) == ["receipt-jobs[3] committed up to nothing, not to its end 1"])
    }

    @Test("Dead letters: only the malformed messages, each of them")
    func deadLetters() {
        #expect(kinds(Self.clean, deadLetters: [("m1", "x"), ("alice", "poison")]) == ["unexpected_dead_letter"])
        #expect(kinds(Self.clean, deadLetters: []) == ["missing_dead_letter"])
    }
}

@Suite("Chaos: entitlement truth")
struct ChaosEntitlementTruthTests {
    @Test("the truth is the grantable transactions' products, owned where the ledger says; any other answer differs")
    func truth() {
        let catalog = Catalog(products: [
            .init(id: "premium", type: .nonConsumable), .init(id: "coins", type: .consumable),
        ])
        let jobs = [
            ChaosSubmittedJob(jobID: "j1", accountID: "a1", grantableTransactionID: "t1", category: "genuine"),
            ChaosSubmittedJob(jobID: "j2", accountID: "a2", grantableTransactionID: "t1", category: "replay"),
            ChaosSubmittedJob(jobID: "j3", accountID: "a1", grantableTransactionID: "c1", category: "genuine"),
            ChaosSubmittedJob(jobID: "j4", accountID: "a3", category: "other_app"),
        ]
        let verdicts = [
            Verdict(
                verdictID: Verdict.legacyVerdictID(jobID: "j1"), jobID: "j1", accountID: "a1", outcome: .granted,
                decidedBy: .apple,
                transactions: [.init(transactionID: "t1", productID: "premium")], decidedAt: Date()),
            Verdict(
                verdictID: Verdict.legacyVerdictID(jobID: "j3"), jobID: "j3", accountID: "a1", outcome: .granted,
                decidedBy: .apple,
                transactions: [.init(transactionID: "c1", productID: "coins", quantity: 2)], decidedAt: Date()),
        ]
        let claims = [
            "t1": ChaosClaim(transactionID: "t1", accountID: "a1", grantedJobID: "j1"),
            "c1": ChaosClaim(transactionID: "c1", accountID: "a1", grantedJobID: "j3"),
        ]
        let truth = ChaosEntitlementTruth(jobs: jobs, claims: claims, verdicts: verdicts, catalog: catalog)
        #expect(truth.differences(account: "a1", active: ["premium"], consumables: ["coins": 2]) == nil)
        #expect(truth.differences(account: "a2", active: [], consumables: [:]) == nil)
        #expect(truth.differences(account: "a3", active: [], consumables: [:]) == nil)
        #expect(truth.differences(account: "a2", active: ["premium"], consumables: [:]) != nil)
        #expect(truth.differences(account: "a1", active: [], consumables: ["coins": 2]) != nil)
        #expect(truth.differences(account: "a1", active: ["premium"], consumables: ["coins": 1]) != nil)
    }

    @Test(
        "a Google Play grant is looked up in the Play products: a Play-only consumable is counted, a Play product's entitlements are its own"
    )
    func playProducts() {
        let catalog = Catalog(
            products: [.init(id: "gems", type: .nonConsumable)],
            playProducts: [
                .init(id: "gems", type: .consumable),
                .init(id: "pro", type: .autoRenewable, basePlans: ["monthly"], entitlements: ["premium"]),
            ])
        let jobs = [
            ChaosSubmittedJob(jobID: "j1", accountID: "a1", grantableTransactionID: "GPA.1", category: "play"),
            ChaosSubmittedJob(jobID: "j2", accountID: "a1", grantableTransactionID: "GPA.2", category: "play"),
        ]
        let verdicts = [("j1", "GPA.1", "gems"), ("j2", "GPA.2", "pro")].map { job, order, product in
            Verdict(
                verdictID: Verdict.legacyVerdictID(jobID: job), jobID: job, accountID: "a1", outcome: .granted,
                decidedBy: .googlePlay, store: .googlePlay,
                transactions: [.init(transactionID: order, productID: product, quantity: 3)], decidedAt: Date())
        }
        let claims = [
            "GPA.1": ChaosClaim(transactionID: "GPA.1", accountID: "a1", grantedJobID: "j1"),
            "GPA.2": ChaosClaim(transactionID: "GPA.2", accountID: "a1", grantedJobID: "j2"),
        ]
        let truth = ChaosEntitlementTruth(jobs: jobs, claims: claims, verdicts: verdicts, catalog: catalog)
        #expect(truth.differences(account: "a1", active: ["premium"], consumables: ["gems": 3]) == nil)
    }
}
