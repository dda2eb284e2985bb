import CodedErrors
import RateLimiter
import Synchronization

/// Helpers for the rate limiter tests (prefixed to avoid clashes in the shared test target).
enum RateLimiterTestSupport {
    typealias Instant = ManualClock.Instant

    /// The instant `milliseconds` after a manual clock's origin.
    static func at(_ milliseconds: Int) -> Instant {
        Instant(offset: .milliseconds(milliseconds))
    }

    /// A gate configuration with no rate limits and a fixed concurrency limit, so a test controls every constraint.
    static func configuration(
        limit: Int, breaker: CircuitBreakerConfiguration = CircuitBreakerConfiguration(),
        whenBreakerOpen: AppleCallGateConfiguration.OpenBreakerBehaviour = .wait,
        retryBudgetMaximumTokens: Double = 10
    ) -> AppleCallGateConfiguration {
        AppleCallGateConfiguration(
            label: "test", workerID: "local", rateLimits: [:], defaultRateLimit: nil,
            concurrency: AIMDConfiguration(minimum: limit, maximum: limit, start: limit), breaker: breaker,
            retryBudgetMaximumTokens: retryBudgetMaximumTokens, whenBreakerOpen: whenBreakerOpen)
    }

    /// Whether `condition` holds within `limit` of wall time, looked at every millisecond or so: waits for other tasks
    /// to reach a state, never for a guessed time, and a broken test cannot hang. Bounded by time, not
    /// by a count of yields: on a loaded machine other tasks may not run for a long while between two yields, and a
    /// count ran out before the gate's waiters had queued (the test then advanced its manual clock before the gate
    /// scheduled its wake-up, and waited for ever).
    @discardableResult
    static func eventually(within limit: Duration = .seconds(60), _ condition: () -> Bool) async -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: limit)
        while clock.now < deadline {
            if condition() { return true }
            await Task.yield()
            try? await Task.sleep(for: .milliseconds(1))
        }
        return condition()
    }
}

/// Records strings from many tasks, in order.
final class RateLimiterTestRecorder: Sendable {
    private let items = Mutex<[String]>([])

    func append(_ item: String) {
        items.withLock { $0.append(item) }
    }

    var all: [String] { items.withLock { $0 } }
}

/// A metrics sink that keeps what it receives, so tests need not bootstrap swift-metrics.
final class RateLimiterTestMetrics: RateLimiterMetrics {
    struct Recorded {
        var states: [GateMetricsState] = []
        var rejections: [AppleCallGateError.Code] = []
        var retries = 0
        var budgetExhausted = 0
        var outcomes: [CallOutcome] = []
    }

    private let recorded = Mutex(Recorded())

    var snapshot: Recorded { recorded.withLock { $0 } }

    func recordState(_ state: GateMetricsState) { recorded.withLock { $0.states.append(state) } }
    func recordRejection(_ reason: AppleCallGateError.Code) { recorded.withLock { $0.rejections.append(reason) } }
    func recordRetry() { recorded.withLock { $0.retries += 1 } }
    func recordRetryBudgetExhausted() { recorded.withLock { $0.budgetExhausted += 1 } }
    func recordOutcome(_ outcome: CallOutcome) { recorded.withLock { $0.outcomes.append(outcome) } }
}
