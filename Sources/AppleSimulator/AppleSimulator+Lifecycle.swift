import CodedErrors
import Foundation
import Messages

/// A purchase's life after the purchase: each event changes the simulator's truth as Apple's would and sends the
/// notification Apple sends for it (when a notification URL is set). Also behind `POST /sim/...`.
extension AppleSimulator {
    static let dayMs: Int64 = 86_400_000
    /// Apple's `consumptionRequestReason` values.
    static let consumptionRequestReasons: Set<String> = [
        "UNINTENDED_PURCHASE", "FULFILLMENT_ISSUE", "UNSATISFIED_WITH_PURCHASE", "LEGAL", "OTHER",
    ]

    var nowMs: Int64 { AppleDates.nowMs(configuration.now()) }

    // MARK: Notifications

    /// SUBSCRIBED (INITIAL_BUY) for a new subscription, DID_RENEW for a renewal minted into a family, and
    /// ONE_TIME_CHARGE for every other product type, as Apple sends them.
    func notifyPurchase(_ transaction: SimulatedTransaction, isRenewal: Bool) throws {
        if transaction.isSubscription {
            try notify(isRenewal ? "DID_RENEW" : "SUBSCRIBED", isRenewal ? nil : "INITIAL_BUY", about: transaction)
        } else {
            try notify("ONE_TIME_CHARGE", nil, about: transaction)
        }
    }

    /// Sends a notification about `transaction`; for a subscription it carries the family's renewal info and status.
    @discardableResult
    func notify(
        _ type: String, _ subtype: String?, about transaction: SimulatedTransaction, reason: String? = nil
    ) throws -> NotificationDispatcher.Record? {
        guard notifications.target != nil else { return nil }
        var renewal: (latest: SimulatedTransaction, firstPurchaseMs: Int64)?
        if transaction.isSubscription {
            let family = registry.family(transaction.originalTransactionId)
            if let latest = family.last, let first = family.first { renewal = (latest, first.purchaseDateMs) }
        }
        return try notifications.notify(
            SimulatedNotification.Event(
                type: type, subtype: subtype, transaction: transaction, renewal: renewal,
                consumptionRequestReason: reason, bundleId: transaction.bundleId,
                environment: transaction.environment))
    }

    /// Sends a TEST notification and returns its token (`<uuid>_<signedDate>`, as Apple's look). Throws when no
    /// notification URL is set (Apple answers 4040007 then).
    public func sendTestNotification(bundleId: String, environment: AppleEnvironment) throws -> String {
        guard notifications.target != nil else {
            throw AppleSimulatorError(.conflict, "no notification URL is set")
        }
        let token = "\(UUID().uuidString.lowercased())_\(nowMs)"
        try notifications.notify(
            SimulatedNotification.Event(type: "TEST", bundleId: bundleId, environment: environment), testToken: token)
        return token
    }

    /// Sets (or, with nil, clears) the notification URL. Only `http` and `https` URLs are accepted.
    public func setNotificationTarget(_ url: String?) throws {
        if let url {
            guard let parsed = URL(string: url), ["http", "https"].contains(parsed.scheme?.lowercased() ?? ""),
                parsed.host?.isEmpty == false, url.utf8.count <= 2048
            else { throw AppleSimulatorError(.invalidRequest, "url must be an http or https URL") }
        }
        notifications.setTarget(url)
    }

    // MARK: Events on one transaction

    /// REFUND_DECLINED: Apple refused the customer's refund request; nothing changes.
    public func declineRefund(transactionId: String) throws -> SimulatedTransaction {
        let transaction = try known(transactionId)
        try notify("REFUND_DECLINED", nil, about: transaction)
        return transaction
    }

    /// REFUND_REVERSED: Apple undid a refund, so the purchase counts again.
    public func reverseRefund(transactionId: String) throws -> SimulatedTransaction {
        let reversed = try change(transactionId) { transaction in
            guard transaction.revocationDateMs != nil else {
                throw AppleSimulatorError(.conflict, "the transaction was not refunded")
            }
            transaction.revocationDateMs = nil
            transaction.revocationReason = nil
            transaction.revocationType = nil
            transaction.revocationPercentage = nil
        }
        try notify("REFUND_REVERSED", nil, about: reversed)
        return reversed
    }

    /// REVOKE: a family-sharing member lost access (the member left the family, or the purchaser stopped sharing):
    /// the member's transaction is revoked now with `revocationType` `FAMILY_REVOKE` and reason 0, as Apple says of
    /// a member leaving; the purchaser's and the other members' transactions are untouched.
    public func revoke(transactionId: String) throws -> SimulatedTransaction {
        let now = nowMs
        let revoked = try change(transactionId) { transaction in
            guard transaction.revocationDateMs == nil else {
                throw AppleSimulatorError(.conflict, "the transaction is already revoked")
            }
            transaction.revocationDateMs = now
            transaction.revocationReason = 0
            transaction.revocationType = "FAMILY_REVOKE"
            transaction.revocationPercentage = nil
        }
        try notify("REVOKE", nil, about: revoked)
        return revoked
    }

    /// Family Sharing: the purchaser shares `transactionId` (an auto-renewable subscription or a non-consumable, the
    /// products Apple lets a family share) with a family member, who gets a transaction of their own, as Apple's
    /// members do: a new transaction id and original transaction id, the purchaser's product and period,
    /// `inAppOwnershipType` `FAMILY_SHARED`. Sent as the purchase's own notification (SUBSCRIBED / INITIAL_BUY or
    /// ONE_TIME_CHARGE) about the member's transaction. Returns the member's transaction.
    public func shareWithFamily(transactionId: String) throws -> SimulatedTransaction {
        let purchaser = try known(transactionId)
        guard purchaser.inAppOwnershipType != "FAMILY_SHARED" else {
            throw AppleSimulatorError(.conflict, "a family member's transaction cannot be shared again")
        }
        guard purchaser.revocationDateMs == nil else {
            throw AppleSimulatorError(.conflict, "the transaction is revoked")
        }
        guard purchaser.isSubscription || purchaser.productType == "Non-Consumable" else {
            throw AppleSimulatorError(
                .invalidRequest, "only auto-renewable subscriptions and non-consumables can be shared")
        }
        let now = nowMs
        let minted = try registry.mint(
            MintRequest(
                bundleId: purchaser.bundleId, productId: purchaser.productId, format: .signedTransaction,
                environment: purchaser.environment, expiresDateMs: purchaser.expiresDateMs, purchaseDateMs: now,
                productType: purchaser.productType),
            nowMs: now)
        let member =
            try registry.update(minted.transactionId) {
                $0.inAppOwnershipType = "FAMILY_SHARED"
                $0.sharedFromTransactionId = purchaser.transactionId
                $0.appAccountToken = nil
            } ?? minted
        try notifyPurchase(member, isRenewal: false)
        return member
    }

    /// CONSUMPTION_REQUEST: the customer asked for a refund; Apple asks the developer for consumption information.
    public func requestConsumption(
        transactionId: String, reason: String = "UNINTENDED_PURCHASE"
    ) throws
        -> SimulatedTransaction
    {
        guard Self.consumptionRequestReasons.contains(reason) else {
            throw AppleSimulatorError(
                .invalidRequest,
                "reason must be one of \(Self.consumptionRequestReasons.sorted().joined(separator: ", "))")
        }
        let transaction = try known(transactionId)
        try notify("CONSUMPTION_REQUEST", nil, about: transaction, reason: reason)
        return transaction
    }

    // MARK: Events on a subscription

    /// DID_RENEW: a new transaction in the family, for the same period as the last one (or `days`), starting now;
    /// subtype BILLING_RECOVERY when the subscription was in billing retry, and SUBSCRIBED / RESUBSCRIBE instead
    /// when it had expired. Returns the new transaction.
    public func renew(originalTransactionId: String, days: Int? = nil) throws -> SimulatedTransaction {
        let latest = try activeSubscription(originalTransactionId, allowExpired: true)
        if let days, !(1...366).contains(days) {
            throw AppleSimulatorError(.invalidRequest, "days must be 1...366")
        }
        let now = nowMs
        let lastExpiry = latest.expiresDateMs ?? now
        let period = days.map { Int64($0) * Self.dayMs } ?? max(lastExpiry - latest.purchaseDateMs, Self.dayMs)
        // A renewal before a failing period's end cancels the failure: it is a plain renewal.
        let recovered = latest.inBillingRetry(nowMs: now)
        // A subscription that had lapsed (not in billing retry) comes back as Apple's RESUBSCRIBE.
        let lapsed = !recovered && lastExpiry <= now
        if latest.billingRetryStartMs != nil {
            _ = try registry.update(latest.transactionId) {
                $0.billingRetryStartMs = nil
                $0.gracePeriodExpiresDateMs = nil
            }
        }
        var renewal = try registry.mint(
            MintRequest(
                bundleId: latest.bundleId, productId: latest.productId, format: .signedTransaction,
                environment: latest.environment, expiresDateMs: max(lastExpiry, now) + period,
                originalTransactionId: originalTransactionId, purchaseDateMs: now, productType: latest.productType),
            nowMs: now)
        if latest.appAccountToken != nil || latest.autoRenewStatus != nil || latest.priceIncreaseStatus != nil {
            renewal =
                try registry.update(renewal.transactionId) {
                    $0.appAccountToken = latest.appAccountToken
                    $0.autoRenewStatus = latest.autoRenewStatus
                    $0.priceIncreaseStatus = latest.priceIncreaseStatus
                } ?? renewal
        }
        if lapsed {
            try notify("SUBSCRIBED", "RESUBSCRIBE", about: renewal)
        } else {
            try notify("DID_RENEW", recovered ? "BILLING_RECOVERY" : nil, about: renewal)
        }
        return renewal
    }

    /// EXPIRED: the subscription ends at its period's end, as Apple's does; the expiry never moves. While the
    /// period runs, auto-renew goes off now (DID_CHANGE_RENEWAL_STATUS / AUTO_RENEW_DISABLED) and EXPIRED / VOLUNTARY
    /// is sent once the period has ended on the simulator's clock; a period already over (in billing retry, or
    /// ended) expires now: EXPIRED / BILLING_RETRY when billing retry ran out, VOLUNTARY otherwise.
    public func expire(originalTransactionId: String) throws -> SimulatedTransaction {
        let latest = try activeSubscription(originalTransactionId, allowExpired: true)
        let now = nowMs
        let inRetry = latest.inBillingRetry(nowMs: now)
        if !inRetry, let end = latest.expiresDateMs, end > now {
            let cancelled = try change(latest.transactionId) { transaction in
                transaction.autoRenewStatus = 0
                transaction.billingRetryStartMs = nil
                transaction.gracePeriodExpiresDateMs = nil
            }
            try notify("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", about: cancelled)
            atPeriodEnd(of: cancelled) { simulator, current in
                // Renewed, refunded or turned back on meanwhile: nothing expires.
                guard current.autoRenewStatus == 0, current.billingRetryStartMs == nil else { return }
                try simulator.notify("EXPIRED", "VOLUNTARY", about: current)
            }
            return cancelled
        }
        let expired = try change(latest.transactionId) { transaction in
            transaction.billingRetryStartMs = nil
            transaction.gracePeriodExpiresDateMs = nil
            if !inRetry { transaction.autoRenewStatus = 0 }
        }
        try notify("EXPIRED", inRetry ? "BILLING_RETRY" : "VOLUNTARY", about: expired)
        return expired
    }

    /// DID_FAIL_TO_RENEW: the renewal charge at the end of the current period fails, as Apple's would; the expiry
    /// never moves. Billing retry (with a grace period of `graceDays` past the period's end, subtype GRACE_PERIOD,
    /// when above 0) starts at the period's end on the simulator's clock, and the notification is sent then; until
    /// then the subscription is active.
    public func startBillingRetry(originalTransactionId: String, graceDays: Int = 0) throws -> SimulatedTransaction {
        guard (0...28).contains(graceDays) else {
            throw AppleSimulatorError(.invalidRequest, "grace_days must be 0...28")
        }
        let latest = try activeSubscription(originalTransactionId, allowExpired: false)
        let end = latest.expiresDateMs ?? nowMs
        let failing = try change(latest.transactionId) { transaction in
            transaction.billingRetryStartMs = end
            transaction.gracePeriodExpiresDateMs = graceDays > 0 ? end + Int64(graceDays) * Self.dayMs : nil
        }
        atPeriodEnd(of: failing) { simulator, current in
            // Renewed, expired or refunded meanwhile: the charge did not fail.
            guard current.billingRetryStartMs == end else { return }
            try simulator.notify("DID_FAIL_TO_RENEW", graceDays > 0 ? "GRACE_PERIOD" : nil, about: current)
        }
        return failing
    }

    /// Runs `event` once `transaction`'s period has ended on the simulator's clock, with the transaction as it is
    /// then, if it is still its subscription's latest transaction and not revoked. Kept in memory: a simulator
    /// restarted before the period's end does not send it.
    private func atPeriodEnd(
        of transaction: SimulatedTransaction,
        _ event: @escaping @Sendable (AppleSimulator, SimulatedTransaction) throws -> Void
    ) {
        let end = transaction.expiresDateMs ?? nowMs
        let id = transaction.transactionId
        let original = transaction.originalTransactionId
        // A scheduler may wake a millisecond early (rounding): it waits again for what is left.
        @Sendable func wait(_ simulator: AppleSimulator) {
            let left = end - simulator.nowMs
            simulator.notifications.scheduleEvent(afterSeconds: Double(max(0, left)) / 1000) {
                guard simulator.nowMs >= end else { return wait(simulator) }
                guard let current = simulator.registry.transaction(id),
                    simulator.registry.family(original).last?.transactionId == id, current.revocationDateMs == nil
                else { return }
                try? event(simulator, current)
            }
        }
        wait(self)
    }

    /// RENEWAL_EXTENDED: the developer extended the renewal date by `days` (Apple allows 1...90).
    public func extend(originalTransactionId: String, days: Int) throws -> SimulatedTransaction {
        guard (1...90).contains(days) else { throw AppleSimulatorError(.invalidRequest, "days must be 1...90") }
        let latest = try activeSubscription(originalTransactionId, allowExpired: false)
        guard latest.billingRetryStartMs == nil else {
            throw AppleSimulatorError(.conflict, "a subscription in (or heading for) billing retry cannot be extended")
        }
        let extended = try change(latest.transactionId) { transaction in
            transaction.expiresDateMs = (transaction.expiresDateMs ?? 0) + Int64(days) * Self.dayMs
        }
        try notify("RENEWAL_EXTENDED", nil, about: extended)
        return extended
    }

    /// PRICE_INCREASE: subtype PENDING until the customer consents, ACCEPTED after (renewal info's
    /// `priceIncreaseStatus` 0 or 1).
    public func priceIncrease(originalTransactionId: String, accepted: Bool) throws -> SimulatedTransaction {
        let latest = try activeSubscription(originalTransactionId, allowExpired: false)
        let changed = try change(latest.transactionId) { $0.priceIncreaseStatus = accepted ? 1 : 0 }
        try notify("PRICE_INCREASE", accepted ? "ACCEPTED" : "PENDING", about: changed)
        return changed
    }

    // MARK: Truth

    /// What `GET /sim/transactions/{id}` answers. Nil when the id is unknown.
    public func truth(transactionId: String) -> [String: Any]? {
        guard let transaction = registry.transaction(transactionId) else { return nil }
        let latest = registry.family(transaction.originalTransactionId).last ?? transaction
        let answers: [Any] = (transaction.consumptionAnswers ?? []).map { text in
            (try? JSONSerialization.jsonObject(with: Data(text.utf8))) ?? text
        }
        return [
            "transaction_id": transaction.transactionId,
            "original_transaction_id": transaction.originalTransactionId,
            "product_id": transaction.productId,
            "type": transaction.productType,
            "environment": transaction.environment.rawValue,
            "state": transaction.lifecycleState(nowMs: nowMs),
            // Apple's status of the subscription: its latest transaction's state (the transaction's own for others).
            "subscription_state": latest.lifecycleState(nowMs: nowMs),
            "subscription_latest_transaction_id": latest.transactionId,
            "expires_date_ms": transaction.expiresDateMs.map { $0 as Any } ?? NSNull(),
            "revocation_date_ms": transaction.revocationDateMs.map { $0 as Any } ?? NSNull(),
            "grace_period_expires_date_ms": transaction.gracePeriodExpiresDateMs.map { $0 as Any } ?? NSNull(),
            "consumption_answers": answers,
            "finish_calls": transaction.finishCalls ?? 0,
            "app_account_token": transaction.appAccountToken.map { $0 as Any } ?? NSNull(),
            "revocation_type": transaction.revocationType.map { $0 as Any } ?? NSNull(),
            "revocation_percentage": transaction.revocationPercentage.map { $0 as Any } ?? NSNull(),
            "in_app_ownership_type": transaction.inAppOwnershipType ?? "PURCHASED",
            "shared_from_transaction_id": transaction.sharedFromTransactionId.map { $0 as Any } ?? NSNull(),
        ]
    }

    // MARK: Helpers

    private func known(_ transactionId: String) throws -> SimulatedTransaction {
        guard let transaction = registry.transaction(transactionId) else {
            throw AppleSimulatorError(.unknownTransaction, "unknown transaction_id")
        }
        return transaction
    }

    private func change(
        _ transactionId: String, _ body: (inout SimulatedTransaction) throws -> Void
    ) throws -> SimulatedTransaction {
        guard let changed = try registry.update(transactionId, body) else {
            throw AppleSimulatorError(.unknownTransaction, "unknown transaction_id")
        }
        return changed
    }

    /// The latest transaction of a subscription family that is not revoked.
    private func activeSubscription(
        _ originalTransactionId: String, allowExpired: Bool
    ) throws
        -> SimulatedTransaction
    {
        guard let latest = registry.family(originalTransactionId).last else {
            throw AppleSimulatorError(.unknownTransaction, "unknown original_transaction_id")
        }
        guard latest.isSubscription else {
            throw AppleSimulatorError(.conflict, "the transaction is not an auto-renewable subscription")
        }
        guard latest.revocationDateMs == nil else {
            throw AppleSimulatorError(.conflict, "the subscription's latest transaction is revoked")
        }
        if !allowExpired, !latest.inBillingRetry(nowMs: nowMs), (latest.expiresDateMs ?? 0) <= nowMs {
            throw AppleSimulatorError(.conflict, "the subscription has expired")
        }
        return latest
    }
}
