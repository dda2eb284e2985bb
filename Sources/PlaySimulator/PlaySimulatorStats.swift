import Synchronization

/// Counts of requests per route and of answers per route and HTTP status, so tests and benchmarks count Google
/// calls independently of the worker (`GET /sim/stats`). Routes are Google's method names (``PlayRoute``) and the
/// simulator's own `sim/…` paths; every request Google's routes receive gets exactly one answer, counted under
/// `statuses[route]["<code>"]`, and every fault a rule injected is also counted under `faults[kind]`.
public final class PlaySimulatorStats: Sendable {
    public struct Snapshot: Codable, Sendable, Equatable {
        public var requests: [String: Int] = [:]
        public var statuses: [String: [String: Int]] = [:]
        public var faults: [String: Int] = [:]
        /// The Voided Purchases API's pages answered and the records they held.
        public var voidedPurchases = VoidedPurchaseCounts()

        enum CodingKeys: String, CodingKey {
            case requests, statuses, faults
            case voidedPurchases = "voided_purchases"
        }
    }

    public struct VoidedPurchaseCounts: Codable, Sendable, Equatable {
        public var pages = 0
        public var records = 0
    }

    private let counters = Mutex(Snapshot())

    init() {}

    func record(request route: String) {
        counters.withLock { $0.requests[route, default: 0] += 1 }
    }

    func record(answer status: Int, route: String) {
        counters.withLock { $0.statuses[route, default: [:]][String(status), default: 0] += 1 }
    }

    func record(fault: PlayFaultKind) {
        counters.withLock { $0.faults[fault.rawValue, default: 0] += 1 }
    }

    func record(voidedPage records: Int) {
        counters.withLock {
            $0.voidedPurchases.pages += 1
            $0.voidedPurchases.records += records
        }
    }

    public func snapshot() -> Snapshot { counters.withLock { $0 } }

    public func reset() { counters.withLock { $0 = Snapshot() } }
}
