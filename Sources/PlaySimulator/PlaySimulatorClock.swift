import Foundation
import Synchronization

/// The simulator's clock, compressible so that Google's three-day acknowledgement window and subscription periods
/// pass in a test: the base clock's time since the clock was made runs `scale` times faster, and `advance(by:)`
/// jumps it forward. Every date the simulator writes or judges (purchase times, expiries, refunds, access-token and
/// assertion lifetimes) comes from here; injected latency is real time.
public final class PlaySimulatorClock: Sendable {
    private let base: @Sendable () -> Date
    private let origin: Date
    private let scale: Double
    private let offset = Mutex<TimeInterval>(0)
    /// A clock that moves only by `advance(by:)`: nothing the simulator schedules runs by itself on it.
    public let isManual: Bool

    /// The system clock sped up `scale` times (1: real time; at most 1,000,000; not a positive number: 1) from now on.
    public convenience init(scale: Double = 1, base: @escaping @Sendable () -> Date = { Date() }) {
        self.init(scale: scale, base: base, isManual: false)
    }

    private init(scale: Double, base: @escaping @Sendable () -> Date, isManual: Bool) {
        self.isManual = isManual
        self.base = base
        self.origin = base()
        // At most a million times real speed, so that every date stays writable for decades of real time.
        self.scale = scale.isFinite && scale > 0 ? min(scale, 1_000_000) : 1
    }

    /// A clock that stands still at `start` and moves only by `advance(by:)`: what tests use.
    public static func manual(start: Date = Date(timeIntervalSince1970: 1_800_000_000)) -> PlaySimulatorClock {
        PlaySimulatorClock(scale: 1, base: { start }, isManual: true)
    }

    public func now() -> Date {
        let elapsed = base().timeIntervalSince(origin) * scale
        return origin.addingTimeInterval(elapsed + offset.withLock { $0 })
    }

    /// Moves the clock forward (a negative or non-finite amount is ignored: time never runs back).
    public func advance(by seconds: TimeInterval) {
        guard seconds.isFinite, seconds > 0 else { return }
        offset.withLock { $0 += seconds }
    }
}
