/// A simple bounded retry loop for standalone use of the clients (the worker uses its rate limiter instead).
public struct AppleRetryPolicy: Sendable {
    /// Attempts in total, the first included. Default: 3.
    public var maximumAttempts: Int
    /// The wait before the first retry; it doubles after each attempt. Default: 200 ms.
    public var initialBackoff: Duration
    /// The longest wait between attempts. Default: 10 s.
    public var maximumBackoff: Duration
    /// A `Retry-After` longer than this ends the loop with the retryable outcome. Default: 60 s.
    public var maximumRetryAfter: Duration

    /// Creates a policy; every argument has the documented default.
    public init(
        maximumAttempts: Int = 3, initialBackoff: Duration = .milliseconds(200),
        maximumBackoff: Duration = .seconds(10),
        maximumRetryAfter: Duration = .seconds(60)
    ) {
        self.maximumAttempts = maximumAttempts
        self.initialBackoff = initialBackoff
        self.maximumBackoff = maximumBackoff
        self.maximumRetryAfter = maximumRetryAfter
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
            guard case .retryable(let advice) = outcome, attempt < maximumAttempts else { return outcome }
            if let retryAfter = advice.retryAfter, retryAfter > maximumRetryAfter { return outcome }
            try await sleep(max(backoff, advice.retryAfter ?? .zero))
            backoff = min(backoff * 2, maximumBackoff)
            attempt += 1
        }
    }
}
