import Metrics

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
        let dimensions = [(RateLimiterMetricNames.gateDimension, gateLabel)]
        limit = Gauge(label: RateLimiterMetricNames.concurrencyLimit, dimensions: dimensions)
        inFlight = Gauge(label: RateLimiterMetricNames.inFlight, dimensions: dimensions)
        queued = Gauge(label: RateLimiterMetricNames.queuedWaiters, dimensions: dimensions)
        breaker = Gauge(label: RateLimiterMetricNames.breakerState, dimensions: dimensions)
        retries = Counter(label: RateLimiterMetricNames.retries, dimensions: dimensions)
        budgetExhausted = Counter(label: RateLimiterMetricNames.budgetExhausted, dimensions: dimensions)
        var rejections: [AppleCallGateError.Code: Counter] = [:]
        for code in AppleCallGateError.Code.allCases {
            rejections[code] = Counter(
                label: RateLimiterMetricNames.rejections,
                dimensions: dimensions + [(RateLimiterMetricNames.reasonDimension, code.rawValue)])
        }
        self.rejections = rejections
        var outcomes: [String: Counter] = [:]
        for label in CallOutcome.metricLabels {
            outcomes[label] = Counter(
                label: RateLimiterMetricNames.outcomes,
                dimensions: dimensions + [(RateLimiterMetricNames.outcomeDimension, label)])
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
