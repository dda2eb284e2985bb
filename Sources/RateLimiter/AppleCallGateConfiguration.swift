import CodedErrors
import Messages

/// Everything that tunes an ``AppleCallGate``. Each property's default is the one the storm benchmark was tuned with
/// (docs/RATE-LIMITING.md explains the choices).
public struct AppleCallGateConfiguration: Sendable, Hashable {
    /// What a caller meets while the breaker is open.
    public enum OpenBreakerBehaviour: String, Sendable, Hashable {
        /// Wait (in the fair queue) until a probe or a normal call is allowed, or the caller's deadline passes.
        case wait
        /// Throw ``AppleCallGateError/Code/circuitOpen`` at once.
        case failFast = "fail_fast"
    }

    /// The gate's name in metrics (dimension `gate`). Default: "apple".
    public var label: String
    /// This worker's id, the key of its ``ThrottleSignal``s. Default: "worker".
    public var workerID: String
    /// Request-rate limits per endpoint; an endpoint not listed here uses ``defaultRateLimit``.
    /// Default: ``EndpointRateLimit/appleDefaults(environment:verifyReceiptRateLimit:)`` for production.
    public var rateLimits: [StoreEndpoint: EndpointRateLimit]
    /// The rate limit of endpoints missing from ``rateLimits``; `nil` means unlimited. Default: 50/s, burst 5.
    public var defaultRateLimit: EndpointRateLimit?
    /// The adaptive concurrency limit. Default: ``AIMDConfiguration/init(minimum:maximum:start:decreaseFactor:increasePerWindow:utilisationForIncrease:)``.
    public var concurrency: AIMDConfiguration
    /// The circuit breaker. Default: ``CircuitBreakerConfiguration/init(window:windowSlots:minimumCalls:failureRatioThreshold:coolDown:maximumCoolDown:probeCalls:)``.
    public var breaker: CircuitBreakerConfiguration
    /// The share of first attempts that may be retried. Default: 0.1.
    public var retryBudgetRatio: Double
    /// The largest burst of retries the budget allows. Default: 10.
    public var retryBudgetMaximumTokens: Double
    /// Retries the budget allows per second whatever the traffic, so few jobs in a storm still progress.
    /// Default: 0 (retries earned by first attempts only); the worker sets 2.
    public var retryBudgetMinimumPerSecond: Double
    /// What callers meet while the breaker is open. Default: ``OpenBreakerBehaviour/wait``.
    public var whenBreakerOpen: OpenBreakerBehaviour
    /// The most callers that may wait; more are refused with ``AppleCallGateError/Code/queueFull``. Default: 10 000.
    public var maximumQueuedWaiters: Int
    /// The longest `Retry-After` honoured, against absurd values. Default: 60 s.
    public var maximumRetryAfter: Duration
    /// When this worker publishes its throttle signal. Default: ``ThrottlePublishPolicy/init(minimumInterval:heartbeatInterval:signalLifetime:significantLimitChange:)``.
    public var publishPolicy: ThrottlePublishPolicy
    /// The longest a remote signal is honoured after it arrives. Default: 30 s.
    public var maximumRemoteSignalLifetime: Duration
    /// Whether another worker's open breaker holds this worker's calls too. Default: true.
    public var followRemoteOpenBreaker: Bool
    /// Calls allowed per window for sets of endpoints (a store's quotas). Default: none (Apple publishes rates, not
    /// quotas); Google Play's gate takes ``QuotaBudget/googlePlayDefaults(daily:perMinute:)``.
    public var quotaBudgets: [QuotaBudget]

    public init(
        label: String = "apple",
        workerID: String = "worker",
        rateLimits: [StoreEndpoint: EndpointRateLimit] = EndpointRateLimit.appleDefaults(environment: .production),
        defaultRateLimit: EndpointRateLimit? = EndpointRateLimit(ratePerSecond: 50, burst: 5),
        concurrency: AIMDConfiguration = AIMDConfiguration(),
        breaker: CircuitBreakerConfiguration = CircuitBreakerConfiguration(),
        retryBudgetRatio: Double = 0.1,
        retryBudgetMaximumTokens: Double = 10,
        retryBudgetMinimumPerSecond: Double = 0,
        whenBreakerOpen: OpenBreakerBehaviour = .wait,
        maximumQueuedWaiters: Int = 10_000,
        maximumRetryAfter: Duration = .seconds(60),
        publishPolicy: ThrottlePublishPolicy = ThrottlePublishPolicy(),
        maximumRemoteSignalLifetime: Duration = .seconds(30),
        followRemoteOpenBreaker: Bool = true,
        quotaBudgets: [QuotaBudget] = []
    ) {
        self.label = label
        self.workerID = workerID
        self.rateLimits = rateLimits
        self.defaultRateLimit = defaultRateLimit
        self.concurrency = concurrency
        self.breaker = breaker
        self.retryBudgetRatio = retryBudgetRatio
        self.retryBudgetMaximumTokens = retryBudgetMaximumTokens
        self.retryBudgetMinimumPerSecond = retryBudgetMinimumPerSecond
        self.whenBreakerOpen = whenBreakerOpen
        self.maximumQueuedWaiters = max(0, maximumQueuedWaiters)
        self.maximumRetryAfter = max(maximumRetryAfter, .zero)
        self.publishPolicy = publishPolicy
        self.maximumRemoteSignalLifetime = maximumRemoteSignalLifetime
        self.followRemoteOpenBreaker = followRemoteOpenBreaker
        self.quotaBudgets = quotaBudgets
    }

    /// A gate for Google Play's Developer API, labelled `google_play` in metrics: Google's per-endpoint limits
    /// (``EndpointRateLimit/googlePlayDefaults(minuteQuota:)``), its daily and per-minute quota budgets, and every
    /// other setting at its default. Each store has its own gate, so one store's `Retry-After` or open breaker never
    /// holds the other's calls. Its retry budget earns two retries a second without traffic, as the Apple gate's:
    /// otherwise the retries a 5xx storm queued wait for first attempts that may never come (the last Play jobs of a
    /// burst waited for their deadline).
    public static func googlePlay(
        workerID: String = "worker", dailyQuota: Int = QuotaBudget.googlePlayDailyQuota,
        minuteQuota: Int = QuotaBudget.googlePlayMinuteQuota
    ) -> AppleCallGateConfiguration {
        AppleCallGateConfiguration(
            label: "google_play", workerID: workerID,
            rateLimits: EndpointRateLimit.googlePlayDefaults(minuteQuota: minuteQuota), retryBudgetMinimumPerSecond: 2,
            quotaBudgets: QuotaBudget.googlePlayDefaults(daily: dailyQuota, perMinute: minuteQuota))
    }
}

/// Permission to make one Apple call. Report its outcome exactly once with ``AppleCallGate/report(_:_:)``: until
/// then it holds a concurrency slot (a second report of the same permit is ignored).
public struct CallPermit<Instant: InstantProtocol<Duration>>: Sendable, Hashable where Instant: Sendable {
    /// Unique within its gate.
    public let id: UInt64
    /// The endpoint it may call.
    public let endpoint: StoreEndpoint
    /// The queue it came from.
    public let priority: CallPriority
    /// When it was granted; overload reports of calls granted before the last decrease are one congestion event.
    public let issuedAt: Instant
    /// Whether it is a half-open breaker probe.
    public let isProbe: Bool
}

/// A point-in-time view of a gate, for tests, logs and the benchmark.
public struct AppleCallGateSnapshot: Sendable, Hashable {
    /// The local AIMD limit.
    public var localLimit: Int
    /// The limit in force: the local limit lowered by remote signals.
    public var effectiveLimit: Int
    /// Calls in flight.
    public var inFlight: Int
    /// Callers waiting.
    public var queuedWaiters: Int
    /// The local breaker state.
    public var breakerState: BreakerState
    /// Retry tokens left.
    public var retryBudgetTokens: Double
    /// Whether calls are held by a `Retry-After` (local or remote) or a remote open breaker.
    public var isHeld: Bool
    /// How many other workers have a live signal.
    public var liveRemoteSignals: Int
}
