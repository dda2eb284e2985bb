import Foundation

/// The clock every part of the rate limiter reads: a Swift `Clock` measured in `Duration`, plus the wall time that
/// cluster throttle signals carry between workers.
///
/// Production uses `ContinuousClock`; tests and the storm simulation use ``ManualClock``.
public protocol GateClock: Clock where Duration == Swift.Duration {
    /// Milliseconds since 1970-01-01 UTC at this clock's `now`. Used only to stamp and read ``ThrottleSignal``s,
    /// which travel between machines whose monotonic clocks do not agree.
    var unixMillisecondsNow: Int64 { get }
}

extension ContinuousClock: GateClock {
    /// The system wall clock, in milliseconds since 1970.
    public var unixMillisecondsNow: Int64 {
        Int64((Date().timeIntervalSince1970 * 1000).rounded())
    }
}

extension Duration {
    /// This duration in seconds as a `Double` (attosecond precision is not needed for rates and ratios).
    var seconds: Double {
        let parts = components
        return Double(parts.seconds) + Double(parts.attoseconds) * 1e-18
    }

    /// This duration in whole milliseconds, rounded down.
    var wholeMilliseconds: Int64 {
        let parts = components
        return parts.seconds * 1000 + parts.attoseconds / 1_000_000_000_000_000
    }
}
