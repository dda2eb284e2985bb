import CodedErrors
import Foundation
import Messages

/// What happens to a purchase after it was bought (docs/PLAY-SIMULATOR.md, "The life of a purchase").
public enum PlayLifecycleEvent: String, Sendable, CaseIterable {
    /// A subscription renews: the next order, a period more.
    case renew
    /// A renewal payment failed: access continues through the grace period.
    case gracePeriod = "grace_period"
    /// Account hold: access ends until the payment succeeds.
    case hold
    /// The payment succeeded after all, in the grace period or on hold: the next order, a period from now.
    case recover
    /// The user's pause begins now.
    case pause
    /// A paused subscription resumes: the next order, a period from now.
    case resume
    /// The user turns auto-renew off: access until the period's end.
    case cancel
    /// The user turns auto-renew back on before the period ended.
    case restart
    /// The developer takes access away now (`refund: true` also refunds the latest order).
    case revoke
    /// Google refunds the order (one-time products: `quantity` for a quantity-based partial refund); a subscription's
    /// access ends now.
    case refund
    /// A chargeback Google asks the developer about: a refund review with 24 hours to answer.
    case chargeback
    /// Google decides the chargeback (`approve`: refunded, else kept).
    case chargebackResolve = "chargeback_resolve"
    /// The user switches plan: a new purchase token linked to this one, which ends now.
    case upgrade
    case downgrade
    /// A pending purchase's payment arrives.
    case pendingComplete = "pending_complete"
    /// A pending purchase's payment never arrives.
    case pendingCancel = "pending_cancel"
    /// The subscription ends now.
    case expire
}

/// The details of one lifecycle event; each applies to the events its comment names.
public struct PlayLifecycleOptions: Sendable {
    /// `grace_period`: how long access continues. Default: 7 days.
    public var gracePeriodSeconds: TimeInterval = 7 * 86_400
    /// `pause`: how long until the subscription resumes by itself. Default: one period.
    public var pauseSeconds: TimeInterval?
    /// `revoke`: refund the latest order too. Default: false.
    public var refund = false
    /// `refund` of a one-time product: units refunded (a quantity-based partial refund when fewer than bought).
    /// Default: all that are left.
    public var quantity: Int?
    /// `chargeback_resolve`: Google refunds. Default: true.
    public var approve = true
    /// `upgrade`, `downgrade`: the new subscription's product, base plan and period. Default: the old one's.
    public var productId: String?
    public var basePlanId: String?
    public var periodSeconds: TimeInterval?
    /// Push faults for the notifications this event publishes.
    public var push = PlayPushOptions()

    public init() {}
}

/// What a lifecycle event did.
public struct PlayLifecycleResult: Sendable {
    /// The purchase after the event.
    public var purchase: PlayPurchase
    /// `upgrade`, `downgrade`: the new subscription and its signed purchase data.
    public var replacement: PlayPurchase?
    public var replacementSigned: PlaySignedPurchase?
    /// `pending_complete`: the new signed purchase data.
    public var signed: PlaySignedPurchase?
    /// `chargeback`: the review opened.
    public var review: PlayRefundReview?
    /// The message ids of the notifications published (none without a push endpoint).
    public var messageIds: [String] = []
}

extension PlaySimulator {
    /// Applies `event` to the purchase with `purchaseToken` and publishes the notifications Google sends for it.
    /// Throws `notFound` for an unknown token and `conflict` when the purchase is in no state for the event.
    @discardableResult
    public func lifecycle(
        _ purchaseToken: String, _ event: PlayLifecycleEvent, options: PlayLifecycleOptions = .init()
    ) throws -> PlayLifecycleResult {
        let now = clock.now()
        var notifications: [PlayDeveloperNotification.Content] = []
        var result: PlayLifecycleResult
        func subscription(_ type: PlaySubscriptionNotificationType) {
            notifications.append(.subscription(type, purchaseToken: purchaseToken))
        }
        func require(
            _ purchase: PlayPurchase, subscription: Bool?, _ states: Set<PlayPurchaseState>
        ) throws(PlaySimulatorError) {
            if let subscription, purchase.isSubscription != subscription {
                throw PlaySimulatorError(
                    .conflict, "\(event.rawValue) applies to \(subscription ? "subscriptions" : "one-time products")")
            }
            let state = purchase.state(now: now)
            guard states.contains(state) else {
                throw PlaySimulatorError(.conflict, "\(event.rawValue) does not apply to a \(state.rawValue) purchase")
            }
        }
        /// An event of a subscription in one of `states`: `change` applied, Google's `type` published.
        func subscriptionEvent(
            _ states: Set<PlayPurchaseState>, _ type: PlaySubscriptionNotificationType,
            _ change: (inout PlayPurchase) throws(PlaySimulatorError) -> Void
        ) throws(PlaySimulatorError) -> PlayLifecycleResult {
            let purchase = try registry.update(purchaseToken) { (purchase) throws(PlaySimulatorError) in
                try require(purchase, subscription: true, states)
                try change(&purchase)
            }
            subscription(type)
            return PlayLifecycleResult(purchase: purchase)
        }
        let live: Set<PlayPurchaseState> = [.active, .canceled, .inGracePeriod, .onHold, .paused]
        switch event {
        case .renew:
            result = try subscriptionEvent([.active, .expired], .renewed) { purchase in
                let from = max(purchase.expiryTime ?? now, now)
                purchase.expiryTime = from.addingTimeInterval(purchase.periodSeconds)
                purchase.renewals += 1
                purchase.autoRenewEnabled = true
                purchase.userCanceledAt = nil
            }
        case .gracePeriod:
            guard options.gracePeriodSeconds.isFinite, (0...(60 * 86_400)).contains(options.gracePeriodSeconds) else {
                throw PlaySimulatorError(.invalidRequest, "grace_period_s must be 0 to 5184000 (60 days)")
            }
            result = try subscriptionEvent([.active], .inGracePeriod) { purchase in
                purchase.gracePeriodEnd = now.addingTimeInterval(options.gracePeriodSeconds)
                purchase.expiryTime = purchase.gracePeriodEnd
            }
        case .hold:
            result = try subscriptionEvent([.active, .inGracePeriod, .onHold], .onHold) {
                (purchase) throws(PlaySimulatorError) in
                guard purchase.onHoldSince == nil else {
                    throw PlaySimulatorError(.conflict, "the subscription is already on hold")
                }
                // A grace period that ran out put the subscription on hold at its end.
                let since = purchase.gracePeriodEnd.map { min($0, now) } ?? now
                purchase.onHoldSince = since
                purchase.gracePeriodEnd = nil
                purchase.expiryTime = since
            }
        case .recover:
            result = try subscriptionEvent([.inGracePeriod, .onHold], .recovered) { purchase in
                purchase.gracePeriodEnd = nil
                purchase.onHoldSince = nil
                purchase.renewals += 1
                purchase.expiryTime = now.addingTimeInterval(purchase.periodSeconds)
                purchase.autoRenewEnabled = true
            }
        case .pause:
            let seconds = options.pauseSeconds
            if let seconds, !(seconds.isFinite && (60...(400 * 86_400)).contains(seconds)) {
                throw PlaySimulatorError(.invalidRequest, "pause_s must be 60 seconds to 400 days")
            }
            result = try subscriptionEvent([.active], .paused) { purchase in
                purchase.pausedAt = now
                purchase.autoResumeTime = now.addingTimeInterval(seconds ?? purchase.periodSeconds)
                purchase.expiryTime = now
            }
        case .resume:
            // Google reports a resumed subscription as renewed.
            result = try subscriptionEvent([.paused], .renewed) { purchase in
                purchase.pausedAt = nil
                purchase.autoResumeTime = nil
                purchase.renewals += 1
                purchase.expiryTime = now.addingTimeInterval(purchase.periodSeconds)
            }
        case .cancel:
            result = try subscriptionEvent([.active], .canceled) { purchase in
                purchase.userCanceledAt = now
                purchase.autoRenewEnabled = false
            }
        case .restart:
            result = try subscriptionEvent([.canceled], .restarted) { purchase in
                purchase.userCanceledAt = nil
                purchase.autoRenewEnabled = true
            }
        case .revoke, .refund:
            let byDeveloper = event == .revoke
            let refunds = event == .refund || options.refund
            var voidedQuantity: Int?
            let purchase = try registry.update(purchaseToken) { (purchase) throws(PlaySimulatorError) in
                if purchase.isSubscription {
                    try require(purchase, subscription: nil, live)
                    purchase.revokedAt = now
                    purchase.revokedByDeveloper = byDeveloper
                    purchase.autoRenewEnabled = false
                    if refunds { purchase.voidedAt = now }
                } else {
                    try require(purchase, subscription: nil, [.purchased])
                    let left = purchase.quantity - purchase.refundedQuantity
                    let quantity = options.quantity ?? left
                    guard (1...left).contains(quantity) else {
                        throw PlaySimulatorError(.invalidRequest, "quantity must be 1...\(left)")
                    }
                    if quantity < purchase.quantity { voidedQuantity = quantity }
                    purchase.refundedQuantity += quantity
                    if purchase.refundedQuantity == purchase.quantity { purchase.voidedAt = now }
                }
            }
            result = .init(purchase: purchase)
            if purchase.isSubscription { subscription(.revoked) }
            if refunds || !purchase.isSubscription {
                notifications.append(
                    void(
                        purchase, orderId: purchase.latestOrderId ?? "", now: now, source: byDeveloper ? 1 : 2,
                        reason: 0, quantity: voidedQuantity))
            }
        case .chargeback:
            let purchase = try registry.update(purchaseToken) { (purchase) throws(PlaySimulatorError) in
                try require(purchase, subscription: nil, live.union([.purchased, .expired]))
            }
            guard let orderId = purchase.latestOrderId else { throw PlaySimulatorError(.conflict, "no order") }
            if let open = reviews.review(orderId: orderId), open.refunded == nil {
                throw PlaySimulatorError(.conflict, "the order already has a refund review")
            }
            let review = PlayRefundReview(
                pendingRefundToken: "prt." + Base64URL.encode(Data((0..<36).map { _ in UInt8.random(in: 0...255) })),
                packageName: purchase.packageName, purchaseToken: purchaseToken, orderId: orderId, createdAt: now,
                deadline: now.addingTimeInterval(Self.refundReviewWindow))
            reviews.add(review)
            result = .init(purchase: purchase, review: review)
            notifications.append(
                .pendingRefundReview(
                    purchaseToken: purchaseToken, orderId: orderId, pendingRefundToken: review.pendingRefundToken,
                    productType: purchase.isSubscription ? 1 : 2, deadline: review.deadline))
        case .chargebackResolve:
            guard let known = registry.purchase(purchaseToken) else {
                throw PlaySimulatorError(.notFound, "no such purchase token")
            }
            guard let review = reviews.all().last(where: { $0.purchaseToken == purchaseToken && $0.refunded == nil })
            else { throw PlaySimulatorError(.conflict, "the purchase has no undecided chargeback") }
            reviews.update(orderId: review.orderId) { $0?.refunded = options.approve }
            var purchase = known
            if options.approve {
                purchase = try registry.update(purchaseToken) { purchase in
                    if purchase.isSubscription {
                        purchase.revokedAt = purchase.revokedAt ?? now
                        purchase.autoRenewEnabled = false
                    } else {
                        purchase.refundedQuantity = purchase.quantity
                    }
                    purchase.voidedAt = now
                }
                if purchase.isSubscription { subscription(.revoked) }
                notifications.append(
                    void(purchase, orderId: review.orderId, now: now, source: 2, reason: 7, quantity: nil))
            }
            result = .init(purchase: purchase, review: reviews.review(orderId: review.orderId))
        case .upgrade, .downgrade:
            guard let old = registry.purchase(purchaseToken) else {
                throw PlaySimulatorError(.notFound, "no such purchase token")
            }
            try require(old, subscription: true, [.active, .canceled, .inGracePeriod])
            var request = PlayMintRequest(
                packageName: old.packageName, productId: options.productId ?? old.productId, type: .autoRenewable)
            request.basePlanId = options.basePlanId ?? old.basePlanId
            request.periodSeconds = options.periodSeconds ?? old.periodSeconds
            request.obfuscatedAccountId = old.obfuscatedAccountId
            request.obfuscatedProfileId = old.obfuscatedProfileId
            request.regionCode = old.regionCode
            request.isTest = old.isTest
            request.linkedPurchaseToken = purchaseToken
            let replacement = try registry.mint(request, now: now)
            result = .init(
                purchase: registry.purchase(purchaseToken) ?? old, replacement: replacement,
                replacementSigned: try PlayAPIAnswers.sign(replacement, keys: licensingKeys))
            notifications.append(.subscription(.purchased, purchaseToken: replacement.purchaseToken))
        case .pendingComplete:
            let purchase = try registry.completePending(purchaseToken, now: now)
            result = .init(purchase: purchase, signed: try PlayAPIAnswers.sign(purchase, keys: licensingKeys))
            notifications.append(Self.purchasedNotification(purchase))
        case .pendingCancel:
            let purchase = try registry.update(purchaseToken) { (purchase) throws(PlaySimulatorError) in
                guard purchase.completedAt == nil, purchase.pendingCancelledAt == nil else {
                    throw PlaySimulatorError(.conflict, "the purchase is not pending")
                }
                purchase.pendingCancelledAt = now
            }
            result = .init(purchase: purchase)
            notifications.append(
                purchase.isSubscription
                    ? .subscription(.pendingPurchaseCanceled, purchaseToken: purchaseToken)
                    : .oneTimeProduct(.canceled, purchaseToken: purchaseToken, sku: purchase.productId))
        case .expire:
            result = .init(
                purchase: try registry.update(purchaseToken) { (purchase) throws(PlaySimulatorError) in
                    try require(purchase, subscription: true, live)
                    purchase.gracePeriodEnd = nil
                    purchase.onHoldSince = nil
                    purchase.pausedAt = nil
                    purchase.autoResumeTime = nil
                    purchase.autoRenewEnabled = false
                    purchase.expiryTime = min(purchase.expiryTime ?? now, now)
                })
            subscription(.expired)
        }
        let package = result.purchase.packageName
        for content in notifications {
            if let record = pushes.publish(
                PlayDeveloperNotification(packageName: package, eventTime: now, content: content),
                options: options.push)
            {
                result.messageIds.append(record.messageId)
            }
        }
        return result
    }

    /// Records the voiding of one of the purchase's orders and returns the notification Google sends for it.
    private func void(
        _ purchase: PlayPurchase, orderId: String, now: Date, source: Int, reason: Int, quantity: Int?
    ) -> PlayDeveloperNotification.Content {
        voided.add { key in
            PlayVoidedPurchase(
                key: key, packageName: purchase.packageName, purchaseToken: purchase.purchaseToken, orderId: orderId,
                purchaseTime: purchase.purchaseTime, voidedTime: now, voidedSource: source, voidedReason: reason,
                voidedQuantity: quantity, isSubscription: purchase.isSubscription)
        }
        return .voidedPurchase(
            purchaseToken: purchase.purchaseToken, orderId: orderId, productType: purchase.isSubscription ? 1 : 2,
            refundType: quantity == nil ? 1 : 2)
    }

    /// `SUBSCRIPTION_PURCHASED` or `ONE_TIME_PRODUCT_PURCHASED`.
    static func purchasedNotification(_ purchase: PlayPurchase) -> PlayDeveloperNotification.Content {
        purchase.isSubscription
            ? .subscription(.purchased, purchaseToken: purchase.purchaseToken)
            : .oneTimeProduct(.purchased, purchaseToken: purchase.purchaseToken, sku: purchase.productId)
    }

    /// Publishes a `testNotification` for `packageName`, as the Play Console's test button.
    @discardableResult
    public func sendTestNotification(packageName: String, push: PlayPushOptions = .init()) throws -> String? {
        guard PlayIdentifiers.isName(packageName) else {
            throw PlaySimulatorError(.invalidRequest, "package_name must be 1-200 of [A-Za-z0-9._-]")
        }
        return pushes.publish(
            PlayDeveloperNotification(packageName: packageName, eventTime: clock.now(), content: .test), options: push)?
            .messageId
    }

    /// Sends every push due now and awaits the answers (tests with a manual clock drive deliveries with this; the
    /// serving loop calls it otherwise). Returns how many messages were sent.
    @discardableResult
    public func deliverDue() async -> Int { await pushes.deliverDue() }

    /// Every message published, with its attempts.
    public func pushRecords() -> [PlayPushRecord] { pushes.records() }

    /// Every refund review, with its answers.
    public func refundReviews() -> [PlayRefundReview] { reviews.all() }

    /// Replaces the push fault plan.
    public func setPushFaults(_ plan: PlayPushFaultPlan) throws { try pushes.setFaults(plan) }

    /// Changes the push configuration (endpoint, audience, backoff…) while running.
    public func configurePush(_ change: (inout PlayPushConfiguration) -> Void) { pushes.configure(change) }

    /// The JWK set of the key that signs the pushes' OIDC tokens (`GET /oauth2/v3/certs`).
    public func jwks() -> [String: Any] { pushes.jwks().body }

    /// Every purchase's truth, for one package or all, oldest first.
    public func allTruth(packageName: String? = nil) -> [[String: Any]] {
        let now = clock.now()
        return registry.all().filter { packageName == nil || $0.packageName == packageName }
            .sorted { ($0.purchaseTime, $0.purchaseToken) < ($1.purchaseTime, $1.purchaseToken) }
            .map { PlayAPIAnswers.truth($0, now: now) }
    }
}
