import Foundation
import RateLimiter
import Synchronization

/// The API's rate limits: requests per caller (the token's label), and failed authentications per client address
/// (so guessing tokens is slow). Buckets are GCRA token buckets (`RateLimiter`); the table of addresses is bounded,
/// and forgets everything when full rather than grow (a forgotten address only gets a fresh allowance).
public final class RequestLimiter: Sendable {
    public struct Limits: Sendable, Hashable {
        /// Requests per second per caller, and its burst.
        public var perCaller: Double
        public var callerBurst: Int
        /// Failed authentications per second per client address, and their burst.
        public var failuresPerAddress: Double
        public var failureBurst: Int

        public init(
            perCaller: Double = 200, callerBurst: Int = 400, failuresPerAddress: Double = 2, failureBurst: Int = 10
        ) {
            self.perCaller = perCaller
            self.callerBurst = callerBurst
            self.failuresPerAddress = failuresPerAddress
            self.failureBurst = failureBurst
        }
    }

    private struct State {
        var callers: [String: TokenBucket<ContinuousClock.Instant>] = [:]
        var failures: [String: TokenBucket<ContinuousClock.Instant>] = [:]
    }

    public let limits: Limits
    private let state = Mutex(State())
    private let clock = ContinuousClock()
    static let maximumEntries = 10_000

    public init(limits: Limits) { self.limits = limits }

    /// Whether a request of this caller may go now (consumes one).
    public func admitCaller(_ label: String) -> Bool {
        let now = clock.now
        let limits = self.limits
        return state.withLock { state in
            if state.callers.count >= Self.maximumEntries, state.callers[label] == nil { state.callers = [:] }
            var bucket =
                state.callers[label] ?? TokenBucket(ratePerSecond: limits.perCaller, burst: limits.callerBurst)
            let admitted = bucket.tryAcquire(now: now)
            state.callers[label] = bucket
            return admitted
        }
    }

    /// Whether this address may try to authenticate now (it has failure allowance left). Does not consume.
    public func addressMayTry(_ address: String) -> Bool {
        let now = clock.now
        return state.withLock { state in
            guard let bucket = state.failures[address] else { return true }
            return bucket.earliestAdmission(now: now) <= now
        }
    }

    /// Counts a failed authentication from this address.
    public func recordFailure(_ address: String) {
        let now = clock.now
        let limits = self.limits
        state.withLock { state in
            if state.failures.count >= Self.maximumEntries, state.failures[address] == nil { state.failures = [:] }
            var bucket =
                state.failures[address]
                ?? TokenBucket(ratePerSecond: limits.failuresPerAddress, burst: limits.failureBurst)
            _ = bucket.tryAcquire(now: now)
            state.failures[address] = bucket
        }
    }
}
