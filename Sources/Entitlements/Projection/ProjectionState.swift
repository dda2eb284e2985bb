import Foundation
import Messages

/// The part of the projection a batch of verdicts works on, loaded by the store before and written back after:
/// the transactions the verdicts name (by id and by subscription), every non-consumable transaction of the accounts
/// involved, and which verdicts were applied already. The projection changes it in memory; the store writes
/// ``changedTransactionIDs``, ``consumableDeltas``, ``appliedVerdicts``, ``history`` and ``events`` in one
/// database transaction.
public struct ProjectionState: Sendable {
    public private(set) var transactions: [String: ProjectedTransaction] = [:]
    private var byAccount: [String: Set<String>] = [:]
    private var byOriginal: [String: Set<String>] = [:]
    /// De-duplication ids (verdict ids) known to be applied, loaded or applied in this batch.
    public var appliedIDs: Set<String> = []

    // MARK: What to write
    public private(set) var changedTransactionIDs: [String] = []
    private var changedSet: Set<String> = []
    /// Consumable purchases by account and product: units to add (negative for a refund).
    public var consumableDeltas: [ConsumableKey: Int] = [:]
    /// The verdicts (and unreadable messages) newly applied, with the account they belong to, for de-duplication.
    public var appliedVerdicts: [AppliedMessage] = []
    public var history: [HistoryEntry] = []
    public var events: [LifecycleEvent] = []
    /// Accounts that got a verdict, with the newest `decided_at` seen.
    public var accountsSeen: [String: Date] = [:]

    public init() {}

    /// Adds a stored transaction (loading); not a change.
    public mutating func load(_ transaction: ProjectedTransaction) {
        if let old = transactions[transaction.transactionID] { unindex(old) }
        transactions[transaction.transactionID] = transaction
        index(transaction)
    }

    /// Adds or replaces a transaction as a change to write.
    public mutating func store(_ transaction: ProjectedTransaction) {
        load(transaction)
        if changedSet.insert(transaction.transactionID).inserted {
            changedTransactionIDs.append(transaction.transactionID)
        }
    }

    /// Adds `units` of a consumable to its owner's count of its product (negative: takes them back).
    mutating func count(_ units: Int, of transaction: ProjectedTransaction) {
        let key = ConsumableKey(
            accountID: transaction.accountID, productID: transaction.productID, store: transaction.store)
        consumableDeltas[key, default: 0] += units
    }

    /// The account's transactions (those loaded: all its non-consumables, and any consumable a verdict named).
    public func transactions(ofAccount accountID: String) -> [ProjectedTransaction] {
        (byAccount[accountID] ?? []).compactMap { transactions[$0] }
    }

    /// The subscription's transactions, whoever owns them.
    public func transactions(ofOriginal originalID: String) -> [ProjectedTransaction] {
        (byOriginal[originalID] ?? []).compactMap { transactions[$0] }
    }

    /// The subscription's transactions in `store`, whoever owns them: original ids are each store's own.
    public func transactions(ofOriginal originalID: String, in store: Store) -> [ProjectedTransaction] {
        transactions(ofOriginal: originalID).filter { $0.store == store }
    }

    private mutating func index(_ transaction: ProjectedTransaction) {
        byAccount[transaction.accountID, default: []].insert(transaction.transactionID)
        byOriginal[transaction.originalTransactionID, default: []].insert(transaction.transactionID)
    }

    private mutating func unindex(_ transaction: ProjectedTransaction) {
        byAccount[transaction.accountID]?.remove(transaction.transactionID)
        byOriginal[transaction.originalTransactionID]?.remove(transaction.transactionID)
    }
}

/// An account's purchases of one consumable of one store (a product id may name two products, one per store).
public struct ConsumableKey: Sendable, Hashable {
    public var accountID: String
    public var productID: String
    public var store: Store = .appStore
}

/// A message the projection has taken into account, by its de-duplication id.
public struct AppliedMessage: Sendable, Hashable {
    public var id: String
    public var accountID: String?
    public var outcome: String?
    public var decidedAt: Date?
}

extension ProjectionState {
    /// A state that holds only `events` and their history entries: what recording events outside a projection
    /// writes.
    init(recording events: [LifecycleEvent], at recordedAt: Date) {
        self.init()
        for event in events {
            self.events.append(event)
            history.append(
                HistoryEntry(
                    accountID: event.accountID, kind: .event, recordedAt: recordedAt, occurredAt: event.occurredAt,
                    event: event))
        }
    }
}
