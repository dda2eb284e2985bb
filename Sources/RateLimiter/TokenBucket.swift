/// A request-rate limit with a burst allowance, implemented as GCRA (the generic cell rate algorithm).
///
/// GCRA behaves exactly like a token bucket of capacity `burst` refilled at `ratePerSecond`, but keeps one instant
/// (the theoretical arrival time) instead of a fractional token count, so it never drifts and needs no refill task.
/// Over any window of length `w`, at most `burst + ratePerSecond × w` requests are admitted.
public struct TokenBucket<Instant: InstantProtocol<Duration>>: Sendable where Instant: Sendable {
    /// The sustained rate in requests per second.
    public private(set) var ratePerSecond: Double
    /// How many requests may go at once after a quiet period.
    public private(set) var burst: Int

    /// Time between two requests at the sustained rate.
    private var emissionInterval: Duration
    /// How far ahead of the sustained schedule a request may go: `(burst - 1) × emissionInterval`.
    private var tolerance: Duration
    /// The theoretical arrival time of the next request; `nil` until the first request (a full bucket).
    private var theoreticalArrival: Instant?

    /// A bucket admitting `ratePerSecond` requests per second on average, with bursts of up to `burst`.
    /// Non-positive values are raised to the smallest meaningful ones (0.001 requests/s, burst 1).
    public init(ratePerSecond: Double, burst: Int) {
        self.ratePerSecond = max(ratePerSecond, 0.001)
        self.burst = max(burst, 1)
        self.emissionInterval = .seconds(1) / self.ratePerSecond
        self.tolerance = self.emissionInterval * (self.burst - 1)
        self.theoreticalArrival = nil
    }

    /// Admits one request at `now` if the limit allows it, consuming its token.
    public mutating func tryAcquire(now: Instant) -> Bool {
        guard earliestAdmission(now: now) <= now else { return false }
        let base = theoreticalArrival.map { max($0, now) } ?? now
        theoreticalArrival = base.advanced(by: emissionInterval)
        return true
    }

    /// The earliest instant, not before `now`, at which a request would be admitted.
    public func earliestAdmission(now: Instant) -> Instant {
        guard let arrival = theoreticalArrival else { return now }
        let allowedAt = arrival.advanced(by: .zero - tolerance)
        return max(allowedAt, now)
    }
}
