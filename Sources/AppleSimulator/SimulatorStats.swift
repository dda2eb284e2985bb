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
        /// again. Counted up to ``SimulatorStats/distinctLimit``.
        public var distinct: Int

        init() {
            requests = [:]
            statuses = [:]
            distinct = 0
        }
    }

    /// Distinct requests remembered at most (8 bytes each); past it `distinct` stops growing.
    public static let distinctLimit = 4_000_000

    private let counters = Mutex((snapshot: Snapshot(), seen: Set<Int>()))

    init() {}

    /// Counts a call to `endpoint` about `subject` (compared by hash: a collision under-counts by one).
    func record<Subject: Hashable>(endpoint: String, subject: Subject) {
        let key = subject.hashValue
        counters.withLock { counters in
            counters.snapshot.requests[endpoint, default: 0] += 1
            if counters.seen.count < Self.distinctLimit, counters.seen.insert(key).inserted {
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

    public func snapshot() -> Snapshot { counters.withLock { $0.snapshot } }

    public func reset() { counters.withLock { $0 = (Snapshot(), []) } }
}
