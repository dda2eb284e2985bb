import Foundation
import RateLimiter
import Synchronization

/// The reconciler's share of Google's per-minute quota: at most ``callsPerMinute`` Developer API calls in any
/// wall-clock minute, counting its own `voidedpurchases.list` pages and the subscription reads its re-read jobs make
/// the workers spend. Whole minutes of the wall clock, as Google counts its per-minute quota (and as the workers'
/// `QuotaBudget` does), so the share holds in each of Google's windows.
///
/// One per `verify-worker reconcile` process, shared by every Play app's sweep and the re-reads.
public final class GooglePlayQuotaShare<Clock: GateClock>: Sendable where Clock.Instant: Sendable {
    /// Calls allowed per wall-clock minute (at least 1).
    public let callsPerMinute: Int
    let clock: Clock
    private let usage = Mutex<(windowStart: Int64, used: Int)>((0, 0))

    public init(callsPerMinute: Int, clock: Clock) {
        self.callsPerMinute = max(1, callsPerMinute)
        self.clock = clock
    }

    /// Takes one call of the budget, waiting on the clock for the next minute when this one's is spent.
    public func spend() async throws {
        while true {
            let now = clock.unixMillisecondsNow
            let windowStart = now - ((now % 60_000) + 60_000) % 60_000
            let admitted = usage.withLock { usage -> Bool in
                if usage.windowStart != windowStart { usage = (windowStart, 0) }
                guard usage.used < callsPerMinute else { return false }
                usage.used += 1
                return true
            }
            if admitted { return }
            try await clock.sleep(
                until: clock.now.advanced(by: .milliseconds(windowStart + 60_000 - now)), tolerance: nil)
        }
    }
}
