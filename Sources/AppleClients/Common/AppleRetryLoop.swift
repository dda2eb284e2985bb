/// A simple bounded retry loop for standalone use of the clients (the worker uses its rate limiter instead).
public struct AppleRetryPolicy: Sendable {
    /// Attempts in total, the first included. Default: 3.
    public var maxAttempts: Int
    /// The wait before the first retry; it doubles after each attempt. Default: 200 ms.
    public var initialBackoff: Duration
    /// The longest wait between attempts. Default: 10 s.
    public var maxBackoff: Duration
    /// A `Retry-After` longer than this ends the loop with the retryable outcome. Default: 60 s.
    public var maxRetryAfter: Duration

    /// Creates a policy; every argument has the documented default.
    public init(
        maxAttempts: Int = 3, initialBackoff: Duration = .milliseconds(200), maxBackoff: Duration = .seconds(10),
        maxRetryAfter: Duration = .seconds(60)
    ) {
        self.maxAttempts = maxAttempts
        self.initialBackoff = initialBackoff
        self.maxBackoff = maxBackoff
        self.maxRetryAfter = maxRetryAfter
    }

    /// Runs `operation` until it answers, fails for good or the budget is spent; waits with `sleep` between
    /// attempts (the longer of the backoff and Apple's `Retry-After`). Returns the last outcome.
    public func run<Answer: Sendable>(
        sleep: @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) },
        _ operation: () async throws -> AppleOutcome<Answer>
    ) async throws -> AppleOutcome<Answer> {
        var backoff = initialBackoff
        var attempt = 1
        while true {
            let outcome = try await operation()
            guard case .retryable(let advice) = outcome, attempt < maxAttempts else { return outcome }
            if let retryAfter = advice.retryAfter, retryAfter > maxRetryAfter { return outcome }
            try await sleep(max(backoff, advice.retryAfter ?? .zero))
            backoff = min(backoff * 2, maxBackoff)
            attempt += 1
        }
    }
}
