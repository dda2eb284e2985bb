import Foundation
import Messages

/// The projection of verdicts into entitlements: one pure function from (state, verdict) to (new state, history,
/// lifecycle events). It relies only on the public verdict contract (docs/messages.md) and the catalog.
///
/// Rules (docs/ENTITLEMENTS.md has the table):
/// - A verdict is applied once, by `verdict_id`; a redelivery changes nothing.
/// - `granted` and `already_granted` give the verdict's account the transactions nobody owns yet and update the
///   ones it owns; `already_granted` never takes a transaction from another account. `granted` moves a whole
///   auto-renewable subscription from another account when it carries a current period that account never had
///   (the worker's "expired subscription moves" rule), unless the other account got it by a newer verdict.
/// - `rejected`/`expired` records the transactions as the account's history (expired) and updates owned ones;
///   `rejected`/`revoked` updates (revokes) owned transactions only; every other rejection, `unverifiable`, and any
///   reason code this build does not know, change nothing.
/// - A transaction's state is replaced only by a verdict decided no earlier than the one that wrote it, so verdicts
///   read out of order (across partitions, after a transfer) never roll it back.
/// - Messages that are not verdicts of this schema, or with an outcome this build does not know, are recorded as
///   ignored in the account's history; nothing is guessed.
public enum EntitlementProjection {
    /// What one message did, for metrics and the caller's logs.
    public enum Result: String, Sendable, Hashable, CaseIterable {
        case applied
        case noChange = "no_change"
        case stale
        case duplicate
        case ignored
    }

    public static func apply(
        _ input: ProjectionInput, to state: inout ProjectionState, catalog: Catalog, recordedAt: Date
    ) -> Result {
        switch input {
        case .unreadable(let message):
            return ignore(message, in: &state, recordedAt: recordedAt)
        case .verdict(let verdict, let revocations):
            return apply(verdict, revocations: revocations, to: &state, catalog: catalog, recordedAt: recordedAt)
        }
    }

    static func ignore(_ message: UnreadableMessage, in state: inout ProjectionState, recordedAt: Date) -> Result {
        guard state.appliedIDs.insert(message.dedupeID).inserted else { return .duplicate }
        state.appliedVerdicts.append(
            AppliedMessage(id: message.dedupeID, accountID: message.accountID, outcome: message.outcome, decidedAt: nil)
        )
        if let account = message.accountID {
            state.history.append(
                HistoryEntry(
                    accountID: account, kind: .ignored, recordedAt: recordedAt, verdictID: message.verdictID,
                    outcome: message.outcome, effect: .ignored, problem: "\(message.code): \(message.problem)"))
        }
        return .ignored
    }

    /// How a verdict's outcome and reason let it touch transactions.
    enum Mode {
        /// `granted`: take unowned ones, update owned ones, move an expired subscription.
        case grant
        /// `already_granted`: take unowned ones (the worker says this account owns them), update owned ones.
        case confirm
        /// `rejected`/`expired`: record unowned ones as this account's (expired) history, update owned ones.
        case record
        /// `rejected`/`revoked`: update owned ones only.
        case updateOwned
        /// Anything else: nothing.
        case none
    }

    static func mode(of verdict: Verdict) -> Mode {
        switch verdict.outcome {
        case .granted: return .grant
        case .alreadyGranted: return .confirm
        case .rejected where verdict.reason == .expired: return .record
        case .rejected where verdict.reason == .revoked: return .updateOwned
        case .rejected, .unverifiable: return .none
        }
    }

    /// What happened to one transaction, for the events.
    enum Change {
        /// `previous`: the latest earlier transaction of the same subscription this account held (a renewal).
        case added(ProjectedTransaction, previous: ProjectedTransaction?, history: Bool)
        case revoked(ProjectedTransaction)
        case unrevoked(ProjectedTransaction)
        /// The verdict states billing retry (renewal info) where it did not before; `grace`: with access kept.
        case billingRetry(ProjectedTransaction, grace: Bool)
        /// The same transaction's expiry moved later without billing retry: Apple extended the renewal date.
        case extended(ProjectedTransaction)
        case moved(ProjectedTransaction, from: String)
    }

    static func apply(
        _ verdict: Verdict, revocations: [TransactionRevocation] = [], to state: inout ProjectionState,
        catalog: Catalog, recordedAt: Date
    ) -> Result {
        guard state.appliedIDs.insert(verdict.verdictID).inserted else { return .duplicate }
        let account = verdict.accountID
        let decidedAt = verdict.decidedAt
        // A verdict speaks for its own store's transactions only; its products are that store's catalog list.
        let store = verdict.store
        state.appliedVerdicts.append(
            AppliedMessage(
                id: verdict.verdictID, accountID: account, outcome: verdict.outcome.rawValue, decidedAt: decidedAt))
        state.accountsSeen[account] = max(state.accountsSeen[account] ?? decidedAt, decidedAt)

        let mode = mode(of: verdict)
        // The last entry per transaction id wins (a verdict lists each once; be safe against repeats).
        var seen = Set<String>()
        let listed = verdict.transactions.reversed().filter { seen.insert($0.transactionID).inserted }.reversed()

        // The accounts whose entitlements may change: this one, and the owners of what the verdict names.
        var involved: Set<String> = [account]
        if mode != .none {
            for transaction in listed {
                if let owner = state.transactions[transaction.transactionID]?.accountID { involved.insert(owner) }
                for other in state.transactions(
                    ofOriginal: transaction.originalTransactionID ?? transaction.transactionID, in: store)
                {
                    involved.insert(other.accountID)
                }
            }
        }
        // Only a verdict that may change transactions, or says one expired, can make an event.
        let mayMakeEvents = mode != .none || verdict.reason == .expired
        var before: [String: [String: EntitlementSummary]] = [:]
        if mayMakeEvents {
            for owner in involved {
                before[owner] = summaries(of: owner, in: state, catalog: catalog, at: decidedAt)
            }
        }

        var notes: [String] = []
        var changes: [Change] = []
        var staleCount = 0
        var changed = false
        if mode != .none {
            let moves = movableSubscriptions(verdict, state: state, catalog: catalog)
            for item in listed {
                let original = item.originalTransactionID ?? item.transactionID
                let type = catalog.type(of: item.productID, expiresDate: item.expiresDate, in: store)
                guard var current = state.transactions[item.transactionID] else {
                    guard mode != .updateOwned else {
                        notes.append(
                            "\(item.transactionID): not known here, not recorded (a revocation names owned transactions)"
                        )
                        continue
                    }
                    var added = ProjectedTransaction(
                        transactionID: item.transactionID, originalTransactionID: original, accountID: account,
                        productID: item.productID, productType: type, environment: verdict.environment,
                        purchaseDate: item.purchaseDate, expiresDate: item.expiresDate, revokedAt: item.revokedAt,
                        quantity: max(1, item.quantity ?? 1), ownerSince: decidedAt, decidedAt: decidedAt,
                        verdictID: verdict.verdictID, updatedAt: recordedAt, store: store, orderID: item.orderID,
                        purchaseToken: item.purchaseToken)
                    if type == .autoRenewable { Self.readRenewal(item, into: &added, at: decidedAt) }
                    let previous = state.transactions(ofOriginal: original, in: store).filter {
                        $0.accountID == account
                    }.max {
                        ($0.purchaseDate ?? .distantPast, $0.transactionID) < (
                            $1.purchaseDate ?? .distantPast, $1.transactionID
                        )
                    }
                    // A new period of a subscription ends its billing retry.
                    if type == .autoRenewable, added.revokedAt == nil {
                        for var sibling in state.transactions(ofOriginal: original, in: store)
                        where sibling.accountID == account
                            && (sibling.inBillingRetry || sibling.inGracePeriod || sibling.paused)
                        {
                            sibling.inBillingRetry = false
                            sibling.inGracePeriod = false
                            sibling.paused = false
                            sibling.updatedAt = recordedAt
                            state.store(sibling)
                        }
                    }
                    state.store(added)
                    if type == .consumable, added.revokedAt == nil {
                        state.count(added.quantity, of: added)
                    }
                    changes.append(.added(added, previous: previous, history: mode == .record))
                    notes.append(
                        mode == .record
                            ? "\(item.transactionID): recorded as this account's (expired)"
                            : "\(item.transactionID): added (\(item.productID))")
                    changed = true
                    continue
                }
                guard current.store == store else {
                    // Transaction ids are each store's own: the same id from the other store is another purchase,
                    // and the one recorded first keeps the id.
                    notes.append(
                        "\(item.transactionID): a transaction of \(current.store.rawValue) has this id, unchanged")
                    continue
                }
                if current.accountID != account {
                    guard mode == .grant, moves.contains(original), decidedAt > current.ownerSince else {
                        notes.append("\(item.transactionID): owned by another account, unchanged")
                        continue
                    }
                    let from = current.accountID
                    for var moved in state.transactions(ofOriginal: original, in: store) where moved.accountID == from {
                        moved.accountID = account
                        moved.ownerSince = decidedAt
                        moved.inBillingRetry = false
                        moved.inGracePeriod = false
                        moved.paused = false
                        moved.updatedAt = recordedAt
                        state.store(moved)
                        changes.append(.moved(moved, from: from))
                    }
                    notes.append("subscription \(original): moved from another account")
                    changed = true
                    current = state.transactions[item.transactionID]!
                }
                guard decidedAt >= current.decidedAt else {
                    staleCount += 1
                    notes.append("\(item.transactionID): a newer verdict was applied already, unchanged")
                    continue
                }
                var updated = current
                updated.productID = item.productID
                updated.productType = type
                updated.environment = verdict.environment ?? current.environment
                updated.purchaseDate = item.purchaseDate ?? current.purchaseDate
                updated.expiresDate = item.expiresDate
                updated.revokedAt = item.revokedAt
                updated.orderID = item.orderID ?? current.orderID
                updated.purchaseToken = item.purchaseToken ?? current.purchaseToken
                updated.decidedAt = decidedAt
                updated.verdictID = verdict.verdictID
                var extended = false
                if type == .autoRenewable {
                    // Billing retry and grace period are what the verdict's renewal info says, never inferred from
                    // dates: an expiry moved later on the same transaction without billing retry is an extension
                    // (RENEWAL_EXTENDED); a renewal is a new transaction.
                    Self.readRenewal(item, into: &updated, at: decidedAt)
                    if updated.revokedAt == nil, !updated.inBillingRetry, let old = current.expiresDate,
                        let new = updated.expiresDate, new > old
                    {
                        extended = true
                    }
                }
                let stateChanged =
                    updated.productID != current.productID || updated.environment != current.environment
                    || updated.purchaseDate != current.purchaseDate || updated.expiresDate != current.expiresDate
                    || updated.revokedAt != current.revokedAt || updated.inGracePeriod != current.inGracePeriod
                    || updated.inBillingRetry != current.inBillingRetry || updated.paused != current.paused
                    || updated.orderID != current.orderID
                    || updated.purchaseToken != current.purchaseToken
                if stateChanged {
                    updated.updatedAt = recordedAt
                    changed = true
                }
                // The newest verdict is remembered even when nothing else changed, so older ones stay stale.
                state.store(updated)
                if current.revokedAt == nil, updated.revokedAt != nil {
                    changes.append(.revoked(updated))
                    notes.append("\(item.transactionID): revoked")
                    if type == .consumable {
                        state.count(-updated.quantity, of: updated)
                    }
                } else if current.revokedAt != nil, updated.revokedAt == nil {
                    changes.append(.unrevoked(updated))
                    notes.append("\(item.transactionID): revocation reversed")
                    if type == .consumable {
                        state.count(updated.quantity, of: updated)
                    }
                } else if updated.inBillingRetry,
                    !current.inBillingRetry || updated.inGracePeriod && !current.inGracePeriod
                {
                    changes.append(.billingRetry(updated, grace: updated.inGracePeriod && !current.inGracePeriod))
                    notes.append(
                        updated.inGracePeriod
                            ? "\(item.transactionID): billing retry, grace period until the new expiry"
                            : "\(item.transactionID): billing retry")
                } else if extended {
                    changes.append(.extended(updated))
                    notes.append("\(item.transactionID): renewal date extended")
                } else if stateChanged {
                    notes.append("\(item.transactionID): updated")
                }
            }
        }

        let result: Result
        if changed {
            result = .applied
        } else if staleCount > 0, staleCount == listed.count {
            result = .stale
        } else {
            result = .noChange
        }
        state.history.append(
            HistoryEntry(
                accountID: account, kind: .verdict, recordedAt: recordedAt, occurredAt: decidedAt,
                verdictID: verdict.verdictID, jobID: verdict.jobID, outcome: verdict.outcome.rawValue,
                reason: verdict.reason?.rawValue, decidedBy: verdict.decidedBy.rawValue, store: verdict.store,
                environment: verdict.environment,
                effect: result == .applied ? .applied : result == .stale ? .stale : .noChange,
                transactions: verdict.transactions, notes: notes, revocations: revocations.isEmpty ? nil : revocations))

        if mayMakeEvents, changed || verdict.reason == .expired {
            for owner in involved.union(changes.compactMap { if case .moved(_, let from) = $0 { from } else { nil } }) {
                let after = summaries(of: owner, in: state, catalog: catalog, at: decidedAt)
                let events = events(
                    for: owner, verdict: verdict, changes: changes, before: before[owner] ?? [:], after: after,
                    catalog: catalog)
                for event in events {
                    state.events.append(event)
                    state.history.append(
                        HistoryEntry(
                            accountID: event.accountID, kind: .event, recordedAt: recordedAt,
                            occurredAt: event.occurredAt, verdictID: verdict.verdictID, event: event))
                }
            }
        }
        return result
    }

    /// Billing retry, grace period and pause as the verdict's renewal info states them (`in_billing_retry`,
    /// `grace_period_expires_date`, Google Play's `paused`); a verdict that states none leaves them as they were.
    static func readRenewal(_ item: Verdict.Transaction, into transaction: inout ProjectedTransaction, at instant: Date)
    {
        guard let inBillingRetry = item.inBillingRetry else { return }
        transaction.inBillingRetry = inBillingRetry
        transaction.paused = item.paused ?? false
        transaction.inGracePeriod = inBillingRetry && (item.gracePeriodExpiresDate.map { $0 > instant } ?? false)
    }

    /// Subscriptions (original ids) this `granted` verdict may move to its account: auto-renewable, owned by another
    /// account, and carrying a current period that is not owned by that other account.
    static func movableSubscriptions(
        _ verdict: Verdict, state: ProjectionState, catalog: Catalog
    ) -> Set<String> {
        guard verdict.outcome == .granted else { return [] }
        var movable: Set<String> = []
        for item in verdict.transactions {
            let original = item.originalTransactionID ?? item.transactionID
            guard catalog.type(of: item.productID, expiresDate: item.expiresDate, in: verdict.store) == .autoRenewable,
                item.revokedAt == nil, (item.expiresDate ?? .distantFuture) > verdict.decidedAt
            else { continue }
            let owner = state.transactions[item.transactionID]?.accountID
            guard owner == nil || owner == verdict.accountID else { continue }
            if state.transactions(ofOriginal: original, in: verdict.store).contains(where: {
                $0.accountID != verdict.accountID
            }) {
                movable.insert(original)
            }
        }
        return movable
    }

    static func summaries(
        of account: String, in state: ProjectionState, catalog: Catalog, at instant: Date
    ) -> [String: EntitlementSummary] {
        let list = EntitlementSummary.summarize(state.transactions(ofAccount: account), catalog: catalog, at: instant)
        return Dictionary(uniqueKeysWithValues: list.map { ($0.entitlementID, $0) })
    }

    /// The lifecycle events of one account for one verdict: from the transaction changes, checked against the
    /// entitlements before and after (at the verdict's `decided_at`, so the same verdict always yields the same
    /// events).
    static func events(
        for account: String, verdict: Verdict, changes: [Change], before: [String: EntitlementSummary],
        after: [String: EntitlementSummary], catalog: Catalog
    ) -> [LifecycleEvent] {
        var events: [LifecycleEvent] = []
        var covered: Set<String> = []
        func emit(
            _ kind: LifecycleEvent.Kind, _ entitlement: String, _ transaction: ProjectedTransaction,
            from: String? = nil, to: String? = nil
        ) {
            // A refund carries how Apple revoked it, as the verdict stated it for that transaction.
            let revocation =
                kind == .refund
                ? verdict.transactions.first { $0.transactionID == transaction.transactionID }?.revocation : nil
            let event = LifecycleEvent(
                kind: kind, accountID: account, entitlementID: entitlement,
                active: after[entitlement]?.active ?? false, transaction: transaction,
                occurredAt: verdict.decidedAt, verdictID: verdict.verdictID, fromAccountID: from, toAccountID: to,
                revocation: revocation)
            guard !events.contains(where: { $0.eventID == event.eventID }) else { return }
            events.append(event)
            covered.insert(entitlement)
        }
        let decidedAt = verdict.decidedAt
        var movedGroups: Set<String> = []
        let groupsMoved = Set(
            changes.compactMap {
                if case .moved(let transaction, _) = $0 { transaction.originalTransactionID } else { nil }
            })
        for change in changes {
            switch change {
            case .added(let transaction, let previous, let history):
                guard transaction.accountID == account, !history, transaction.grants(at: decidedAt),
                    !groupsMoved.contains(transaction.originalTransactionID)
                else { continue }
                for entitlement in transaction.entitlements(in: catalog) {
                    // An earlier period of the same subscription held by this account makes it a renewal, or a
                    // product change (an upgrade or downgrade keeps the original transaction id).
                    if let previous {
                        emit(
                            previous.productID == transaction.productID ? .renewal : .productChange, entitlement,
                            transaction)
                    } else if before[entitlement]?.active != true {
                        emit(.initialPurchase, entitlement, transaction)
                    }
                }
            case .revoked(let transaction):
                guard transaction.accountID == account else { continue }
                for entitlement in transaction.entitlements(in: catalog) {
                    emit(.refund, entitlement, transaction)
                }
            case .unrevoked(let transaction):
                guard transaction.accountID == account else { continue }
                for entitlement in transaction.entitlements(in: catalog) {
                    emit(.refundReversed, entitlement, transaction)
                }
            case .billingRetry(let transaction, let grace):
                guard transaction.accountID == account else { continue }
                for entitlement in transaction.entitlements(in: catalog) {
                    emit(.billingIssue, entitlement, transaction)
                    if grace { emit(.gracePeriodEntered, entitlement, transaction) }
                }
            case .extended(let transaction):
                guard transaction.accountID == account else { continue }
                for entitlement in transaction.entitlements(in: catalog) {
                    emit(.renewalExtended, entitlement, transaction)
                }
            case .moved(let transaction, let from):
                guard account == from || account == transaction.accountID,
                    movedGroups.insert("\(account)|\(transaction.originalTransactionID)").inserted
                else { continue }
                for entitlement in transaction.entitlements(in: catalog) {
                    let summary = (account == from ? before : after)[entitlement]
                    emit(
                        .transfer, entitlement, summary?.representative ?? transaction, from: from,
                        to: transaction.accountID)
                }
            }
        }
        // Expirations: an entitlement active before and not after, for no reason above; or one a verdict says is
        // expired. Named by the expiry, so the clock's sweep and any number of verdicts publish it once.
        // A transaction this verdict only recorded as history (expired before the account had it) ends nothing.
        let recordedOnly = Set(
            changes.compactMap { change -> String? in
                if case .added(let transaction, _, true) = change { transaction.transactionID } else { nil }
            })
        for (entitlement, summary) in after where !summary.active && !covered.contains(entitlement) {
            let wasActive = before[entitlement]?.active == true
            if wasActive || (verdict.reason == .expired && !recordedOnly.contains(summary.representative.transactionID))
            {
                guard summary.representative.revokedAt == nil else { continue }
                let event = LifecycleEvent(
                    kind: .expiration, accountID: account, entitlementID: entitlement, active: false,
                    transaction: summary.representative, occurredAt: decidedAt, verdictID: verdict.verdictID)
                events.append(event)
            }
        }
        return events
    }
}
