import Foundation
import Messages
import RateLimiter

/// What the Play simulator knows of a purchase at the end of the Play lifecycle (`GET /sim/purchases/{token}`),
/// reduced to what the Play lifecycle compares.
public struct ChaosPlayLifecycleTruth: Sendable, Hashable {
    /// The simulator's state: `purchased`, `refunded`, `active`, `canceled`, `expired`, `replaced`,
    /// `in_grace_period`, `on_hold`, `paused`, `revoked`, `pending` or `pending_canceled`.
    public var state: String
    /// `expiryTime` as `subscriptionsv2.get` answers it now (nil for a one-time product).
    public var expiryMs: Int64?
    /// The token of the subscription that replaced this one (an upgrade or a downgrade).
    public var replacedBy: String?

    /// The state as the ledger can hold it: `active` while Google entitles the buyer (purchased, active, canceled
    /// before its expiry, in grace period), `revoked` when Google took the purchase back (refunded, revoked),
    /// `expired` when a subscription ended otherwise (expired, replaced, on hold, paused); anything else as it is (a
    /// purchase still pending, which the lifecycle never leaves a granted purchase in).
    public var comparableState: String {
        switch state {
        case "purchased", "active", "canceled", "in_grace_period": "active"
        case "refunded", "revoked": "revoked"
        case "expired", "replaced", "on_hold", "paused": "expired"
        default: state
        }
    }
}

/// In an extension, so that the memberwise initializer stays.
extension ChaosPlayLifecycleTruth {
    init?(json object: [String: Any]) {
        guard let state = object["state"] as? String else { return nil }
        self.init(
            state: state, expiryMs: (object["expiry_time_ms"] as? NSNumber)?.int64Value,
            replacedBy: object["replaced_by_token"] as? String)
    }
}

/// The ledger's view of one Play purchase: the claims under its token (a subscription's periods, a one-time
/// purchase's order), by their latest claim.
public struct ChaosPlayLedgerPurchase: Sendable, Hashable {
    /// The owner of the latest claim.
    public var accountID: String
    /// `active`, `expired` or `revoked` (the latest claim's, at the time of the check).
    public var state: String
    public var expiresMs: Int64?
}

/// One refund review as the Play simulator recorded it (`GET /sim/reviews`).
public struct ChaosPlayRefundReview: Sendable, Hashable {
    public struct Answer: Sendable, Hashable {
        public var secondsAfterCreation: Double
        public var status: Int
    }

    public var orderID: String
    /// Every `orders.reviewrefund` call that reached the review, in order.
    public var answers: [Answer]
}

/// In an extension, so that the memberwise initializer stays.
extension ChaosPlayRefundReview {
    init?(json object: [String: Any]) {
        guard let order = object["order_id"] as? String else { return nil }
        let answers = (object["answers"] as? [[String: Any]] ?? []).map {
            Answer(
                secondsAfterCreation: ($0["seconds_after_creation"] as? NSNumber)?.doubleValue ?? 0,
                status: ($0["status"] as? NSNumber)?.intValue ?? 0)
        }
        self.init(orderID: order, answers: answers)
    }
}

/// The end invariants of the Play lifecycle, as pure functions of the Play simulator's truth and the ledger:
/// `play_notification_drift`, `play_refund_review_answers` and `play_reconcile_budget`.
public struct ChaosPlayLifecycleChecker: Sendable {
    /// The account that owned each purchase token the lifecycle touched before it started (a replacement's token:
    /// the owner of the subscription it replaced). Notifications never change an owner.
    public var owners: [String: String]
    /// The orders a refund review was opened for.
    public var reviewedOrders: Set<String> = []

    /// Google's time to answer a refund review.
    public static let reviewDeadlineSeconds = 86_400.0

    /// `play_notification_drift`: for every purchase with an owner, the ledger's owner and state equal the truth's,
    /// and its expiry too while Google entitles (a one-time product has none). A subscription Google ended (on hold,
    /// paused, expired, replaced) ends in the ledger when a worker reads Google's answer, so its expiry there is that
    /// read's time: never before Google's; a revoked purchase's end is its revocation.
    public func drift(
        truth: [String: ChaosPlayLifecycleTruth], ledger: [String: ChaosPlayLedgerPurchase]
    ) -> [ChaosViolation] {
        owners.keys.sorted().compactMap { token in
            let label = "token \(token.prefix(12))…"
            guard let expected = truth[token] else {
                return .playNotificationDrift(purchase: label, detail: "the Play simulator has no truth for it")
            }
            guard let purchase = ledger[token] else {
                return .playNotificationDrift(
                    purchase: label, detail: "no ledger claim; the truth is \(expected.state)")
            }
            var problems: [String] = []
            if purchase.accountID != owners[token] {
                problems.append("owner \(purchase.accountID), not \(owners[token] ?? "")")
            }
            let state = expected.comparableState
            if purchase.state != state { problems.append("state \(purchase.state), truth \(expected.state)") }
            func show(_ ms: Int64?) -> String { ms.map(String.init) ?? "null" }
            switch state {
            case "active":
                if purchase.expiresMs != expected.expiryMs {
                    problems.append("expires_ms \(show(purchase.expiresMs)), truth \(show(expected.expiryMs))")
                }
            case "expired":
                if let ends = expected.expiryMs, (purchase.expiresMs ?? .min) < ends {
                    problems.append(
                        "expires_ms \(show(purchase.expiresMs)), before the truth's end \(ends) (\(expected.state))")
                }
            default:
                break
            }
            return problems.isEmpty
                ? nil : .playNotificationDrift(purchase: label, detail: problems.joined(separator: "; "))
        }
    }

    /// `play_refund_review_answers`: every review opened got exactly one `orders.reviewrefund` call, accepted, within
    /// Google's 24 hours of its opening.
    public func refundReviewAnswers(_ reviews: [ChaosPlayRefundReview]) -> [ChaosViolation] {
        let byOrder = Dictionary(reviews.map { ($0.orderID, $0) }, uniquingKeysWith: { first, _ in first })
        return reviewedOrders.union(byOrder.keys).sorted().compactMap { order in
            guard let review = byOrder[order] else {
                return .playRefundReviewAnswers(order: order, detail: "the Play simulator has no review of it")
            }
            guard let answer = review.answers.first else {
                return .playRefundReviewAnswers(order: order, detail: "no answer")
            }
            if review.answers.count > 1 {
                return .playRefundReviewAnswers(
                    order: order,
                    detail: "\(review.answers.count) answers (statuses \(review.answers.map(\.status))), expected one")
            }
            if answer.status != 200 {
                return .playRefundReviewAnswers(order: order, detail: "the answer was refused (\(answer.status))")
            }
            if answer.secondsAfterCreation > Self.reviewDeadlineSeconds {
                return .playRefundReviewAnswers(
                    order: order, detail: "answered \(Int(answer.secondsAfterCreation)) s after the review opened")
            }
            return nil
        }
    }

    /// `play_reconcile_budget`: the reconciler's Google Play calls (voided-purchases pages and the re-reads it made
    /// the workers spend) within its share, `callsPerMinute` in each wall-clock minute each of its processes lived
    /// in (a restarted process starts with a fresh minute's share, as the quota share is per process).
    ///
    /// - Parameter lives: each process's start and end, in milliseconds since 1970.
    public static func reconcileBudget(
        spent: Int, callsPerMinute: Int, lives: [(startMs: Int64, endMs: Int64)]
    ) -> ChaosViolation? {
        let minutes = lives.reduce(0) { total, life in
            total + Int(max(life.endMs, life.startMs) / 60_000 - life.startMs / 60_000) + 1
        }
        let allowed = callsPerMinute * max(1, minutes)
        guard spent > allowed else { return nil }
        return .playReconcileBudget(
            detail: "\(spent) Google Play calls from \(lives.count) processes over \(minutes) wall-clock minutes; "
                + "the share allows \(allowed) at \(callsPerMinute) a minute")
    }
}

/// One lifecycle event the run posts to the Play simulator (`POST /sim/lifecycle`).
public struct ChaosPlayLifecycleEvent: Sendable, Hashable {
    public var token: String
    /// The simulator's event: `renew`, `grace_period`, `hold`, `recover`, `pause`, `resume`, `cancel`, `revoke`,
    /// `refund`, `chargeback`, `upgrade`, `expire`.
    public var event: String
    /// Extra JSON members, e.g. `"refund": true`.
    public var extra = ""

    /// Whether the event's notification is never dropped: nothing the run models tells the backend of it otherwise
    /// (a replacement's new token and a pending purchase's completion, which the app itself would also send; a refund
    /// review, which only its notification announces).
    public var isAnnouncedOnlyByItsNotification: Bool {
        event == "upgrade" || event == "chargeback" || event == "pending_complete"
    }

    public var body: String {
        "{\"purchase_token\": \"\(token)\", \"event\": \"\(event)\"" + (extra.isEmpty ? "" : ", " + extra) + "}"
    }
}

/// Which Play lifecycle events a run triggers: a seeded plan over the granted Play purchases of each product type,
/// one scenario (a short sequence of events) per purchase, so the expected truth is the simulator's own.
public struct ChaosPlayLifecyclePlan: Sendable {
    public private(set) var events: [ChaosPlayLifecycleEvent] = []
    /// Purchase tokens chosen, with their scenario name.
    public private(set) var scenarios: [String: String] = [:]

    /// The grace period the run gives a subscription: one period (``ChaosPlayApp/subscriptionPeriod``) from the event,
    /// so it ends after the paid period, as Google's does (the simulator starts it at the event, not at the period's
    /// end), and before the period a recovery after it starts.
    public static let gracePeriodSeconds = ChaosPlayApp.subscriptionPeriod

    /// - Parameters:
    ///   - purchases: granted purchase tokens and their product type.
    ///   - count: how many purchases get a scenario.
    ///   - pending: purchases a verification job found pending: each is completed (`pending_complete`).
    public init(
        purchases: [(token: String, type: ProductType)], count: Int, seed: UInt64, pending: [String] = []
    ) {
        var random = SplitMix64(seed: seed ^ 0x91A7_11FE)
        var byType: [ProductType: [String]] = [:]
        for (token, type) in purchases { byType[type, default: []].append(token) }
        // Round robin over the product types, so the subscriptions are not drowned by the one-time purchases.
        var queues = ProductType.allCases.compactMap { type in
            byType[type].map { tokens in (type, tokens.sorted().shuffled(using: &random)) }
        }
        var chosen: [(token: String, type: ProductType)] = []
        while chosen.count < count, queues.contains(where: { !$0.1.isEmpty }) {
            for index in queues.indices where chosen.count < count && !queues[index].1.isEmpty {
                chosen.append((queues[index].1.removeFirst(), queues[index].0))
            }
        }
        var perType: [ProductType: Int] = [:]
        var sequences: [[ChaosPlayLifecycleEvent]] = pending.map { token in
            scenarios[token] = "pending_completed"
            return [ChaosPlayLifecycleEvent(token: token, event: "pending_complete")]
        }
        for (token, type) in chosen {
            let turn = perType[type, default: 0]
            perType[type] = turn + 1
            let (name, steps) = Self.scenario(type: type, turn: turn, token: token)
            scenarios[token] = name
            sequences.append(steps)
        }
        // Interleaved: the first step of every scenario, then the second, so events about one purchase are apart in
        // time and their notifications race the others'.
        let longest = sequences.map(\.count).max() ?? 0
        for step in 0..<longest {
            for sequence in sequences where step < sequence.count { events.append(sequence[step]) }
        }
    }

    /// The scenarios of one product type, the single events first so a short run has each of them.
    static func scenario(type: ProductType, turn: Int, token: String) -> (String, [ChaosPlayLifecycleEvent]) {
        func event(_ name: String, _ extra: String = "") -> ChaosPlayLifecycleEvent {
            ChaosPlayLifecycleEvent(token: token, event: name, extra: extra)
        }
        let grace = event("grace_period", "\"grace_period_s\": \(gracePeriodSeconds)")
        let options: [(String, [ChaosPlayLifecycleEvent])]
        switch type {
        case .autoRenewable:
            options = [
                ("renew", [event("renew")]),
                ("grace_period", [grace]),
                ("hold", [event("hold")]),
                ("pause", [event("pause")]),
                ("cancel", [event("cancel")]),
                // With its latest order voided: a revocation Google also lists as a voided purchase.
                ("revoke", [event("revoke", "\"refund\": true")]),
                ("refund", [event("refund")]),
                ("chargeback", [event("chargeback")]),
                ("upgrade", [event("upgrade")]),
                ("grace_recover", [grace, event("recover")]),
                ("pause_resume", [event("pause"), event("resume")]),
                ("hold_recover", [event("hold"), event("recover")]),
                ("expire", [event("expire")]),
                ("renew_twice", [event("renew"), event("renew")]),
            ]
        case .consumable:
            options = [("chargeback", [event("chargeback")]), ("refund", [event("refund")])]
        default:
            options = [
                ("refund", [event("refund")]), ("chargeback", [event("chargeback")]), ("revoke", [event("revoke")]),
            ]
        }
        return options[turn % options.count]
    }
}

/// The Play lifecycle's figures in the run's summary (`play_lifecycle`).
public struct ChaosPlayLifecycleReport: Sendable, Codable, Hashable {
    /// Purchases given a lifecycle scenario, per scenario.
    public var scenarios: [String: Int] = [:]
    /// Lifecycle requests the simulator accepted, and those it refused.
    public var eventsTriggered = 0
    public var eventsRefused = 0
    /// Purchase tokens compared with the truth (the scenarios' and the replacements' new ones).
    public var purchasesCompared = 0
    /// The Play simulator's push summary (`GET /sim/pushes`).
    public var pushesPublished = 0
    public var pushesAcknowledged = 0
    public var pushesDropped = 0
    public var pushesDuplicated = 0
    public var pushAttempts = 0
    /// Refund reviews opened, and those answered exactly once in time.
    public var refundReviews = 0
    public var refundReviewsAnswered = 0
    /// The reconciler's Google Play work, summed over its processes (scraped before each kill and at the end):
    /// voided-purchases pages, voided purchases found, re-read jobs published, and calls of its quota share spent.
    public var voidedPages = 0
    public var voidedFound = 0
    public var rereads = 0
    public var quotaSpent = 0
    /// The reconciler's share: calls per wall-clock minute.
    public var quotaPerMinute = 0
    /// The Play subscriptions within the reconciler's re-read window when the events ended: a pass over them all at
    /// the share is the longest a subscription whose push was lost waits for its re-read, so the settle wait grows
    /// by it.
    public var rereadBacklog = 0
    /// From the first lifecycle event until the ledger agreed with the truth (nil: it never did within the settle
    /// timeout).
    public var convergenceSeconds: Double?

    enum CodingKeys: String, CodingKey {
        case scenarios, rereads
        case eventsTriggered = "events_triggered"
        case eventsRefused = "events_refused"
        case purchasesCompared = "purchases_compared"
        case pushesPublished = "pushes_published"
        case pushesAcknowledged = "pushes_acknowledged"
        case pushesDropped = "pushes_dropped"
        case pushesDuplicated = "pushes_duplicated"
        case pushAttempts = "push_attempts"
        case refundReviews = "refund_reviews"
        case refundReviewsAnswered = "refund_reviews_answered"
        case voidedPages = "voided_pages"
        case voidedFound = "voided_found"
        case quotaSpent = "quota_spent"
        case quotaPerMinute = "quota_per_minute"
        case rereadBacklog = "reread_backlog"
        case convergenceSeconds = "convergence_s"
    }

    public init() {}
}
