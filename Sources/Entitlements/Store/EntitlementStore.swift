import CodedErrors
import Foundation
import Messages

/// Where the projection lives: PostgreSQL for a cluster of entitlement services (`postgres://…`), SQLite on one
/// machine (`sqlite:PATH`). Both pass one shared test suite.
///
/// Run ``run()`` (a service of the command's group) while the store is used, and ``migrate()`` once at start.
public protocol EntitlementStore: Sendable {
    /// Runs the store's background work (PostgreSQL's pool) until cancelled.
    func run() async throws
    /// Creates or upgrades the schema; refuses a database newer than this build (`schema`).
    func migrate() async throws

    /// Projects a batch of messages in one database transaction: loads the state they need, applies each through
    /// ``EntitlementProjection``, writes the changes, the new history, the lifecycle events (outbox) and the
    /// topic positions reached, all or nothing. A batch applied twice changes nothing the second time.
    func project(
        _ batch: ProjectionBatch, catalog: Catalog, recordedAt: Date
    ) async throws
        -> ProjectionBatchResult

    /// The account's transactions and consumable counts; nil when no verdict for it was ever read.
    func account(_ accountID: String) async throws -> AccountRecord?
    /// The account's history, newest first, entries older than `before` (a sequence) when given.
    func history(of accountID: String, before: Int64?, limit: Int) async throws -> [HistoryEntry]
    /// The transaction with this id; else every transaction of the subscription with this original id; else the
    /// transactions with this Google Play order id; else those with this purchase token (``TransactionMatch``).
    func transactions(matching id: String) async throws -> [ProjectedTransaction]
    /// How far the projection has read.
    func progress() async throws -> ProjectionProgress

    /// Lifecycle events not yet published to Kafka, oldest first.
    func unpublishedEvents(limit: Int) async throws -> [LifecycleEvent]
    func markPublished(_ eventIDs: [String], at instant: Date) async throws
    /// Events a webhook has yet to receive (``WebhookDelivery``), due at `instant`, oldest first.
    func dueWebhookDeliveries(at instant: Date, limit: Int) async throws -> [WebhookDelivery]
    /// Records a webhook attempt: delivered, or the next attempt's time (nil: given up).
    func recordWebhookAttempt(
        _ delivery: WebhookDelivery, delivered: Bool, nextAttempt: Date?, at instant: Date)
        async throws

    /// Accounts holding a subscription (not revoked) whose expiry falls in `window`, in id order after `account`
    /// (`""` for the first page), at most `limit`.
    func accountsWithExpiries(in window: ClosedRange<Date>, after account: String, limit: Int) async throws -> [String]
    /// Stores events made outside a batch (the expiration sweep): outbox, history and webhook deliveries, each
    /// once by `event_id`. Returns the ones that were new.
    func record(events: [LifecycleEvent], webhookURLs: [String], recordedAt: Date) async throws -> [LifecycleEvent]

    /// A cheap round trip, for readiness.
    func ping() async throws
}

/// Messages to project, with where they came from (for `as_of` and the record of positions).
public struct ProjectionBatch: Sendable {
    public var inputs: [ProjectionInput]
    /// The next offset of each partition once the batch is applied, and the newest record timestamp in it.
    public var positions: [TopicPosition]
    /// Webhook URLs each new event is to be delivered to (empty: none).
    public var webhookURLs: [String]
    /// How many rejections (``HistoryEntry/isRejection``) each account's history keeps, the newest; older ones are
    /// dropped as new ones arrive, so junk traffic to one account cannot grow the store without limit. 0 keeps none,
    /// and an account that got nothing else stays unknown. Default: 20.
    public var rejectionsPerAccount: Int

    public init(
        inputs: [ProjectionInput], positions: [TopicPosition] = [], webhookURLs: [String] = [],
        rejectionsPerAccount: Int = ProjectionBatch.defaultRejectionsPerAccount
    ) {
        self.inputs = inputs
        self.positions = positions
        self.webhookURLs = webhookURLs
        self.rejectionsPerAccount = max(0, rejectionsPerAccount)
    }

    public static let defaultRejectionsPerAccount = 20
}

/// A partition's next offset to read after a batch, and the Kafka timestamp of its newest record.
public struct TopicPosition: Sendable, Hashable {
    public var topic: String
    public var partition: Int32
    public var nextOffset: Int64
    public var recordTime: Date?

    public init(topic: String, partition: Int32, nextOffset: Int64, recordTime: Date?) {
        self.topic = topic
        self.partition = partition
        self.nextOffset = nextOffset
        self.recordTime = recordTime
    }
}

/// What a batch did: one result per input, in order, and the lifecycle events it created (to publish).
public struct ProjectionBatchResult: Sendable {
    public var results: [EntitlementProjection.Result]
    public var events: [LifecycleEvent]

}

/// An account as the API shows it.
public struct AccountRecord: Sendable, Hashable {
    public var accountID: String
    public var firstSeen: Date
    /// The newest `decided_at` among its verdicts.
    public var lastDecidedAt: Date
    public var transactions: [ProjectedTransaction]
    /// Units bought per consumable product, of each store.
    public var consumables: [ConsumableProduct: Int]

}

/// A consumable product of one store (product ids are each store's own).
public struct ConsumableProduct: Sendable, Hashable, Comparable {
    public var store: Store
    public var productID: String

    public static func < (a: Self, b: Self) -> Bool {
        (a.productID, a.store.rawValue) < (b.productID, b.store.rawValue)
    }
}

/// How far the projection has read: per partition, and `asOf`, the newest record time applied.
public struct ProjectionProgress: Sendable, Hashable {
    public var positions: [TopicPosition]
    public var asOf: Date? { positions.compactMap(\.recordTime).max() }

    public init(positions: [TopicPosition]) { self.positions = positions }
}

/// One event to deliver to one webhook URL, with its attempts so far.
public struct WebhookDelivery: Sendable, Hashable {
    public var event: LifecycleEvent
    public var url: String
    public var attempts: Int

}

/// What a batch needs loaded, derived from its inputs.
struct ProjectionKeys {
    var dedupeIDs: [String] = []
    var transactionIDs: Set<String> = []
    var originalIDs: Set<String> = []
    var accounts: Set<String> = []

    init(_ inputs: [ProjectionInput]) {
        for input in inputs {
            switch input {
            case .verdict(let verdict, _):
                dedupeIDs.append(verdict.verdictID)
                accounts.insert(verdict.accountID)
                for transaction in verdict.transactions {
                    transactionIDs.insert(transaction.transactionID)
                    originalIDs.insert(transaction.originalTransactionID ?? transaction.transactionID)
                }
            case .unreadable(let message):
                dedupeIDs.append(message.dedupeID)
            }
        }
    }
}

/// How a looked-up id names transactions, in the order tried: the first kind that matches any transaction wins.
public enum TransactionMatch: String, Sendable, CaseIterable {
    case transactionID = "transaction_id"
    case originalTransactionID = "original_transaction_id"
    /// Google Play's order id (a renewal's order id ends in `..N`; an App Store transaction has none).
    case orderID = "order_id"
    case purchaseToken = "purchase_token"

    public func matches(_ transaction: ProjectedTransaction, _ id: String) -> Bool {
        switch self {
        case .transactionID: transaction.transactionID == id
        case .originalTransactionID: transaction.originalTransactionID == id
        case .orderID: transaction.orderID == id
        case .purchaseToken: transaction.purchaseToken == id
        }
    }

    /// The kind that matched `found` (the answer of ``EntitlementStore/transactions(matching:)``).
    public static func kind(of found: [ProjectedTransaction], for id: String) -> TransactionMatch? {
        allCases.first { kind in found.contains { kind.matches($0, id) } }
    }

    /// Of transactions matching `id` in any way, those of the first kind that matches.
    static func best(_ found: [ProjectedTransaction], for id: String) -> [ProjectedTransaction] {
        guard let kind = kind(of: found, for: id) else { return [] }
        return found.filter { kind.matches($0, id) }
    }
}

/// What a batch's write keeps of its rejections (``HistoryEntry/isRejection``), the same in both backends: each
/// account keeps its newest `limit`; with 0, none are written, and an account that got only rejections is updated
/// when it is known for something else, never created (it stays unknown to the API).
struct RejectionRetention {
    /// The history entries to write.
    let history: [HistoryEntry]
    /// Accounts to create or update, with the newest `decided_at` of their verdicts in the batch (nil: named only
    /// by an event or an ignored message).
    let accounts: [String: Date?]
    /// Accounts that got only rejections while none are kept: their newest `decided_at`, for an update only.
    let accountsOnlyUpdated: [String: Date]
    /// Accounts given a rejection by this batch, whose oldest ones may now be past the limit.
    let accountsWithNewRejections: [String]

    init(_ state: ProjectionState, keeping limit: Int) {
        history = limit > 0 ? state.history : state.history.filter { !$0.isRejection }
        var accounts = state.accountsSeen.mapValues { Optional($0) }
        var onlyUpdated: [String: Date] = [:]
        if limit == 0 {
            let named = Set(history.map(\.accountID))
            for (account, decidedAt) in state.accountsSeen where !named.contains(account) {
                onlyUpdated[account] = decidedAt
                accounts[account] = nil
            }
        }
        for entry in history where accounts[entry.accountID] == nil { accounts[entry.accountID] = .some(nil) }
        self.accounts = accounts
        accountsOnlyUpdated = onlyUpdated
        accountsWithNewRejections = limit > 0 ? Set(history.filter(\.isRejection).map(\.accountID)).sorted() : []
    }
}

/// Reads stored history entries and events back (dates as RFC 3339 with milliseconds, as `JSONWriter` writes
/// them).
enum StoredJSON {
    static func decode<T: Decodable>(_ type: T.Type, _ text: String) throws -> T {
        do {
            return try RFC3339.jsonDecoder().decode(T.self, from: Data(text.utf8))
        } catch {
            throw EntitlementStoreError(.corrupt, "a stored \(T.self) could not be read back")
        }
    }
}
