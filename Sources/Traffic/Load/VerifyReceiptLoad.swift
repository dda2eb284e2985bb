import AppleClients
import Foundation
import StoreHTTP
import Synchronization

/// A closed-loop load test of ``VerifyReceiptClient``: `concurrency` callers each send one verification after
/// another until `requests` are done. Compares throughput with Little's law (concurrency / latency).
public struct VerifyReceiptLoad: Sendable {
    /// The figures of one run, in the units of their names.
    public struct Report: Sendable, Encodable {
        public var concurrency: Int
        public var requests: Int
        public var answered: Int
        public var retryable: Int
        public var failed: Int
        public var elapsedSeconds: Double
        public var callsPerSecond: Double
        public var latencyP50Ms: Double
        public var latencyP99Ms: Double
        public var latencyMaxMs: Double
        /// The fake Apple's added latency, when known.
        public var configuredLatencyMs: Double?
        /// p50 of sequential calls before the run (no queueing anywhere).
        public var unloadedLatencyP50Ms: Double
        /// concurrency / latency, using the configured latency when given, else the unloaded one.
        public var littleBoundCallsPerSecond: Double
        /// callsPerSecond / littleBoundCallsPerSecond.
        public var fractionOfBound: Double
        /// Connections libcurl opened during warm-up and run.
        public var connectionsOpened: Int?
        /// Share of the run the curl threads spent working (not waiting in `epoll_wait`), one entry per engine
        /// shard.
        public var pollThreadBusyFraction: [Double]?
        /// Turns of the poll loops, all shards together.
        public var pollLoopIterations: Int?
        /// How many curl engines (threads) the calls were spread over.
        public var engineShards: Int?
        /// The machine's 1-minute load average (`/proc/loadavg`) when the measured phase started and ended.
        public var loadAverageStart: Double?
        public var loadAverageEnd: Double?

        enum CodingKeys: String, CodingKey {
            case concurrency, requests, answered, retryable, failed
            case elapsedSeconds = "elapsed_s"
            case callsPerSecond = "calls_per_s"
            case latencyP50Ms = "latency_p50_ms"
            case latencyP99Ms = "latency_p99_ms"
            case latencyMaxMs = "latency_max_ms"
            case configuredLatencyMs = "configured_latency_ms"
            case unloadedLatencyP50Ms = "unloaded_latency_p50_ms"
            case littleBoundCallsPerSecond = "little_bound_calls_per_s"
            case fractionOfBound = "fraction_of_bound"
            case connectionsOpened = "connections_opened"
            case pollThreadBusyFraction = "poll_thread_busy_fraction"
            case pollLoopIterations = "poll_loop_iterations"
            case engineShards = "engine_shards"
            case loadAverageStart = "load_average_start"
            case loadAverageEnd = "load_average_end"
        }
    }

    public var client: VerifyReceiptClient
    /// When given, its counters go into the report.
    public var engine: ShardedCurlEngine?
    public var concurrency: Int
    public var requests: Int
    public var receiptData: String
    public var configuredLatency: Duration?

    /// Describes a run.
    public init(
        client: VerifyReceiptClient, engine: ShardedCurlEngine?, concurrency: Int, requests: Int, receiptData: String,
        configuredLatency: Duration?
    ) {
        self.client = client
        self.engine = engine
        self.concurrency = max(concurrency, 1)
        self.requests = max(requests, 1)
        self.receiptData = receiptData
        self.configuredLatency = configuredLatency
    }

    /// Warms up (one call per concurrent caller, so connections exist), measures unloaded latency, then runs.
    public func run() async throws -> Report {
        let clock = ContinuousClock()
        _ = try await phase(requests: concurrency)
        var unloaded: [Duration] = []
        for _ in 0..<20 {
            let start = clock.now
            _ = try await client.verify(receiptData: receiptData)
            unloaded.append(start.duration(to: clock.now))
        }
        let before = engine?.shardStatistics
        let loadAtStart = Self.loadAverage()
        let started = clock.now
        let result = try await phase(requests: requests)
        let elapsed = started.duration(to: clock.now)
        let after = engine?.shardStatistics
        let loadAtEnd = Self.loadAverage()

        let latencies = result.latencies.sorted()
        let elapsedSeconds = elapsed.seconds
        let unloadedP50 = Self.percentile(unloaded.sorted(), 0.5).seconds
        let boundLatency = configuredLatency.map(\.seconds).flatMap { $0 > 0 ? $0 : nil } ?? unloadedP50
        let bound = Double(concurrency) / max(boundLatency, 1e-9)
        let throughput = Double(requests) / max(elapsedSeconds, 1e-9)
        return Report(
            concurrency: concurrency, requests: requests, answered: result.answered, retryable: result.retryable,
            failed: result.failed, elapsedSeconds: elapsedSeconds, callsPerSecond: throughput,
            latencyP50Ms: Self.percentile(latencies, 0.5).seconds * 1000,
            latencyP99Ms: Self.percentile(latencies, 0.99).seconds * 1000,
            latencyMaxMs: (latencies.last ?? .zero).seconds * 1000,
            configuredLatencyMs: configuredLatency.map { $0.seconds * 1000 },
            unloadedLatencyP50Ms: unloadedP50 * 1000, littleBoundCallsPerSecond: bound,
            fractionOfBound: throughput / bound,
            connectionsOpened: after.map { $0.reduce(0) { $0 + $1.connectionsOpened } },
            pollThreadBusyFraction: before.flatMap { before in
                after.map { after in
                    zip(before, after).map { ($1.busyTime - $0.busyTime).seconds / max(elapsedSeconds, 1e-9) }
                }
            },
            pollLoopIterations: before.flatMap { before in
                after.map { after in zip(before, after).reduce(0) { $0 + $1.1.loopIterations - $1.0.loopIterations } }
            },
            engineShards: after?.count, loadAverageStart: loadAtStart, loadAverageEnd: loadAtEnd)
    }

    private struct PhaseResult: Sendable {
        var latencies: [Duration] = []
        var answered = 0
        var retryable = 0
        var failed = 0
    }

    private func phase(requests: Int) async throws -> PhaseResult {
        let claimed = RequestCounter()
        let client = self.client
        let receiptData = self.receiptData
        return try await withThrowingTaskGroup(of: PhaseResult.self) { group in
            for _ in 0..<min(concurrency, requests) {
                group.addTask {
                    let clock = ContinuousClock()
                    var mine = PhaseResult()
                    while claimed.value.add(1, ordering: .relaxed).newValue <= requests {
                        let start = clock.now
                        let outcome = try await client.verify(receiptData: receiptData)
                        mine.latencies.append(start.duration(to: clock.now))
                        switch outcome {
                        case .answered: mine.answered += 1
                        case .retryable: mine.retryable += 1
                        case .failed: mine.failed += 1
                        }
                    }
                    return mine
                }
            }
            var total = PhaseResult()
            total.latencies.reserveCapacity(requests)
            for try await part in group {
                total.latencies += part.latencies
                total.answered += part.answered
                total.retryable += part.retryable
                total.failed += part.failed
            }
            return total
        }
    }

    /// The 1-minute load average from `/proc/loadavg`, or nil where there is none.
    public static func loadAverage() -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return nil }
        return text.split(separator: " ").first.flatMap { Double($0) }
    }

    private static func percentile(_ sorted: [Duration], _ fraction: Double) -> Duration {
        guard !sorted.isEmpty else { return .zero }
        let index = min(sorted.count - 1, Int((Double(sorted.count) * fraction).rounded(.up)) - 1)
        return sorted[max(index, 0)]
    }
}

/// The shared count of requests claimed by the callers of one phase.
private final class RequestCounter: Sendable {
    let value = Atomic<Int>(0)
}

extension Duration {
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
