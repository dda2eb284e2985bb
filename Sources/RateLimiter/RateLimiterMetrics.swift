import CodedErrors
import Metrics
import Observability

/// Where ``AppleCallGate`` sends its measurements. Injected, so tests can observe them without bootstrapping the
/// process-wide swift-metrics system; production uses ``SwiftMetricsRateLimiterMetrics``.
public protocol RateLimiterMetrics: Sendable {
    /// The gate's state after a change.
    func recordState(_ state: GateMetricsState)
    /// An acquisition failed.
    func recordRejection(_ reason: AppleCallGateError.Code)
    /// A retry was admitted.
    func recordRetry()
    /// A retry had to wait because the retry budget was spent.
    func recordRetryBudgetExhausted()
    /// A call ended.
    func recordOutcome(_ outcome: CallOutcome)
}

/// The gauges ``RateLimiterMetrics/recordState(_:)`` receives.
public struct GateMetricsState: Sendable, Hashable {
    /// The effective concurrency limit.
    public var concurrencyLimit: Int
    /// Calls in flight.
    public var inFlight: Int
    /// Callers waiting.
    public var queuedWaiters: Int
    /// The local breaker state.
    public var breakerState: BreakerState
}

/// Ignores every measurement.
public struct NoRateLimiterMetrics: RateLimiterMetrics {
    public init() {}
    public func recordState(_ state: GateMetricsState) {}
    public func recordRejection(_ reason: AppleCallGateError.Code) {}
    public func recordRetry() {}
    public func recordRetryBudgetExhausted() {}
    public func recordOutcome(_ outcome: CallOutcome) {}
}

/// Sends the gate's measurements to swift-metrics, under the names in ``RateLimiterMetricNames``.
public struct SwiftMetricsRateLimiterMetrics: RateLimiterMetrics {
    private let limit: Gauge
    private let inFlight: Gauge
    private let queued: Gauge
    private let breaker: Gauge
    private let retries: Counter
    private let budgetExhausted: Counter
    private let rejections: [AppleCallGateError.Code: Counter]
    private let outcomes: [String: Counter]

    /// Metrics for the gate labelled `gateLabel`.
    public init(gateLabel: String) {
        let dimensions = [(MetricNames.gateLabel, gateLabel)]
        limit = Gauge(label: MetricNames.rateLimiterConcurrencyLimit, dimensions: dimensions)
        inFlight = Gauge(label: MetricNames.rateLimiterInFlight, dimensions: dimensions)
        queued = Gauge(label: MetricNames.rateLimiterQueuedWaiters, dimensions: dimensions)
        breaker = Gauge(label: MetricNames.rateLimiterBreakerState, dimensions: dimensions)
        retries = Counter(label: MetricNames.rateLimiterRetries, dimensions: dimensions)
        budgetExhausted = Counter(label: MetricNames.rateLimiterRetryBudgetExhausted, dimensions: dimensions)
        var rejections: [AppleCallGateError.Code: Counter] = [:]
        for code in AppleCallGateError.Code.allCases {
            rejections[code] = Counter(
                label: MetricNames.rateLimiterRejections,
                dimensions: dimensions + [(MetricNames.reasonLabel, code.rawValue)])
        }
        self.rejections = rejections
        var outcomes: [String: Counter] = [:]
        for label in CallOutcome.metricLabels {
            outcomes[label] = Counter(
                label: MetricNames.rateLimiterOutcomes,
                dimensions: dimensions + [(MetricNames.outcomeLabel, label)])
        }
        self.outcomes = outcomes
    }

    public func recordState(_ state: GateMetricsState) {
        limit.record(state.concurrencyLimit)
        inFlight.record(state.inFlight)
        queued.record(state.queuedWaiters)
        breaker.record(state.breakerState.gaugeValue)
    }

    public func recordRejection(_ reason: AppleCallGateError.Code) {
        rejections[reason]?.increment()
    }

    public func recordRetry() {
        retries.increment()
    }

    public func recordRetryBudgetExhausted() {
        budgetExhausted.increment()
    }

    public func recordOutcome(_ outcome: CallOutcome) {
        outcomes[outcome.metricLabel]?.increment()
    }
}

extension CallOutcome {
    /// Every value of the `outcome` metric dimension.
    static let metricLabels = ["success", "throttled", "timeout", "failure", "not_sent"]

    /// The value of the `outcome` metric dimension.
    var metricLabel: String {
        switch self {
        case .success: "success"
        case .throttled: "throttled"
        case .timeout: "timeout"
        case .failure: "failure"
        case .notSent: "not_sent"
        }
    }
}
