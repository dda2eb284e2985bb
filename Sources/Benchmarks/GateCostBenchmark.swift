import RateLimiter

/// Measures what one acquire/report pair through an ``AppleCallGate`` costs, on the real clock, with rate limits off
/// so that only the gate's own work is timed. Used by `verify-worker bench ratelimiter`.
public enum GateCostBenchmark {
    /// One measurement.
    public struct Result: Sendable, Codable, Hashable {
        /// Tasks acquiring at once.
        public var tasks: Int
        /// The concurrency limit in force.
        public var concurrencyLimit: Int
        /// Acquire/report pairs completed.
        public var operations: Int
        /// Wall time per pair, in nanoseconds (for the contended case: total wall time / pairs).
        public var nanosecondsPerAcquireRelease: Double
        /// Pairs per second.
        public var operationsPerSecond: Double
        /// Calls in flight and waiters left at the end (both must be 0: nothing leaked).
        public var leftInFlight: Int
        public var leftQueued: Int
    }

    private static func gate(limit: Int) -> AppleCallGate<ContinuousClock> {
        let configuration = AppleCallGateConfiguration(
            label: "bench", rateLimits: [:], defaultRateLimit: nil,
            concurrency: AIMDConfiguration(minimum: limit, maximum: limit, start: limit),
            maximumQueuedWaiters: 1_000_000)
        return AppleCallGate(configuration: configuration, clock: ContinuousClock(), metrics: NoRateLimiterMetrics())
    }

    /// One task acquiring and reporting `iterations` times: the fast path.
    public static func uncontended(iterations: Int) async throws -> Result {
        let gate = gate(limit: 64)
        let count = max(iterations, 1)
        let clock = ContinuousClock()
        let start = clock.now
        for _ in 0..<count {
            let permit = try await gate.acquire(.verifyReceipt)
            gate.report(permit, .success(latency: .zero))
        }
        let elapsed = clock.now - start
        return result(tasks: 1, limit: 64, operations: count, elapsed: elapsed, gate: gate)
    }

    /// `tasks` tasks acquiring and reporting `perTask` times each through a limit of `limit`: most acquisitions
    /// queue and are resumed by another task's report.
    public static func contended(tasks: Int, perTask: Int, limit: Int) async throws -> Result {
        let gate = gate(limit: limit)
        let clock = ContinuousClock()
        let start = clock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<max(tasks, 1) {
                group.addTask {
                    for _ in 0..<max(perTask, 1) {
                        let permit = try await gate.acquire(.verifyReceipt)
                        await Task.yield()
                        gate.report(permit, .success(latency: .zero))
                    }
                }
            }
            try await group.waitForAll()
        }
        let elapsed = clock.now - start
        return result(
            tasks: max(tasks, 1), limit: limit, operations: max(tasks, 1) * max(perTask, 1), elapsed: elapsed,
            gate: gate)
    }

    private static func result(
        tasks: Int, limit: Int, operations: Int, elapsed: Duration, gate: AppleCallGate<ContinuousClock>
    ) -> Result {
        let snapshot = gate.snapshot()
        let seconds = max(elapsed.seconds, 1e-12)
        return Result(
            tasks: tasks, concurrencyLimit: limit, operations: operations,
            nanosecondsPerAcquireRelease: seconds * 1e9 / Double(operations),
            operationsPerSecond: Double(operations) / seconds, leftInFlight: snapshot.inFlight,
            leftQueued: snapshot.queuedWaiters)
    }
}
