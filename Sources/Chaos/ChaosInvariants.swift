import Foundation
import Messages

/// One job a chaos run submitted, with what it is known to be.
public struct ChaosSubmittedJob: Sendable, Hashable {
    public var jobID: String
    public var accountID: String
    /// The transaction this job proves authentically and that the deployment must grant, to exactly one account
    /// (several jobs may carry it: repeats, replays, concurrent submissions). Nil for every proof that must never
    /// be granted (other apps, crackers, forgeries, sandbox in production, expired, refunded, adversarial input).
    public var grantableTransactionID: String?
    /// The verdict must be `rejected` (adversarial input: never granted, never left undecided).
    public var mustBeRejected = false
    /// For the summary: the traffic category or adversarial case.
    public var category: String
    /// The job's ``ReceiptJob/contentDigest``, when known: every verdict of the job must carry the id derived from
    /// it.
    public var contentDigest: String?

    /// The key of the submission: the verdict id it must get, or its job id when its digest is not known.
    var key: String {
        contentDigest.map { Verdict.verdictID(jobID: jobID, contentDigest: $0) } ?? Self.jobKey(jobID)
    }

    static func jobKey(_ jobID: String) -> String { "job:" + jobID }
}

/// A claim as the ledger holds it, reduced to what the invariants compare.
public struct ChaosClaim: Sendable, Hashable {
    public var transactionID: String
    public var accountID: String
    public var grantedJobID: String
}

/// What the ledger says at the end of a run, read through the `Ledger` API.
public struct ChaosLedgerView: Sendable, Hashable {
    /// The verdict the ledger recorded per job id (jobs it never recorded are absent).
    public var recordedVerdicts: [String: Verdict] = [:]
    /// The claims on the transactions the run cares about, by transaction id.
    public var claims: [String: ChaosClaim] = [:]
}

/// A broken promise, found by ``ChaosInvariantChecker``. The description names ids only, never a receipt.
public enum ChaosViolation: Sendable, Hashable, CustomStringConvertible {
    /// A submitted job has no verdict.
    case missingVerdict(jobID: String)
    /// A verdict for a job id the run never submitted.
    case unknownVerdict(jobID: String)
    /// A job got verdicts whose decisions differ (a redelivery must repeat the first decision); `fields` names what
    /// differs.
    case inconsistentVerdicts(jobID: String, distinct: Int, fields: [String])
    /// A verdict names another account than its job.
    case wrongAccount(jobID: String)
    /// One transaction granted to more than one account.
    case grantedToSeveralAccounts(transactionID: String, accounts: [String])
    /// One transaction granted by more than one job (of the same account): an entitlement given twice.
    case grantedTwice(transactionID: String, jobs: [String])
    /// One Google Play purchase (a subscription's token, a one-time purchase's order id) granted to more than one
    /// account or by more than one job.
    case playGrantedTwice(purchase: String, detail: String)
    /// A Google Play purchase granted and not acknowledged (or consumed) exactly once, or acknowledged without a
    /// grant.
    case playAcknowledgements(purchase: String, detail: String)
    /// A Google Play purchase the simulator refunded (nobody acknowledged it within three days).
    case playRefunded(purchase: String, state: String)
    /// A grant for something that is not an authentic, grantable purchase.
    case inauthenticGranted(jobID: String, transactionID: String?, category: String)
    /// An authentic purchase that no job got granted; `outcomes` are the verdicts its jobs got.
    case authenticNotGranted(transactionID: String, outcomes: [String])
    /// Adversarial input that did not end `rejected`.
    case notRejected(jobID: String, outcome: String)
    /// A granted job whose verdict the ledger did not record.
    case ledgerMissingVerdict(jobID: String)
    /// The ledger recorded another verdict than the one published.
    case ledgerVerdictDiffers(jobID: String)
    /// A granted transaction without a claim in the ledger.
    case ledgerClaimMissing(transactionID: String, jobID: String)
    /// The ledger's owner of a granted transaction is not the account of the job that was granted it.
    case ledgerClaimDiffers(transactionID: String, jobID: String)
    /// A dead letter that is not one of the deliberately malformed messages.
    case unexpectedDeadLetter(key: String, reason: String)
    /// A deliberately malformed message that never reached the dead-letter topic.
    case missingDeadLetter(key: String)
    /// Once everything settled, a partition of `receipt-jobs` whose committed offset stayed below its end: it stalled
    /// (an output never delivered, or delivered and never committed), and its next owner would read it again.
    case partitionNotCommitted(partition: Int32, committed: Int64?, end: Int64)
    /// A worker sent SIGTERM did not drain and exit 0 in time.
    case drainFailed(worker: Int, detail: String)
    /// A log line holds a secret or a receipt.
    case leakInLog(String)
    /// The simulator saw a request to an endpoint the workers were not configured with.
    case unexpectedAppleEndpoint(String)
    /// The run itself could not complete (a process did not start, the verdicts never arrived).
    case runFailed(String)
    /// The entitlement service's API disagrees with the run's truth about an account.
    case entitlementMismatch(account: String, detail: String)
    /// After the lifecycle events: the ledger's owner, state or expiry of a transaction differs from Apple's truth.
    case notificationDrift(transactionID: String, detail: String)
    /// A CONSUMPTION_REQUEST got no answer, several, or a wrong `deliveryStatus`.
    case consumptionAnswers(transactionID: String, detail: String)
    /// A granted transaction never finished, or another one finished.
    case finishCalls(transactionID: String, detail: String)
    /// The reconciler asked Apple's notification history faster than its budget.
    case reconcileBudget(detail: String)
    /// A verdict of a reconciler's correction job (``Messages/CorrectionJob``) for a transaction Apple does not know,
    /// or for another account than the one that owned the subscription.
    case reconcileCorrection(jobID: String, detail: String)
    /// After Google Play's lifecycle events: the ledger's owner, state or expiry of a Play purchase differs from the
    /// Play simulator's truth.
    case playNotificationDrift(purchase: String, detail: String)
    /// A Google Play refund review got no answer, several, a refused one, or one later than Google's 24 hours.
    case playRefundReviewAnswers(order: String, detail: String)
    /// The reconciler spent more Google Play calls than its share of the per-minute quota.
    case playReconcileBudget(detail: String)

    public var description: String {
        switch self {
        case .missingVerdict(let job): "job \(job): no verdict"
        case .unknownVerdict(let job): "verdict for job \(job), which was never submitted"
        case .inconsistentVerdicts(let job, let distinct, let fields):
            "job \(job): \(distinct) different verdicts (\(fields.joined(separator: ", ")))"
        case .wrongAccount(let job): "job \(job): verdict for another account or with another verdict_id"
        case .grantedToSeveralAccounts(let tx, let accounts):
            "transaction \(tx) granted to \(accounts.count) accounts: \(accounts.joined(separator: ", "))"
        case .grantedTwice(let tx, let jobs):
            "transaction \(tx) granted by \(jobs.count) jobs: \(jobs.joined(separator: ", "))"
        case .playGrantedTwice(let purchase, let detail): "Google Play purchase \(purchase) granted \(detail)"
        case .playAcknowledgements(let purchase, let detail): "Google Play purchase \(purchase): \(detail)"
        case .playRefunded(let purchase, let state):
            "Google Play purchase \(purchase) refunded by Google Play (\(state)): never acknowledged in time"
        case .inauthenticGranted(let job, let tx, let category):
            "job \(job) (\(category)): granted \(tx ?? "nothing") but is not an authentic purchase"
        case .authenticNotGranted(let tx, let outcomes):
            "authentic transaction \(tx) never granted (verdicts: \(outcomes.joined(separator: ", ")))"
        case .notRejected(let job, let outcome): "adversarial job \(job) ended \(outcome), not rejected"
        case .ledgerMissingVerdict(let job): "job \(job): granted but the ledger recorded no verdict"
        case .ledgerVerdictDiffers(let job): "job \(job): the ledger recorded another verdict than the one published"
        case .ledgerClaimMissing(let tx, let job): "transaction \(tx) granted by job \(job) has no ledger claim"
        case .ledgerClaimDiffers(let tx, let job): "transaction \(tx): the ledger's claim is not job \(job)'s account"
        case .unexpectedDeadLetter(let key, let reason): "unexpected dead letter (key \(key), reason \(reason))"
        case .missingDeadLetter(let key): "malformed message \(key) never reached the dead-letter topic"
        case .partitionNotCommitted(let partition, let committed, let end):
            "receipt-jobs[\(partition)] committed up to \(committed.map(String.init) ?? "nothing"), not to its end \(end)"
        case .drainFailed(let worker, let detail): "worker \(worker) did not drain on SIGTERM: \(detail)"
        case .leakInLog(let detail): "log leak: \(detail)"
        case .unexpectedAppleEndpoint(let endpoint): "the simulator was asked for \(endpoint)"
        case .runFailed(let detail): "run failed: \(detail)"
        case .entitlementMismatch(let account, let detail): "account \(account): the entitlement API shows \(detail)"
        case .notificationDrift(let tx, let detail): "transaction \(tx): the ledger drifted from Apple: \(detail)"
        case .consumptionAnswers(let tx, let detail): "transaction \(tx): consumption answers: \(detail)"
        case .finishCalls(let tx, let detail): "transaction \(tx): finish calls: \(detail)"
        case .reconcileBudget(let detail): "the reconciler exceeded its rate budget: \(detail)"
        case .reconcileCorrection(let job, let detail): "correction job \(job): \(detail)"
        case .playNotificationDrift(let purchase, let detail):
            "Google Play purchase \(purchase): the ledger drifted from Google Play: \(detail)"
        case .playRefundReviewAnswers(let order, let detail): "Google Play refund review of \(order): \(detail)"
        case .playReconcileBudget(let detail): "the reconciler exceeded its Google Play quota share: \(detail)"
        }
    }

    /// A short, stable name of the kind of violation (for counts in the summary).
    public var kind: String {
        switch self {
        case .missingVerdict: "missing_verdict"
        case .unknownVerdict: "unknown_verdict"
        case .inconsistentVerdicts: "inconsistent_verdicts"
        case .wrongAccount: "wrong_account"
        case .grantedToSeveralAccounts: "granted_to_several_accounts"
        case .grantedTwice: "granted_twice"
        case .playGrantedTwice: "play_granted_twice"
        case .playAcknowledgements: "play_acknowledgements"
        case .playRefunded: "play_refunded"
        case .inauthenticGranted: "inauthentic_granted"
        case .authenticNotGranted: "authentic_not_granted"
        case .notRejected: "not_rejected"
        case .ledgerMissingVerdict: "ledger_missing_verdict"
        case .ledgerVerdictDiffers: "ledger_verdict_differs"
        case .ledgerClaimMissing: "ledger_claim_missing"
        case .ledgerClaimDiffers: "ledger_claim_differs"
        case .unexpectedDeadLetter: "unexpected_dead_letter"
        case .missingDeadLetter: "missing_dead_letter"
        case .partitionNotCommitted: "partition_not_committed"
        case .drainFailed: "drain_failed"
        case .leakInLog: "leak_in_log"
        case .unexpectedAppleEndpoint: "unexpected_apple_endpoint"
        case .runFailed: "run_failed"
        case .entitlementMismatch: "entitlement_mismatch"
        case .notificationDrift: "notification_drift"
        case .consumptionAnswers: "consumption_answers"
        case .finishCalls: "finish_calls"
        case .reconcileBudget: "reconcile_budget"
        case .reconcileCorrection: "reconcile_correction"
        case .playNotificationDrift: "play_notification_drift"
        case .playRefundReviewAnswers: "play_refund_review_answers"
        case .playReconcileBudget: "play_reconcile_budget"
        }
    }
}

extension ChaosViolation {
    /// How a lifecycle family's run ended: the store had to stop retrying its notifications (`retriesOver`), then the
    /// reconciler had to sweep once more (`swept`). None when both happened; else one ``runFailed(_:)`` naming the
    /// first that did not, in the words given.
    static func unsettled(
        _ family: String, retriesOver: Bool, swept: Bool, retrying: String, unswept: String
    ) -> [ChaosViolation] {
        if !retriesOver { return [.runFailed("\(family): \(retrying)")] }
        if !swept { return [.runFailed("\(family): \(unswept)")] }
        return []
    }
}

/// The chaos run's invariants, as one pure function of what was submitted and what came out: every job has a
/// verdict; a job's verdicts are identical; no transaction is granted to two accounts (or twice); granted
/// transactions are exactly the authentic ones; the ledger agrees with the verdicts; the dead-letter topic holds
/// only the deliberately malformed messages.
public struct ChaosInvariantChecker: Sendable {
    /// What was submitted.
    public var jobs: [ChaosSubmittedJob]
    /// Kafka keys of the deliberately malformed messages.
    public var malformedKeys: Set<String>

    /// What the check found, besides the violations.
    public struct Tally: Sendable, Hashable, Codable {
        /// Verdict records read (every delivery).
        public var verdictsDelivered = 0
        /// Jobs with at least one verdict.
        public var jobsDecided = 0
        /// Deliveries beyond the first per job (at-least-once; consumers de-duplicate on `verdict_id`).
        public var duplicatesDelivered = 0
        public var deadLetters = 0
        public var grantedTransactions = 0
        /// Decided jobs per outcome.
        public var outcomes: [String: Int] = [:]
        /// Jobs delivered more than once with the same decision but another `decided_at`: decided again on
        /// redelivery rather than read back from the ledger (local rejections, which the ledger does not record).
        public var redecided = 0
    }

    /// A verdict without its `decided_at`: what a redelivery must repeat.
    static func decision(_ verdict: Verdict) -> Verdict {
        var decision = verdict
        decision.decidedAt = Date(timeIntervalSince1970: 0)
        return decision
    }

    static func differingFields(_ verdicts: [Verdict]) -> [String] {
        guard let first = verdicts.first else { return [] }
        var fields = Set<String>()
        for other in verdicts.dropFirst() {
            if other.outcome != first.outcome { fields.insert("outcome") }
            if other.reason != first.reason { fields.insert("reason") }
            if other.accountID != first.accountID { fields.insert("account_id") }
            if other.decidedBy != first.decidedBy { fields.insert("decided_by") }
            if other.environment != first.environment { fields.insert("environment") }
            if other.transactions != first.transactions { fields.insert("transactions") }
            if other.appleStatus != first.appleStatus { fields.insert("apple_status") }
            if other.decidedAt != first.decidedAt { fields.insert("decided_at") }
        }
        return fields.sorted()
    }

    /// The partitions of `receipt-jobs` whose committed offset (`committed`, nil where nothing was committed) is below
    /// their end (`ends`, the high watermarks), once every message settled: commit lag must return to zero, or a
    /// partition stalled even if its outputs arrived.
    public static func uncommittedPartitions(
        committed: [Int32: Int64?], ends: [Int32: Int64]
    ) -> [ChaosViolation] {
        ends.sorted { $0.key < $1.key }.compactMap { partition, end in
            let offset = committed[partition] ?? nil
            return (offset ?? 0) >= end
                ? nil : .partitionNotCommitted(partition: partition, committed: offset, end: end)
        }
    }

    /// The violations (empty when every promise held) and the tally.
    public func check(
        verdicts: [Verdict], deadLetters: [(key: String, reason: String)], ledger: ChaosLedgerView?
    ) -> (violations: [ChaosViolation], tally: Tally) {
        var violations: [ChaosViolation] = []
        var tally = Tally()
        tally.verdictsDelivered = verdicts.count
        tally.deadLetters = deadLetters.count

        // A submission is known by the verdict id it must get (job id and content digest), or by its job id when its
        // digest is not known: one job id may carry several contents (a reused job id), each with its own verdict.
        let jobsByKey = Dictionary(jobs.map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first })
        let jobIDs = Set(jobs.map(\.jobID))
        var delivered: [String: [Verdict]] = [:]
        for verdict in verdicts {
            if jobsByKey[verdict.verdictID] != nil {
                delivered[verdict.verdictID, default: []].append(verdict)
            } else if jobsByKey[ChaosSubmittedJob.jobKey(verdict.jobID)] != nil {
                delivered[ChaosSubmittedJob.jobKey(verdict.jobID), default: []].append(verdict)
            } else if jobIDs.contains(verdict.jobID) {
                // A verdict id no submission of this job id derives: it names another content's verdict.
                violations.append(.wrongAccount(jobID: verdict.jobID))
            } else {
                violations.append(.unknownVerdict(jobID: verdict.jobID))
            }
        }

        // Every job a verdict; a job's verdicts identical (one verdict id, one decision); each for the job's account.
        var first: [String: Verdict] = [:]
        for (key, job) in jobsByKey.sorted(by: { $0.key < $1.key }) {
            guard let all = delivered[key], let verdict = all.first else {
                violations.append(.missingVerdict(jobID: job.jobID))
                continue
            }
            first[key] = verdict
            tally.jobsDecided += 1
            tally.duplicatesDelivered += all.count - 1
            tally.outcomes[verdict.outcome.rawValue, default: 0] += 1
            let decisions = Set(all.map(Self.decision))
            if decisions.count > 1 {
                violations.append(
                    .inconsistentVerdicts(
                        jobID: job.jobID, distinct: decisions.count, fields: Self.differingFields(all)))
            } else if Set(all).count > 1 {
                tally.redecided += 1
            }
            if all.contains(where: { $0.accountID != job.accountID }) {
                violations.append(.wrongAccount(jobID: job.jobID))
            }
            if job.mustBeRejected, verdict.outcome != .rejected {
                violations.append(.notRejected(jobID: job.jobID, outcome: verdict.outcome.rawValue))
            }
        }

        // Grants: only authentic purchases, each to one account by one job, and every authentic one granted.
        let authentic = Set(jobs.compactMap(\.grantableTransactionID))
        var grantingJobs: [String: Set<String>] = [:]
        var grantingAccounts: [String: Set<String>] = [:]
        for (key, verdict) in first.sorted(by: { $0.key < $1.key }) where verdict.outcome == .granted {
            let job = jobsByKey[key]
            let jobID = verdict.jobID
            let granted = verdict.transactions.map(\.transactionID)
            if granted.isEmpty || job?.grantableTransactionID == nil {
                violations.append(
                    .inauthenticGranted(jobID: jobID, transactionID: granted.first, category: job?.category ?? "?"))
            }
            for transactionID in granted {
                if !authentic.contains(transactionID), job?.grantableTransactionID != nil {
                    violations.append(
                        .inauthenticGranted(jobID: jobID, transactionID: transactionID, category: job?.category ?? "?"))
                }
                grantingJobs[transactionID, default: []].insert(jobID)
                grantingAccounts[transactionID, default: []].insert(verdict.accountID)
            }
        }
        tally.grantedTransactions = grantingJobs.count
        for (transactionID, accounts) in grantingAccounts.sorted(by: { $0.key < $1.key }) {
            if accounts.count > 1 {
                violations.append(.grantedToSeveralAccounts(transactionID: transactionID, accounts: accounts.sorted()))
            } else if let jobs = grantingJobs[transactionID], jobs.count > 1 {
                violations.append(.grantedTwice(transactionID: transactionID, jobs: jobs.sorted()))
            }
        }
        for transactionID in authentic.sorted() where grantingJobs[transactionID] == nil {
            let outcomes = jobs.filter { $0.grantableTransactionID == transactionID }.map { job in
                first[job.key].map {
                    [$0.outcome.rawValue, $0.reason?.rawValue].compactMap { $0 }.joined(separator: "/")
                }
                    ?? "none"
            }
            violations.append(.authenticNotGranted(transactionID: transactionID, outcomes: outcomes))
        }

        // The ledger agrees: grants are recorded with their claims; any verdict it recorded is the published one.
        if let ledger {
            for verdict in first.values.sorted(by: { $0.verdictID < $1.verdictID }) {
                let jobID = verdict.jobID
                // The ledger keeps one verdict per job id: the first content's (a reuse is answered, not recorded).
                if let recorded = ledger.recordedVerdicts[jobID], recorded.verdictID == verdict.verdictID {
                    if recorded != verdict { violations.append(.ledgerVerdictDiffers(jobID: jobID)) }
                } else if verdict.outcome == .granted || verdict.outcome == .alreadyGranted {
                    violations.append(.ledgerMissingVerdict(jobID: jobID))
                }
                guard verdict.outcome == .granted else { continue }
                for transaction in verdict.transactions {
                    guard let claim = ledger.claims[transaction.transactionID] else {
                        violations.append(.ledgerClaimMissing(transactionID: transaction.transactionID, jobID: jobID))
                        continue
                    }
                    if claim.accountID != verdict.accountID || claim.grantedJobID != jobID {
                        violations.append(.ledgerClaimDiffers(transactionID: transaction.transactionID, jobID: jobID))
                    }
                }
            }
        }

        // Dead letters: exactly the deliberately malformed messages (each at least once).
        var deadLettered = Set<String>()
        for letter in deadLetters {
            if malformedKeys.contains(letter.key) {
                deadLettered.insert(letter.key)
            } else {
                violations.append(.unexpectedDeadLetter(key: letter.key, reason: letter.reason))
            }
        }
        for key in malformedKeys.sorted() where !deadLettered.contains(key) {
            violations.append(.missingDeadLetter(key: key))
        }
        return (violations, tally)
    }
}
