import CodedErrors
import Foundation
import Synchronization

/// Every transaction the simulator minted, in memory and (with a state directory) appended to
/// `transactions.jsonl` there, one JSON record per line, the last record of an id winning on reload.
///
/// Receipts verify statelessly (by signature); the registry is what the App Store Server API endpoints,
/// renewals (`original_transaction_id`) and refunds need.
final class TransactionRegistry: Sendable {
    private struct State {
        var byId: [String: SimulatedTransaction] = [:]
        /// Original transaction id → its transaction ids, in mint order.
        var families: [String: [String]] = [:]
        var counter: Int64
        /// Bumped on every change, so cached verifyReceipt answers that list families know they are stale.
        var generation = 0
        /// Original transaction id → a counter bumped whenever the family changes (renewal, refund).
        var familyVersions: [String: Int] = [:]
        var journal: FileHandle?

        mutating func insert(_ transaction: SimulatedTransaction) {
            if byId.updateValue(transaction, forKey: transaction.transactionId) == nil {
                families[transaction.originalTransactionId, default: []].append(transaction.transactionId)
            }
            generation += 1
            familyVersions[transaction.originalTransactionId, default: 0] += 1
        }
    }

    private static let idSpace: Int64 = 1_000_000_000_000_000
    private let state: Mutex<State>

    /// - Parameter journalURL: where to append records; existing records are loaded first.
    init(journalURL: URL?) throws {
        var initial = State(counter: Int64.random(in: 100_000_000...900_000_000) * 1000)
        if let journalURL {
            let fm = FileManager.default
            if let data = fm.contents(atPath: journalURL.path) {
                let decoder = JSONDecoder()
                var highest: Int64 = 0
                for line in data.split(separator: UInt8(ascii: "\n")) {
                    // A line cut short by a kill is skipped; every earlier record is complete.
                    guard let record = try? decoder.decode(SimulatedTransaction.self, from: Data(line)) else {
                        continue
                    }
                    initial.insert(record)
                    if let number = Int64(record.transactionId) { highest = max(highest, number % Self.idSpace) }
                }
                if highest > 0 { initial.counter = highest + 1 }
            } else if !fm.createFile(atPath: journalURL.path, contents: nil) {
                throw AppleSimulatorError(.stateDirectory, "cannot create \(journalURL.path)")
            }
            guard let handle = FileHandle(forWritingAtPath: journalURL.path) else {
                throw AppleSimulatorError(.stateDirectory, "cannot open \(journalURL.path) for appending")
            }
            _ = try? handle.seekToEnd()
            initial.journal = handle
        }
        state = Mutex(initial)
    }

    var generation: Int { state.withLock { $0.generation } }

    /// Changes whenever a transaction of the family is added or revoked.
    func familyVersion(_ originalTransactionId: String) -> Int {
        state.withLock { $0.familyVersions[originalTransactionId] ?? 0 }
    }

    func transaction(_ id: String) -> SimulatedTransaction? {
        state.withLock { $0.byId[id] }
    }

    /// All transactions sharing `originalTransactionId`, in purchase order.
    func family(_ originalTransactionId: String) -> [SimulatedTransaction] {
        state.withLock { state in
            (state.families[originalTransactionId] ?? []).compactMap { state.byId[$0] }
        }
        .sorted { ($0.purchaseDateMs, $0.transactionId) < ($1.purchaseDateMs, $1.transactionId) }
    }

    /// Creates and records a new transaction. A renewal (`originalTransactionId` set) inherits the family's
    /// original purchase date; an unknown original id starts a family under that id.
    func mint(_ request: MintRequest, nowMs: Int64) throws -> SimulatedTransaction {
        try state.withLock { state in
            state.counter += 1
            let counter = state.counter % Self.idSpace
            let prefix = request.environment.transactionIdPrefix
            let transactionId = String(prefix * Self.idSpace + counter)
            let purchaseMs = request.purchaseDateMs ?? nowMs
            var originalId = transactionId
            var originalPurchaseMs = purchaseMs
            if let requested = request.originalTransactionId {
                originalId = requested
                if let first = state.families[requested]?.first.flatMap({ state.byId[$0] }) {
                    guard first.bundleId == request.bundleId, first.environment == request.environment else {
                        throw AppleSimulatorError(
                            .invalidRequest, "original_transaction_id belongs to another bundle or environment")
                    }
                    originalPurchaseMs = first.originalPurchaseDateMs
                }
            }
            var transaction = SimulatedTransaction(
                transactionId: transactionId,
                originalTransactionId: originalId,
                bundleId: request.bundleId,
                productId: request.productId,
                environment: request.environment,
                quantity: request.quantity,
                purchaseDateMs: purchaseMs,
                originalPurchaseDateMs: originalPurchaseMs,
                expiresDateMs: request.expiresDateMs,
                webOrderLineItemId: request.expiresDateMs == nil
                    ? nil : String(prefix * Self.idSpace + Self.idSpace / 2 + counter),
                productType: request.productType
                    ?? (request.expiresDateMs == nil ? "Non-Consumable" : "Auto-Renewable Subscription"))
            // A renewal carries the family's token, as Apple's do; an iOS 6 transaction receipt carries none.
            transaction.appAccountToken =
                request.format == .transactionReceipt
                ? nil
                : request.appAccountToken
                    ?? state.families[originalId]?.first.flatMap { state.byId[$0]?.appAccountToken }
            transaction.storefront = request.storefront
            state.insert(transaction)
            try Self.append(transaction, to: state.journal)
            return transaction
        }
    }

    /// Marks a transaction refunded or revoked, with Apple's `revocationType` and, for a prorated refund, its
    /// percentage. Nil when the id is unknown.
    func revoke(
        _ transactionId: String, atMs: Int64, reason: Int, type: String = "REFUND_FULL", percentage: Int? = nil
    ) throws -> SimulatedTransaction? {
        try state.withLock { state in
            guard var transaction = state.byId[transactionId] else { return nil }
            transaction.revocationDateMs = atMs
            transaction.revocationReason = reason
            transaction.revocationType = type
            transaction.revocationPercentage = percentage
            state.insert(transaction)
            try Self.append(transaction, to: state.journal)
            return transaction
        }
    }

    /// The family members' transactions shared from a purchaser's transaction.
    func members(sharedFrom transactionId: String) -> [SimulatedTransaction] {
        state.withLock { state in
            state.byId.values.filter { $0.sharedFromTransactionId == transactionId }
                .sorted { $0.transactionId < $1.transactionId }
        }
    }

    /// Applies `change` to one transaction and records the result. Nil when the id is unknown; `change` may throw
    /// to refuse (nothing is recorded then).
    func update(
        _ transactionId: String, _ change: (inout SimulatedTransaction) throws -> Void
    ) throws -> SimulatedTransaction? {
        try state.withLock { state in
            guard var transaction = state.byId[transactionId] else { return nil }
            try change(&transaction)
            state.insert(transaction)
            try Self.append(transaction, to: state.journal)
            return transaction
        }
    }

    /// Applies `change` to every transaction of a family (in purchase order). Empty when the family is unknown.
    func updateFamily(
        _ originalTransactionId: String, _ change: (inout SimulatedTransaction) -> Void
    ) throws -> [SimulatedTransaction] {
        try state.withLock { state in
            var changed: [SimulatedTransaction] = []
            for id in state.families[originalTransactionId] ?? [] {
                guard var transaction = state.byId[id] else { continue }
                change(&transaction)
                state.insert(transaction)
                try Self.append(transaction, to: state.journal)
                changed.append(transaction)
            }
            return changed
        }
    }

    private static func append(_ transaction: SimulatedTransaction, to journal: FileHandle?) throws {
        guard let journal else { return }
        var line = try JSONEncoder().encode(transaction)
        line.append(UInt8(ascii: "\n"))
        do {
            try journal.write(contentsOf: line)
        } catch {
            throw AppleSimulatorError(.stateDirectory, "cannot append to the transaction journal")
        }
    }
}
