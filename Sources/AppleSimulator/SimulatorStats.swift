import Synchronization

/// Counts of requests per endpoint and of answers per status, so tests and benchmarks can count Apple calls
/// independently of the worker (`GET /sim/stats`).
///
/// Endpoints are named by path without the leading slash and without ids (`verifyReceipt`,
/// `sandbox/verifyReceipt`, `inApps/v1/transactions`, `sandbox/inApps/v2/history`, `sim/mint`, …). Statuses are
/// the verifyReceipt `status` values (`"0"`, `"21007"`, …), App Store Server API error codes (`"4040010"`), and
/// `"http_<code>"` for every other HTTP answer (`"http_200"`, `"http_503"`, `"http_429"`, `"http_504"`).
public final class SimulatorStats: Sendable {
    /// A copy of the counters.
    public struct Snapshot: Codable, Sendable, Equatable {
        public var requests: [String: Int]
        public var statuses: [String: Int]
        /// Distinct requests Apple's endpoints were asked (a verifyReceipt body, a Server API path's transaction
        /// id), however often each was asked: a job read again after a rebalance, or a call retried, asks the same
        /// again. Counted up to ``SimulatorStats/maximumDistinctCounted``.
        public var distinct: Int
        /// Notification send attempts (`POST /sim/notifications/target`, docs/APPLE-SIMULATOR.md).
        public var notifications: NotificationCounts

        init() {
            requests = [:]
            statuses = [:]
            distinct = 0
            notifications = NotificationCounts()
        }
    }

    /// Counts of notification send attempts.
    public struct NotificationCounts: Codable, Sendable, Equatable {
        /// Attempts the target answered with a 2xx.
        public var sent = 0
        /// Attempts that failed (non-2xx, connection error, injected drop).
        public var failed = 0
        /// Attempts that were retries of a failed one (also counted in `sent` or `failed`).
        public var retried = 0
        /// Extra deliveries of a delivered notification (`notification_duplicate_ratio`; also in `sent`/`failed`).
        public var duplicated = 0
    }

    /// Distinct requests remembered at most (8 bytes each); past it `distinct` stops growing.
    public static let maximumDistinctCounted = 4_000_000

    private let counters = Mutex((snapshot: Snapshot(), seen: Set<Int>()))

    init() {}

    /// Counts a call to `endpoint` about `subject` (compared by hash: a collision under-counts by one).
    func record<Subject: Hashable>(endpoint: String, subject: Subject) {
        let key = subject.hashValue
        counters.withLock { counters in
            counters.snapshot.requests[endpoint, default: 0] += 1
            if counters.seen.count < Self.maximumDistinctCounted, counters.seen.insert(key).inserted {
                counters.snapshot.distinct += 1
            }
        }
    }

    func record(endpoint: String) {
        counters.withLock { $0.snapshot.requests[endpoint, default: 0] += 1 }
    }

    func record(status: String) {
        counters.withLock { $0.snapshot.statuses[status, default: 0] += 1 }
    }

    func recordNotification(attempt delivered: Bool, retry: Bool, duplicate: Bool = false) {
        counters.withLock { counters in
            if delivered {
                counters.snapshot.notifications.sent += 1
            } else {
                counters.snapshot.notifications.failed += 1
            }
            if retry { counters.snapshot.notifications.retried += 1 }
            if duplicate { counters.snapshot.notifications.duplicated += 1 }
        }
    }

    public func snapshot() -> Snapshot { counters.withLock { $0.snapshot } }

    public func reset() { counters.withLock { $0 = (Snapshot(), []) } }
}
