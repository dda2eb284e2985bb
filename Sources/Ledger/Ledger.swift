import CodedErrors
import Decision
import Foundation
import Logging
import Messages

/// The cluster's memory of which transaction went to which account, and of the verdict each job got.
///
/// Implementations: ``PostgresLedger`` (`postgres://…`, for clusters) and ``SQLiteLedger`` (`sqlite:PATH`, the
/// embedded default for one node), made by ``LedgerFactory``. Both keep the same schema and semantics
/// (docs/LEDGER.md). Every operation is idempotent under redelivery, and every failure is a ``LedgerError``.
///
/// Lifecycle: ``run()`` must be running (in a task, or as a service of a ServiceGroup) while the ledger is used;
/// it returns when its task is cancelled, after closing the connections. Call ``migrate()`` once at start.
///
/// Every ledger has every capability: the verification leases, the follow-up call records, the reconciler's state
/// and the subscription re-reads are tables of the one schema, so both ledgers and every test double implement them
/// all. The narrower protocols it refines name what one part uses (the reconciler needs only its state), never a
/// capability a ledger may lack.
public protocol Ledger:
    VerificationLeaseStore, FollowUpRecordStore, ReconcilerStateStore, SubscriptionRereadStore,
    PlayPurchaseRecordStore, PlaySubscriptionRereadStore
{
    /// Runs the ledger's background work (the PostgreSQL connection pool) until the task is cancelled.
    func run() async throws

    /// Creates or upgrades the schema. Safe to call from several workers at once and more than once.
    func migrate() async throws

    /// The schema versions applied, oldest first (also a cheap "is the ledger reachable" probe).
    func schemaVersions() async throws -> [Int]

    /// Reads, in one call, the verdict already recorded for `jobID` and the claims on the given transactions and
    /// on every transaction of the given subscriptions (original transaction ids).
    func snapshot(
        jobID: String, transactionIDs: [String], originalTransactionIDs: [String]
    ) async throws
        -> LedgerSnapshot

    /// Applies a decision's writes and records its verdict for the job, atomically: all or nothing.
    func apply(_ decision: LedgerDecision) async throws -> ApplyResult

    /// Applies writes without a verdict (operator tools: revoke, move ownership, notification updates), atomically.
    /// Returns false when a claim or a move found the ledger changed (nothing was written).
    func perform(_ writes: [LedgerWrite]) async throws -> Bool

    /// Every claim an account owns, by transaction id (operators' `verify-worker ledger show --account`).
    func claims(ownedBy accountID: String) async throws -> [TransactionClaim]
}

extension Ledger {
    /// The snapshot a job's evidence needs: the job's prior verdict and the claims of its transactions.
    public func snapshot(for job: ReceiptJob, evidence: PurchaseEvidence) async throws -> LedgerSnapshot {
        let ids = Array(Set(evidence.transactions.map(\.transactionID))).sorted()
        // The subscriptions of the transactions, those they replaced (Google Play's linked tokens), and a Google Play
        // purchase's own token (its claims, when the ledger knows it, decide a repeat or a replay without Google).
        var keys = Set(evidence.transactions.map(\.subscriptionKey))
        keys.formUnion(evidence.transactions.compactMap(\.linkedSubscriptionKey))
        if case .googlePlay(let purchase) = job.proof { keys.insert(purchase.purchaseToken) }
        let originals = Array(keys).sorted()
        var snapshot = try await snapshot(jobID: job.jobID, transactionIDs: ids, originalTransactionIDs: originals)
        // A Google Play notification about a token nobody owns may be a pending purchase completing. Read apart from
        // the claims: the record is written once, before its completion, and never changes.
        if snapshot.priorVerdict == nil, let token = evidence.playNotification?.purchaseToken,
            snapshot.claims(ofSubscription: token).isEmpty
        {
            snapshot.pendingPlayPurchase = try await pendingPlayPurchase(purchaseToken: token)
        }
        return snapshot
    }

    /// Every claim of one subscription.
    public func subscriptionClaims(originalTransactionID: String) async throws -> [TransactionClaim] {
        try await snapshot(jobID: "", transactionIDs: [], originalTransactionIDs: [originalTransactionID]).claims
    }

    /// Revokes one transaction (a refund found outside a job). Idempotent.
    public func revoke(transactionID: String, at revokedAt: Date) async throws {
        _ = try await perform([.revoke(transactionID: transactionID, revokedAt: revokedAt)])
    }
}

/// Settings shared by both ledgers. Each key is also a `VERIFY_LEDGER_…` setting of `verify-worker run`.
public struct LedgerConfiguration: Sendable {
    /// How long one operation may take before it fails with ``LedgerError/Code/timeout``. Default: 5 s.
    public var operationTimeout: Duration
    /// How long to try to connect to PostgreSQL before failing with ``LedgerError/Code/unavailable``.
    /// Default: 3 s.
    public var connectTimeout: Duration
    /// The most PostgreSQL connections per worker. Default: 16.
    public var maximumConnections: Int
    /// How long SQLite waits for another writer's lock (`busy_timeout`). Default: 5 s.
    public var busyTimeout: Duration

    public init(
        operationTimeout: Duration = .seconds(5), connectTimeout: Duration = .seconds(3),
        maximumConnections: Int = 16, busyTimeout: Duration = .seconds(5)
    ) {
        self.operationTimeout = operationTimeout
        self.connectTimeout = connectTimeout
        self.maximumConnections = maximumConnections
        self.busyTimeout = busyTimeout
    }
}

/// Makes the ledger a URL names: `postgres://user[:password]@host[:port]/database` or `sqlite:PATH`.
public enum LedgerFactory {
    public static func make(
        url: String, configuration: LedgerConfiguration = .init(), logger: Logger = Logger(label: "verify.ledger")
    ) throws -> any Ledger {
        if url.hasPrefix("sqlite:") {
            var path = String(url.dropFirst("sqlite:".count))
            if path.hasPrefix("//") { path.removeFirst(2) }
            guard !path.isEmpty else {
                throw LedgerError(.invalidConfiguration, "sqlite URL without a path (expected sqlite:PATH)")
            }
            return try SQLiteLedger(path: path, configuration: configuration, logger: logger)
        }
        if url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") {
            return try PostgresLedger(url: url, configuration: configuration, logger: logger)
        }
        throw LedgerError(.invalidConfiguration, "ledger URL must start with postgres:// or sqlite:")
    }

    /// The ledger `url` names, for a command starting: making one only reads its URL and opens a SQLite file (a
    /// PostgreSQL ledger connects later), so whatever fails here is the setting, which `settingError` turns into the
    /// command's own error from one line of reason.
    public static func make<SettingError: Error>(
        url: String, logger: Logger, settingError: (String) -> SettingError
    ) throws(SettingError) -> any Ledger {
        do {
            return try make(url: url, configuration: LedgerConfiguration(), logger: logger)
        } catch let error as LedgerError {
            throw settingError(error.message)
        } catch {
            throw settingError("\(error)")
        }
    }

    /// Runs `body` with a running, migrated ledger, then stops it (for tools, tests and benchmarks).
    public static func withLedger<T: Sendable>(
        url: String, configuration: LedgerConfiguration = .init(), logger: Logger = Logger(label: "verify.ledger"),
        _ body: @Sendable (any Ledger) async throws -> T
    ) async throws -> T {
        let ledger = try make(url: url, configuration: configuration, logger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await ledger.run() }
            defer { group.cancelAll() }
            try await ledger.migrate()
            return try await body(ledger)
        }
    }
}
