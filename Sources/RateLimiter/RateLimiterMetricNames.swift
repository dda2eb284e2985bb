/// Every metric the rate limiter emits, in one table. Each carries the dimension `gate` (the gate's label, e.g.
/// `verify_receipt` or `app_store_server_api`).
public enum RateLimiterMetricNames {
    /// Gauge: the effective concurrency limit (local AIMD limit, lowered by remote signals).
    public static let concurrencyLimit = "verify_ratelimiter_concurrency_limit"
    /// Gauge: Apple calls in flight through the gate.
    public static let inFlight = "verify_ratelimiter_in_flight"
    /// Gauge: callers waiting in the gate.
    public static let queuedWaiters = "verify_ratelimiter_queued_waiters"
    /// Counter: acquisitions that failed; dimension `reason` (deadline_exceeded, circuit_open, queue_full).
    public static let rejections = "verify_ratelimiter_rejections_total"
    /// Gauge: the local breaker state, 0 closed, 1 half-open, 2 open.
    public static let breakerState = "verify_ratelimiter_breaker_state"
    /// Counter: retries admitted.
    public static let retries = "verify_ratelimiter_retries_total"
    /// Counter: retries that had to wait because the retry budget was spent.
    public static let budgetExhausted = "verify_ratelimiter_retry_budget_exhausted_total"
    /// Counter: call outcomes reported; dimension `outcome` (success, throttled, timeout, failure, not_sent).
    public static let outcomes = "verify_ratelimiter_outcomes_total"

    /// The dimension naming the gate.
    public static let gateDimension = "gate"
    /// The dimension giving a rejection's reason.
    public static let reasonDimension = "reason"
    /// The dimension giving a call's outcome.
    public static let outcomeDimension = "outcome"
}
