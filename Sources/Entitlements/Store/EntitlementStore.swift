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
    /// The transaction with this id; else every transaction of the subscription with this original id.
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

    public init(inputs: [ProjectionInput], positions: [TopicPosition] = [], webhookURLs: [String] = []) {
        self.inputs = inputs
        self.positions = positions
        self.webhookURLs = webhookURLs
    }
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

    public init(results: [EntitlementProjection.Result], events: [LifecycleEvent]) {
        self.results = results
        self.events = events
    }
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

    public init(
        accountID: String, firstSeen: Date, lastDecidedAt: Date, transactions: [ProjectedTransaction],
        consumables: [ConsumableProduct: Int]
    ) {
        self.accountID = accountID
        self.firstSeen = firstSeen
        self.lastDecidedAt = lastDecidedAt
        self.transactions = transactions
        self.consumables = consumables
    }
}

/// A consumable product of one store (product ids are each store's own).
public struct ConsumableProduct: Sendable, Hashable, Comparable {
    public var store: Store
    public var productID: String

    public init(store: Store = .appStore, productID: String) {
        self.store = store
        self.productID = productID
    }

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

    public init(event: LifecycleEvent, url: String, attempts: Int) {
        self.event = event
        self.url = url
        self.attempts = attempts
    }
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
            case .verdict(let verdict):
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
