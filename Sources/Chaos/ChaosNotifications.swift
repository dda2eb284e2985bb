import Foundation
import Messages
import RateLimiter
import Traffic

/// The simulator's truth about one transaction (`GET /sim/transactions/{id}`), reduced to what the notification
/// family compares.
public struct ChaosTransactionTruth: Sendable, Hashable {
    public var transactionID: String
    public var originalTransactionID: String
    public var productID: String
    /// Apple's product type (`Auto-Renewable Subscription`, `Consumable`, …).
    public var type: String
    /// `active`, `expired`, `revoked`, `billing_retry` or `grace_period`.
    public var state: String
    public var expiresMs: Int64?
    /// `deliveryStatus` of each Send Consumption Information body received, in order.
    public var consumptionDeliveryStatuses: [String]
    public var finishCalls: Int
    /// The state of its subscription (the family's latest transaction's), and that latest transaction.
    public var subscriptionState: String?
    public var subscriptionLatestID: String?
    /// How Apple revoked it (`REFUND_FULL`, `REFUND_PRORATED`, `FAMILY_REVOKE`) and, for a prorated refund, the
    /// share refunded in milliunits.
    public var revocationType: String?
    public var revocationPercentage: Int?
    /// `refundPreference` of each Send Consumption Information body received, in order (nil: the body had none, as
    /// a `data_only` answer).
    public var consumptionRefundPreferences: [String?]
    /// Apple's `inAppOwnershipType`: `PURCHASED`, or `FAMILY_SHARED` for a family member's transaction.
    public var ownershipType: String

    public init(
        transactionID: String, originalTransactionID: String? = nil, productID: String = "", type: String = "",
        state: String = "active", expiresMs: Int64? = nil, consumptionDeliveryStatuses: [String] = [],
        finishCalls: Int = 0, subscriptionState: String? = nil, subscriptionLatestID: String? = nil,
        revocationType: String? = nil, revocationPercentage: Int? = nil, consumptionRefundPreferences: [String?]? = nil,
        ownershipType: String = "PURCHASED"
    ) {
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID ?? transactionID
        self.productID = productID
        self.type = type
        self.state = state
        self.expiresMs = expiresMs
        self.consumptionDeliveryStatuses = consumptionDeliveryStatuses
        self.finishCalls = finishCalls
        self.subscriptionState = subscriptionState
        self.subscriptionLatestID = subscriptionLatestID
        self.revocationType = revocationType
        self.revocationPercentage = revocationPercentage
        self.consumptionRefundPreferences =
            consumptionRefundPreferences ?? consumptionDeliveryStatuses.map { _ in nil }
        self.ownershipType = ownershipType
    }

    /// From the simulator's JSON answer; nil when it is not one.
    init?(json: [String: Any]) {
        guard let id = json["transaction_id"] as? String, let state = json["state"] as? String else { return nil }
        let answers = json["consumption_answers"] as? [Any] ?? []
        self.init(
            transactionID: id, originalTransactionID: json["original_transaction_id"] as? String,
            productID: json["product_id"] as? String ?? "", type: json["type"] as? String ?? "", state: state,
            expiresMs: (json["expires_date_ms"] as? NSNumber)?.int64Value,
            consumptionDeliveryStatuses: answers.map { ($0 as? [String: Any])?["deliveryStatus"] as? String ?? "?" },
            finishCalls: (json["finish_calls"] as? NSNumber)?.intValue ?? 0,
            subscriptionState: json["subscription_state"] as? String,
            subscriptionLatestID: json["subscription_latest_transaction_id"] as? String,
            revocationType: json["revocation_type"] as? String,
            revocationPercentage: (json["revocation_percentage"] as? NSNumber)?.intValue,
            consumptionRefundPreferences: answers.map { ($0 as? [String: Any])?["refundPreference"] as? String },
            ownershipType: json["in_app_ownership_type"] as? String ?? "PURCHASED")
    }
}

/// The ledger's view of one transaction (its claim), as `verify-worker ledger show` states it.
public struct ChaosLedgerTransaction: Sendable, Hashable {
    public var accountID: String
    /// `active`, `expired`, `revoked` or `grace_period` (``Ledger/LedgerShow/state(of:at:)``).
    public var state: String
    public var expiresMs: Int64?
    /// For an auto-renewable subscription: its state (its latest claim's, ``Ledger/LedgerShow/subscriptionState(of:at:)``)
    /// and the id of that latest claim.
    public var subscriptionState: String?
    public var subscriptionLatestID: String?
    /// The claim's revocation detail (`revocation_type`, `revocation_percentage`).
    public var revocationType: String?
    public var revocationPercentage: Int?
    /// The claim's `ownership_type` (`FAMILY_SHARED` for a family member's claim; nil: not stated, the purchaser's).
    public var ownershipType: String?
}

/// What the run's refund policy answers a consumption request: the rule that matches and the `refundPreference` it
/// prescribes (nil: `data_only`, the facts without a preference).
public struct ChaosExpectedConsumptionAnswer: Sendable, Hashable {
    public var rule: String
    public var refundPreference: String?
}

/// The end invariants of the notification family, as pure functions of the simulator's truth and
/// the ledger: `notification_drift`, `consumption_answers`, `finish_calls` and `reconcile_budget`.
public struct ChaosNotificationChecker: Sendable {
    /// The account that owned each transaction the lifecycle touched before it started (renewals: the owner of the
    /// original transaction). Notifications never change an owner.
    public var owners: [String: String]
    /// Transactions Apple sent a CONSUMPTION_REQUEST for, each granted and never revoked: the only right answer is
    /// `DELIVERED`.
    public var consumptionRequested: Set<String>
    /// For each of them, the answer the run's refund policy prescribes (none: only the delivery status is checked).
    public var expectedAnswers: [String: ChaosExpectedConsumptionAnswer]
    /// Transactions the receipt traffic granted (each must have Finish Transaction at least once) and those it
    /// decided without granting (none may have it).
    public var granted: Set<String>
    public var notGranted: Set<String>

    public init(
        owners: [String: String], consumptionRequested: Set<String> = [], granted: Set<String> = [],
        notGranted: Set<String> = [], expectedAnswers: [String: ChaosExpectedConsumptionAnswer] = [:]
    ) {
        self.owners = owners
        self.consumptionRequested = consumptionRequested
        self.expectedAnswers = expectedAnswers
        self.granted = granted
        self.notGranted = notGranted
    }

    /// The run workers' refund policy (`refund_policy_file`): Apple's questions about a consumable are answered
    /// `no_refund` by its rule, every other question by the built-in `default` (data only).
    public static let refundPolicy = """
        {"rules": [{"name": "chaos-consumables", "store": "app_store", "product_types": ["consumable"], \
        "answer": "no_refund"}]}
        """

    /// The answer ``refundPolicy`` prescribes to Apple's consumption request about a purchase the customer has.
    public static func expectedAnswer(for type: ProductType) -> ChaosExpectedConsumptionAnswer {
        type == .consumable
            ? ChaosExpectedConsumptionAnswer(rule: "chaos-consumables", refundPreference: "DECLINE")
            : ChaosExpectedConsumptionAnswer(rule: "default", refundPreference: nil)
    }

    /// The simulator's state as the ledger can hold it: the ledger records no billing retry without a grace period
    /// (the renewal info's flag is not stored), and such a subscription gives no access, as `expired` does.
    public static func comparable(_ state: String) -> String { state == "billing_retry" ? "expired" : state }

    /// The simulator's type of an auto-renewable subscription, the only product whose subscription state is compared.
    public static let autoRenewableType = "Auto-Renewable Subscription"

    /// `notification_drift`: for every transaction with an owner, the ledger's owner, state and expiry equal the
    /// truth, and so do its revocation detail and whose it is (the purchaser's or a family member's). A family
    /// member's transaction has its own id and its own owner (the member's account), so a member's revocation and the
    /// purchaser's claim are compared apart.
    public func drift(
        truth: [String: ChaosTransactionTruth], ledger: [String: ChaosLedgerTransaction]
    ) -> [ChaosViolation] {
        owners.keys.sorted().compactMap { id in
            guard let expected = truth[id] else {
                return .notificationDrift(transactionID: id, detail: "the simulator has no truth for it")
            }
            guard let claim = ledger[id] else {
                return .notificationDrift(
                    transactionID: id, detail: "no ledger claim; the truth is \(expected.state)")
            }
            var problems: [String] = []
            if claim.accountID != owners[id] { problems.append("owner \(claim.accountID), not \(owners[id] ?? "")") }
            if claim.state != Self.comparable(expected.state) {
                problems.append("state \(claim.state), truth \(expected.state)")
            }
            // The subscription as a whole stands as its latest transaction does, in the ledger as at Apple; compared
            // once the ledger holds that latest transaction (a period the ledger has never seen is the check above's).
            if expected.type == Self.autoRenewableType, let truthState = expected.subscriptionState,
                let latest = expected.subscriptionLatestID, claim.subscriptionLatestID == latest,
                claim.subscriptionState != Self.comparable(truthState)
            {
                problems.append(
                    "subscription state \(claim.subscriptionState ?? "null"), truth \(truthState) (latest \(latest))")
            }
            // How it was revoked: a full refund, a prorated one with its share, or a family member's lost access.
            if claim.revocationType != expected.revocationType {
                problems.append(
                    "revocation_type \(claim.revocationType ?? "null"), truth \(expected.revocationType ?? "null")")
            }
            if claim.revocationPercentage != expected.revocationPercentage {
                problems.append(
                    "revocation_percentage \(claim.revocationPercentage.map(String.init) ?? "null"), truth "
                        + (expected.revocationPercentage.map(String.init) ?? "null"))
            }
            // A member's claim recorded as the purchaser's (or the reverse) would let a family revocation reach the
            // wrong side.
            if (claim.ownershipType ?? "PURCHASED") != expected.ownershipType {
                problems.append(
                    "in_app_ownership_type \(claim.ownershipType ?? "not stated"), truth \(expected.ownershipType)")
            }
            if claim.expiresMs != expected.expiresMs {
                problems.append(
                    "expires_ms \(claim.expiresMs.map(String.init) ?? "null"), truth "
                        + (expected.expiresMs.map(String.init) ?? "null"))
            }
            return problems.isEmpty
                ? nil : .notificationDrift(transactionID: id, detail: problems.joined(separator: "; "))
        }
    }

    /// `consumption_answers`: exactly one Send Consumption Information per requested transaction, `DELIVERED`,
    /// with the `refundPreference` the run's refund policy prescribes (``expectedAnswers``), and the ledger's
    /// follow-up record of that answer sent and naming the policy's rule (`detail` `rule NAME`).
    ///
    /// - Parameter records: the follow-up record of each transaction's CONSUMPTION_REQUEST, as state and detail;
    ///   nil: the records were not read (only the simulator's side is checked).
    public func consumptionAnswers(
        truth: [String: ChaosTransactionTruth], records: [String: (state: String, detail: String?)]? = nil
    ) -> [ChaosViolation] {
        consumptionRequested.sorted().compactMap { id in
            let statuses = truth[id]?.consumptionDeliveryStatuses ?? []
            guard statuses == ["DELIVERED"] else {
                return .consumptionAnswers(
                    transactionID: id,
                    detail: statuses.isEmpty
                        ? "no answer" : "\(statuses.count) answers \(statuses), expected one DELIVERED")
            }
            guard let expected = expectedAnswers[id] else { return nil }
            let preference = truth[id]?.consumptionRefundPreferences.first ?? nil
            guard preference == expected.refundPreference else {
                return .consumptionAnswers(
                    transactionID: id,
                    detail: "refundPreference \(preference ?? "none"), the policy's rule \(expected.rule) says "
                        + (expected.refundPreference ?? "none"))
            }
            guard let records else { return nil }
            guard let record = records[id] else {
                return .consumptionAnswers(transactionID: id, detail: "answered, but the ledger has no record of it")
            }
            guard record.state == "sent", record.detail == "rule \(expected.rule)" else {
                return .consumptionAnswers(
                    transactionID: id,
                    detail: "the ledger's record is \(record.state) \"\(record.detail ?? "")\", "
                        + "expected sent \"rule \(expected.rule)\"")
            }
            return nil
        }
    }

    /// `notification_drift` of a family member's own verification (docs/LEDGER.md, rule R4): the member's
    /// `FAMILY_SHARED` transaction, sent by the member's account, is `granted` to that account. Nil when it was.
    ///
    /// - Parameter verdict: the verdict recorded for the member's job; nil: none within the settle timeout.
    public static func memberGrant(transactionID: String, account: String, verdict: Verdict?) -> ChaosViolation? {
        guard let verdict else {
            return .notificationDrift(
                transactionID: transactionID, detail: "the family member's verification job has no verdict")
        }
        guard verdict.outcome != .granted || verdict.accountID != account else { return nil }
        let reason = verdict.reason.map { " / \($0.rawValue)" } ?? ""
        return .notificationDrift(
            transactionID: transactionID,
            detail: "the family member's verification was \(verdict.outcome.rawValue)\(reason) for "
                + "\(verdict.accountID), expected granted to \(account)")
    }

    /// `finish_calls`: every granted transaction finished at least once (a worker that dies between the call and
    /// its record may call again: Finish Transaction is idempotent), no other transaction ever.
    public func finishCalls(truth: [String: ChaosTransactionTruth]) -> [ChaosViolation] {
        let unfinished = granted.sorted().compactMap { id -> ChaosViolation? in
            guard let calls = truth[id]?.finishCalls, calls < 1 else { return nil }
            return .finishCalls(transactionID: id, detail: "granted, never finished")
        }
        let wrong = notGranted.subtracting(granted).sorted().compactMap { id -> ChaosViolation? in
            guard let calls = truth[id]?.finishCalls, calls > 0 else { return nil }
            return .finishCalls(transactionID: id, detail: "not granted, finished \(calls) times")
        }
        return unfinished + wrong
    }

    /// `reconcile_correction`: the verdicts of the reconciler's correction jobs (its re-reads of a subscription's
    /// history, ``Messages/CorrectionJob``), which the run never submitted. Each must name a transaction Apple knows
    /// and be for the account that owned it (a renewal: the owner of its original transaction), since a correction
    /// never moves a purchase to another account. Whether it brought the ledger to the truth is `notification_drift`.
    ///
    /// - Parameter owners: the owner of every transaction granted before the lifecycle, and of each renewal.
    public static func corrections(
        _ verdicts: [Verdict], owners: [String: String], truth: [String: ChaosTransactionTruth]
    ) -> [ChaosViolation] {
        verdicts.compactMap { verdict in
            guard let id = CorrectionJob.transactionID(ofJobID: verdict.jobID) else {
                return .reconcileCorrection(jobID: verdict.jobID, detail: "not a correction job id")
            }
            guard let known = truth[id] else {
                return .reconcileCorrection(jobID: verdict.jobID, detail: "Apple does not know transaction \(id)")
            }
            guard let owner = owners[id] ?? owners[known.originalTransactionID] else {
                return .reconcileCorrection(
                    jobID: verdict.jobID, detail: "transaction \(id) had no owner before the run's lifecycle")
            }
            guard verdict.accountID == owner else {
                return .reconcileCorrection(
                    jobID: verdict.jobID, detail: "decided for \(verdict.accountID), the owner is \(owner)")
            }
            return nil
        }
    }

    /// `reconcile_budget`: the reconciler's Get Notification History requests stayed within its bucket: `rate` per
    /// second over the time it ran, plus the one request of burst each process starts with.
    public static func reconcileBudget(
        historyRequests: Int, ratePerSecond: Double, seconds: Double, starts: Int
    ) -> ChaosViolation? {
        let allowed = ratePerSecond * seconds + Double(max(1, starts))
        guard Double(historyRequests) > allowed.rounded(.up) else { return nil }
        return .reconcileBudget(
            detail: "\(historyRequests) history requests in \(Int(seconds)) s from \(starts) processes; "
                + "the budget allows \(Int(allowed)) at \(ratePerSecond)/s")
    }
}

/// One lifecycle event the run triggers at the simulator.
public struct ChaosLifecycleEvent: Sendable, Hashable {
    /// The `/sim/…` route.
    public var route: String
    /// `transaction_id` or `original_transaction_id`.
    public var key = "transaction_id"
    public var transactionID: String
    /// Extra JSON members, e.g. `"days": 7`.
    public var extra = ""
    /// The event is about the subscription's latest transaction, known only once the run's renewals are made: the
    /// run names it in the body instead of ``transactionID`` (the subscription's chosen transaction).
    public var latestOfSubscription = false
    /// The event is about the family member's transaction that ``familyShareRoute`` minted from the chosen one: the
    /// run names the member's in the body, once the member's own verification was decided.
    public var familyMember = false

    /// Shares the chosen purchase with a family member: the simulator mints the member's `FAMILY_SHARED`
    /// transaction, which the run then sends as a verification job from an account of the member's own.
    public static let familyShareRoute = "sim/family/share"

    var body: String { body(naming: transactionID) }

    public func body(naming id: String) -> String {
        "{\"\(key)\": \"\(id)\"" + (extra.isEmpty ? "" : ", " + extra) + "}"
    }
}

/// Which lifecycle events a run triggers: a seeded plan over the granted production transactions of each product
/// type. Each transaction gets one scenario (a short sequence of events), so the expected truth is the simulator's
/// own; consumption requests go to transactions nothing else touches (the right answer is then `DELIVERED`).
public struct ChaosLifecyclePlan: Sendable {
    public private(set) var events: [ChaosLifecycleEvent] = []
    public private(set) var consumptionRequested: Set<String> = []
    /// The product type of each transaction given a consumption request (what the run's refund policy matches on).
    public private(set) var consumptionRequestedTypes: [String: ProductType] = [:]
    /// Transactions chosen, with their scenario name.
    public private(set) var scenarios: [String: String] = [:]

    /// - Parameters:
    ///   - transactions: granted production transactions and their product type in the catalog.
    ///   - count: how many transactions get a scenario.
    public init(transactions: [(id: String, type: ProductType)], count: Int, seed: UInt64) {
        var random = SplitMix64(seed: seed ^ 0x11FE)
        // Round robin over the product types, so the few subscriptions are not drowned by the many one-time
        // purchases.
        var byType: [ProductType: [String]] = [:]
        for (id, type) in transactions { byType[type, default: []].append(id) }
        var queues = ProductType.allCases.compactMap { type in
            byType[type].map { ids in (type, ids.sorted().shuffled(using: &random)) }
        }
        var chosen: [(id: String, type: ProductType)] = []
        while chosen.count < count, queues.contains(where: { !$0.1.isEmpty }) {
            for index in queues.indices where chosen.count < count && !queues[index].1.isEmpty {
                chosen.append((queues[index].1.removeFirst(), queues[index].0))
            }
        }
        var perType: [ProductType: Int] = [:]
        var sequences: [[ChaosLifecycleEvent]] = []
        for (id, type) in chosen {
            let turn = perType[type, default: 0]
            perType[type] = turn + 1
            let (name, steps) = Self.scenario(type: type, turn: turn, id: id)
            scenarios[id] = name
            if name == "consumption_request" {
                consumptionRequested.insert(id)
                consumptionRequestedTypes[id] = type
            }
            sequences.append(steps)
        }
        // Interleaved: the first step of every scenario, then the second, so events about one transaction are
        // apart in time and their notifications race the others'.
        let longest = sequences.map(\.count).max() ?? 0
        for step in 0..<longest {
            for sequence in sequences where step < sequence.count { events.append(sequence[step]) }
        }
    }

    /// The scenarios of one product type; a subscription's include billing retry, expiry (both at the period's end,
    /// as Apple's), extension, and the refund of its latest period after a renewal; a subscription's and a
    /// non-consumable's, a family member's access granted and revoked (`family_revoke`).
    static func scenario(type: ProductType, turn: Int, id: String) -> (String, [ChaosLifecycleEvent]) {
        func event(_ route: String) -> ChaosLifecycleEvent { ChaosLifecycleEvent(route: route, transactionID: id) }
        func latest(_ route: String) -> ChaosLifecycleEvent {
            ChaosLifecycleEvent(route: route, transactionID: id, latestOfSubscription: true)
        }
        func subscription(_ route: String, _ extra: String = "") -> ChaosLifecycleEvent {
            ChaosLifecycleEvent(route: route, key: "original_transaction_id", transactionID: id, extra: extra)
        }
        // Family Sharing: the purchase shared with a member, whose own transaction the member's account sends (granted
        // to it, docs/LEDGER.md R4); then the member loses access (REVOKE, FAMILY_REVOKE, R3) and the purchaser keeps
        // it.
        let familyRevoke = (
            "family_revoke",
            [
                event(ChaosLifecycleEvent.familyShareRoute),
                ChaosLifecycleEvent(route: "sim/revoke", transactionID: id, familyMember: true),
            ]
        )
        // A prorated refund (REFUND_PRORATED) of a share between 25 % and 75 %, in milliunits.
        let prorated = ChaosLifecycleEvent(
            route: "sim/refund", transactionID: id, extra: "\"percentage\": \(25_000 + (turn * 12_345) % 50_001)")
        var options: [(String, [ChaosLifecycleEvent])]
        switch type {
        case .autoRenewable:
            // The scenarios closest to Apple's status of a subscription first, so a short run has each of them.
            options = [
                ("renew", [subscription("sim/renew")]),
                ("expire", [subscription("sim/expire")]),
                ("billing_retry_grace", [subscription("sim/billing-retry", "\"grace_days\": 3")]),
                ("extend", [subscription("sim/extend", "\"days\": 7")]),
                ("refund_latest", [subscription("sim/renew"), latest("sim/refund")]),
                familyRevoke,
                ("refund", [event("sim/refund")]),
                ("refund_prorated", [prorated]),
                (
                    "extend_renew_refund_latest",
                    [subscription("sim/extend", "\"days\": 7"), subscription("sim/renew"), latest("sim/refund")]
                ),
                ("billing_retry", [subscription("sim/billing-retry")]),
                ("refund_reversed", [event("sim/refund"), event("sim/refund/reverse")]),
                ("revoke", [event("sim/revoke")]),
                ("renew_twice", [subscription("sim/renew"), subscription("sim/renew")]),
                ("refund_declined", [event("sim/refund/decline")]),
                (
                    "extend_renew_billing_retry",
                    [
                        subscription("sim/extend", "\"days\": 7"), subscription("sim/renew"),
                        subscription("sim/billing-retry"),
                    ]
                ),
            ]
        case .consumable:
            options = [
                ("consumption_request", [event("sim/consumption-request")]),
                ("refund", [event("sim/refund")]),
                ("refund_declined", [event("sim/refund/decline")]),
            ]
        default:
            options = [
                ("refund", [event("sim/refund")]),
                ("refund_prorated", [prorated]),
                ("refund_reversed", [event("sim/refund"), event("sim/refund/reverse")]),
                ("revoke", [event("sim/revoke")]),
                // Answered by the refund policy's `default` rule (data only), where a consumable's is its own rule.
                ("consumption_request", [event("sim/consumption-request")]),
                ("refund_declined", [event("sim/refund/decline")]),
            ]
            // Family Sharing covers non-consumables (and subscriptions), not non-renewing subscriptions.
            if type == .nonConsumable { options.insert(familyRevoke, at: 4) }
        }
        return options[turn % options.count]
    }
}

/// The notification family's figures in the run's summary.
public struct ChaosNotificationReport: Sendable, Codable, Hashable {
    /// Transactions given a lifecycle scenario, per scenario.
    public var scenarios: [String: Int] = [:]
    /// Lifecycle requests the simulator accepted, and those it refused (409: e.g. a renewal of a revoked
    /// subscription).
    public var eventsTriggered = 0
    public var eventsRefused = 0
    /// Transactions compared with the truth (the scenarios' and the renewals' new ones).
    public var transactionsCompared = 0
    /// The simulator's `/sim/stats` notification counters.
    public var notificationsSent = 0
    public var notificationsFailed = 0
    public var notificationsRetried = 0
    public var notificationsDuplicated = 0
    /// Notifications no attempt of the simulator had delivered when the ledger agreed with the truth: only the
    /// reconciler brought them.
    public var undeliveredByApple = 0
    /// `verify_reconcile_notifications_recovered_total` summed over the reconciler's processes (scraped before each
    /// kill and at the end).
    public var reconcilerRecovered = 0
    public var historyRequests = 0
    public var reconcileBudgetPerSecond = 0.0
    /// From the first lifecycle event until the ledger agreed with the truth (nil: it never did within the settle
    /// timeout).
    public var convergenceSeconds: Double?
    public var consumptionRequests = 0
    public var finishChecked = 0
    /// Verdicts of the reconciler's correction jobs (its re-reads found the ledger behind Apple), and their distinct
    /// jobs.
    public var correctionVerdicts = 0
    public var correctionJobs = 0

    enum CodingKeys: String, CodingKey {
        case scenarios
        case eventsTriggered = "events_triggered"
        case eventsRefused = "events_refused"
        case transactionsCompared = "transactions_compared"
        case notificationsSent = "notifications_sent"
        case notificationsFailed = "notifications_failed"
        case notificationsRetried = "notifications_retried"
        case notificationsDuplicated = "notifications_duplicated"
        case undeliveredByApple = "undelivered_by_apple"
        case reconcilerRecovered = "reconciler_recovered"
        case historyRequests = "history_requests"
        case reconcileBudgetPerSecond = "reconcile_budget_per_s"
        case convergenceSeconds = "convergence_s"
        case consumptionRequests = "consumption_requests"
        case finishChecked = "finish_checked"
        case correctionVerdicts = "correction_verdicts"
        case correctionJobs = "correction_jobs"
    }

    public init() {}
}
