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
    }

    private let counters = Mutex(Snapshot(requests: [:], statuses: [:]))

    init() {}

    func record(endpoint: String) {
        counters.withLock { $0.requests[endpoint, default: 0] += 1 }
    }

    func record(status: String) {
        counters.withLock { $0.statuses[status, default: 0] += 1 }
    }

    public func snapshot() -> Snapshot { counters.withLock { $0 } }

    public func reset() { counters.withLock { $0 = Snapshot(requests: [:], statuses: [:]) } }
}
