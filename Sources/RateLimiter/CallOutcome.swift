/// How one Apple call ended, as the caller reports it to ``AppleCallGate``.
///
/// Report ``success(latency:)`` for every definitive answer from Apple, including "this receipt is invalid" (21002,
/// 21003, 21010…): Apple did its job. Only answers that say Apple could not serve the request count as failures.
public enum CallOutcome: Sendable, Hashable {
    /// Apple answered definitively.
    case success(latency: Duration)
    /// Apple said it is overloaded or unavailable: status 21005, HTTP 503 or 429. `retryAfter` is its `Retry-After`.
    case throttled(retryAfter: Duration?)
    /// No answer within the call's timeout.
    case timeout
    /// Another failure that says nothing about Apple's load but may pass on retry (connection reset, 5xx other
    /// than 503, 21100-21199 internal errors).
    case failure
    /// The permit was not used: the job was cancelled or shut down before calling Apple. Frees the slot only.
    case notSent

    /// Whether a retry may help.
    public var isRetryable: Bool {
        switch self {
        case .success, .notSent: false
        case .throttled, .timeout, .failure: true
        }
    }

    /// Whether this outcome is a sign of overload, which lowers the adaptive concurrency limit.
    public var isOverload: Bool {
        switch self {
        case .throttled, .timeout: true
        case .success, .failure, .notSent: false
        }
    }

    /// Whether the circuit breaker counts this call as failed.
    public var countsAsBreakerFailure: Bool {
        switch self {
        case .throttled, .timeout, .failure: true
        case .success, .notSent: false
        }
    }

    /// Apple's `Retry-After`, if it sent one.
    public var retryAfter: Duration? {
        if case .throttled(let retryAfter) = self { return retryAfter }
        return nil
    }
}

/// Which queue a caller waits in. Within a priority callers are served first come, first served; every first attempt
/// waiting goes before any retry, so retries cannot crowd out new work when Apple struggles.
public enum CallPriority: Int, Sendable, Hashable, CaseIterable, Comparable {
    /// A job's first call to Apple.
    case firstAttempt = 0
    /// A retry; also draws on the ``RetryBudget``.
    case retry = 1

    public static func < (lhs: CallPriority, rhs: CallPriority) -> Bool { lhs.rawValue < rhs.rawValue }
}
