import Decision
import Foundation
import Ledger
import Messages
import Synchronization
import Worker

/// Measures claims per second and latency of a ledger, the way the pipeline uses it: one settle per job
/// (snapshot, decision, apply). Used by `verify-worker bench ledger`.
public struct LedgerBenchmark: Sendable {
    /// How the scenario's transaction ids repeat.
    public enum IDs: String, Sendable, Codable, CaseIterable {
        /// Every job claims a transaction never seen: one insert per job (granted).
        case fresh
        /// Every job presents a transaction its account already owns: the ledger answers already_granted.
        case repeated
    }

    /// One measured scenario.
    public struct Result: Sendable, Codable {
        public var backend: String
        public var concurrency: Int
        public var ids: IDs
        public var claims: Int
        public var seconds: Double
        public var claimsPerSecond: Double
        public var p50Milliseconds: Double
        public var p99Milliseconds: Double
        public var maximumMilliseconds: Double
        public var errors: Int

        enum CodingKeys: String, CodingKey {
            case backend, concurrency, ids, claims, seconds, errors
            case claimsPerSecond = "claims_per_second"
            case p50Milliseconds = "p50_ms"
            case p99Milliseconds = "p99_ms"
            case maximumMilliseconds = "max_ms"
        }
    }

    public var claims: Int
    public var policy: DecisionPolicy

    public init(claims: Int) {
        self.claims = max(1, claims)
        self.policy = LedgerSettlement.policy(catalog: nil, allowSandbox: false, now: Date())
    }

    /// Runs one scenario against a migrated, running ledger.
    public func run(ledger: some Ledger, backend: String, concurrency: Int, ids: IDs) async throws -> Result {
        let runID = UUID().uuidString.prefix(8)
        let repeatedSet = 64
        if ids == .repeated {
            for i in 0..<repeatedSet {
                _ = try await ledger.settle(
                    job: job("\(runID)-seed-\(i)", account: "acct-\(i)"),
                    evidence: evidence("\(runID)-tx-\(i)"), policy: policy)
            }
        }
        let next = Counter()
        let clock = ContinuousClock()
        let started = clock.now
        let (latencies, errors) = try await withThrowingTaskGroup(of: ([Duration], Int).self) { group in
            for _ in 0..<max(1, concurrency) {
                group.addTask {
                    var latencies: [Duration] = []
                    var errors = 0
                    while true {
                        let i = next.next()
                        guard i < claims else { break }
                        let account = ids == .fresh ? "acct-\(i)" : "acct-\(i % repeatedSet)"
                        let transaction = ids == .fresh ? "\(runID)-tx-\(i)" : "\(runID)-tx-\(i % repeatedSet)"
                        let begin = clock.now
                        do {
                            _ = try await ledger.settle(
                                job: job("\(runID)-job-\(i)", account: account), evidence: evidence(transaction),
                                policy: policy)
                            latencies.append(begin.duration(to: clock.now))
                        } catch {
                            errors += 1
                        }
                    }
                    return (latencies, errors)
                }
            }
            return try await group.reduce(into: ([Duration](), 0)) {
                $0.0 += $1.0; $0.1 += $1.1
            }
        }
        let elapsed = started.duration(to: clock.now)
        let sorted = latencies.map(Self.milliseconds).sorted()
        func percentile(_ p: Double) -> Double {
            guard !sorted.isEmpty else { return 0 }
            return sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)]
        }
        let seconds = Self.milliseconds(elapsed) / 1000
        return Result(
            backend: backend, concurrency: concurrency, ids: ids, claims: claims, seconds: seconds,
            claimsPerSecond: seconds > 0 ? Double(sorted.count) / seconds : 0, p50Milliseconds: percentile(0.50),
            p99Milliseconds: percentile(0.99), maximumMilliseconds: sorted.last ?? 0, errors: errors)
    }

    private func job(_ id: String, account: String) -> ReceiptJob {
        ReceiptJob(jobID: id, accountID: account, proof: .transactionID("bench"))
    }

    private func evidence(_ transactionID: String) -> PurchaseEvidence {
        PurchaseEvidence(
            source: .apple, authenticity: .authentic, environment: .production, bundleID: "com.example.bench",
            transactions: [
                PurchaseTransaction(
                    transactionID: transactionID, productID: "com.example.bench.pro", productType: .nonConsumable,
                    purchaseDate: policy.now.addingTimeInterval(-60))
            ], appleStatus: 0)
    }

    static func milliseconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
    }

    /// Hands out job numbers to the benchmark's tasks.
    private final class Counter: Sendable {
        private let value = Mutex(0)
        func next() -> Int {
            value.withLock { value in
                let current = value
                value += 1
                return current
            }
        }
    }
}

extension LedgerBenchmark {
    /// `bench ledger`'s report: every scenario's figures.
    public struct Report: Encodable, Sendable {
        public var benchmark = "ledger"
        public var claimsPerScenario: Int
        public var results: [Result]
    }

    /// Both ledgers, 1 and 64 concurrent tasks, fresh and repeated ids: PostgreSQL at `postgresURL` (else the test
    /// script's), SQLite files from the prefix `sqlitePath` (else a temporary directory), deleted after.
    public static func runSuite(postgresURL: String?, sqlitePath: String?, claims: Int) async throws -> Report {
        try await BenchPostgres.with(url: postgresURL) { postgres in
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "verify-bench-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let base = sqlitePath ?? directory.appendingPathComponent("ledger").path
            let benchmark = LedgerBenchmark(claims: claims)
            var results: [Result] = []
            for backend in ["postgres", "sqlite"] {
                for concurrency in [1, 64] {
                    for ids in IDs.allCases {
                        let tag = "c\(concurrency)_\(ids.rawValue)_\(UUID().uuidString.prefix(6).lowercased())"
                        let url =
                            backend == "postgres"
                            ? postgres + (postgres.contains("?") ? "&" : "?") + "schema=bench_\(tag)"
                            : "sqlite:\(base)-\(tag)"
                        let configuration = LedgerConfiguration(maximumConnections: 32)
                        let result = try await LedgerFactory.withLedger(url: url, configuration: configuration) {
                            try await benchmark.run(ledger: $0, backend: backend, concurrency: concurrency, ids: ids)
                        }
                        if backend == "sqlite" {
                            for suffix in ["", "-wal", "-shm"] {
                                try? FileManager.default.removeItem(atPath: "\(base)-\(tag)\(suffix)")
                            }
                        }
                        results.append(result)
                    }
                }
            }
            return Report(claimsPerScenario: claims, results: results)
        }
    }
}
