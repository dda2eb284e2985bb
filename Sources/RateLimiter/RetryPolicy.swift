/// When to try an Apple call again: exponential backoff with full jitter, a per-job attempt limit, `Retry-After`.
///
/// The delay before retry number `n` (the first retry is `n = 0`) is uniform in `[0, min(maximumBackoff, base × 2ⁿ)]`
/// ("full jitter", AWS Architecture Blog, *Exponential Backoff and Jitter*): it spreads a fleet's retries evenly
/// instead of in synchronised waves. A `Retry-After` from Apple is a floor on the delay. The share of retries in all
/// calls is bounded separately, by the ``RetryBudget`` that ``AppleCallGate`` applies when a retry asks to go.
public struct RetryPolicy: Sendable, Hashable {
    /// The backoff unit. Default: 200 ms.
    public var base: Duration
    /// The largest backoff before jitter. Default: 10 s.
    public var maximumBackoff: Duration
    /// The most calls one job may make, first attempt included. Default: 5.
    public var maximumAttempts: Int

    public init(base: Duration = .milliseconds(200), maximumBackoff: Duration = .seconds(10), maximumAttempts: Int = 5)
    {
        self.base = max(base, .nanoseconds(1))
        self.maximumBackoff = max(maximumBackoff, self.base)
        self.maximumAttempts = max(1, maximumAttempts)
    }

    /// Why a job stops retrying.
    public enum StopReason: String, Sendable, Hashable {
        /// The job made `maximumAttempts` calls.
        case attemptsExhausted = "attempts_exhausted"
        /// The next attempt would start after the job's deadline.
        case deadlineExceeded = "deadline_exceeded"
        /// The outcome is final (a success, or a failure that a retry cannot fix).
        case notRetryable = "not_retryable"
    }

    /// What to do after a call.
    public enum Action: Sendable, Hashable {
        /// Wait `delay`, then acquire again at ``CallPriority/retry``.
        case retry(after: Duration)
        /// Stop; the job ends with what it has (typically `unverifiable`, `apple_unavailable`).
        case stop(StopReason)
    }

    /// The longest backoff for retry number `retryIndex` (0 for the first retry):
    /// `min(maximumBackoff, base × 2^retryIndex)`.
    public func maximumDelay(retryIndex: Int) -> Duration {
        let exponent = min(max(retryIndex, 0), 62)
        let maximum = maximumBackoff.seconds
        let scaled = base.seconds * Double(UInt64(1) << UInt64(exponent))
        return scaled >= maximum ? maximumBackoff : base * Int(1 << exponent)
    }

    /// A full-jitter delay for retry number `retryIndex`, uniform in `[0, maximumDelay(retryIndex)]`.
    public func jitteredDelay(retryIndex: Int, using random: inout some RandomNumberGenerator) -> Duration {
        let maximum = maximumDelay(retryIndex: retryIndex)
        let nanoseconds = maximum.seconds * 1e9
        guard nanoseconds >= 1 else { return .zero }
        return .nanoseconds(Int64(Double.random(in: 0...nanoseconds, using: &random)))
    }

    /// Decides what follows a call that was attempt number `attempt` (1 for the first call) and ended with `outcome`.
    ///
    /// - Parameters:
    ///   - remainingUntilDeadline: time left before the job's deadline, if it has one.
    public func decide(
        attempt: Int, outcome: CallOutcome, remainingUntilDeadline: Duration?,
        using random: inout some RandomNumberGenerator
    ) -> Action {
        guard outcome.isRetryable else { return .stop(.notRetryable) }
        guard attempt < maximumAttempts else { return .stop(.attemptsExhausted) }
        var delay = jitteredDelay(retryIndex: attempt - 1, using: &random)
        if let retryAfter = outcome.retryAfter, retryAfter > delay {
            delay = retryAfter
        }
        if let remaining = remainingUntilDeadline, delay >= remaining {
            return .stop(.deadlineExceeded)
        }
        return .retry(after: delay)
    }
}
