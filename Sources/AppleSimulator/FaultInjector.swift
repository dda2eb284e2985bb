import Foundation
import Synchronization

/// A source of uniform numbers in `0..<1`, injectable so that tests decide which requests fail.
public protocol SimulatorRandomSource: Sendable {
    func nextUnit() -> Double
}

/// The system random generator.
public struct SystemRandomSource: SimulatorRandomSource {
    public init() {}
    public func nextUnit() -> Double { Double.random(in: 0..<1) }
}

/// The faults `POST /sim/faults` switches on. Zero or absent means off for every field.
///
/// JSON keys: `latency_ms`, `latency_jitter_ms` (uniform extra `0...jitter`), `status_21005_ratio`
/// (verifyReceipt answers `{"status":21005}`; the Server API answers 500 with error 5000001),
/// `http_503_ratio`, `http_429_ratio` (with `Retry-After`, a UNIX time in milliseconds), `timeout_ratio` (the
/// request is held `timeout_hold_ms`, default 30 s, at most 120 s, then answered 504), `duration_s` (how long the
/// plan lasts; absent or 0: until replaced), `retry_after_ms` (how far ahead Retry-After points; default 1000).
/// Notification delivery: `notification_drop_ratio` (the attempt is not sent and counts as failed, so Apple's
/// retry schedule applies), `notification_duplicate_ratio` (a delivered notification is sent once more),
/// `notification_delay_ms` (every attempt waits this long first).
public struct FaultPlan: Codable, Sendable, Equatable {
    public var latencyMs: Double = 0
    public var latencyJitterMs: Double = 0
    public var status21005Ratio: Double = 0
    public var http503Ratio: Double = 0
    public var http429Ratio: Double = 0
    public var timeoutRatio: Double = 0
    public var durationS: Double = 0
    public var retryAfterMs: Double = 1000
    public var timeoutHoldMs: Double = 30_000
    public var notificationDropRatio: Double = 0
    public var notificationDuplicateRatio: Double = 0
    public var notificationDelayMs: Double = 0

    public init() {}

    enum CodingKeys: String, CodingKey {
        case latencyMs = "latency_ms"
        case latencyJitterMs = "latency_jitter_ms"
        case status21005Ratio = "status_21005_ratio"
        case http503Ratio = "http_503_ratio"
        case http429Ratio = "http_429_ratio"
        case timeoutRatio = "timeout_ratio"
        case durationS = "duration_s"
        case retryAfterMs = "retry_after_ms"
        case timeoutHoldMs = "timeout_hold_ms"
        case notificationDropRatio = "notification_drop_ratio"
        case notificationDuplicateRatio = "notification_duplicate_ratio"
        case notificationDelayMs = "notification_delay_ms"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        func value(
            _ key: CodingKeys, _ fallback: Double = 0, max upper: Double = .greatestFiniteMagnitude
        ) throws
            -> Double
        {
            let raw = try container.decodeIfPresent(Double.self, forKey: key) ?? fallback
            guard raw.isFinite else { return fallback }
            return Swift.min(Swift.max(raw, 0), upper)
        }
        latencyMs = try value(.latencyMs, max: 600_000)
        latencyJitterMs = try value(.latencyJitterMs, max: 600_000)
        status21005Ratio = try value(.status21005Ratio, max: 1)
        http503Ratio = try value(.http503Ratio, max: 1)
        http429Ratio = try value(.http429Ratio, max: 1)
        timeoutRatio = try value(.timeoutRatio, max: 1)
        durationS = try value(.durationS)
        retryAfterMs = try value(.retryAfterMs, 1000, max: 3_600_000)
        timeoutHoldMs = try value(.timeoutHoldMs, 30_000, max: 120_000)
        notificationDropRatio = try value(.notificationDropRatio, max: 1)
        notificationDuplicateRatio = try value(.notificationDuplicateRatio, max: 1)
        notificationDelayMs = try value(.notificationDelayMs, max: 600_000)
    }
}

/// What to do with one Apple request.
enum FaultOutcome: Equatable {
    case answer
    case status21005
    case http503
    case http429(retryAfterMs: Int64)
    case timeout(holdMs: Int)
}

/// Holds the current `FaultPlan` and draws, per request, the delay and the fault to apply. Each ratio is drawn
/// independently, in the order timeout, 503, 429, 21005; a ratio of 1 always applies.
final class FaultInjector: Sendable {
    private struct State {
        var plan = FaultPlan()
        var until: Date?
    }

    private let state = Mutex(State())
    private let random: any SimulatorRandomSource
    private let now: @Sendable () -> Date

    init(random: any SimulatorRandomSource, now: @escaping @Sendable () -> Date) {
        self.random = random
        self.now = now
    }

    func set(_ plan: FaultPlan) {
        let until = plan.durationS > 0 ? now().addingTimeInterval(plan.durationS) : nil
        state.withLock { $0 = State(plan: plan, until: until) }
    }

    /// The plan in force (an empty plan once its duration is over) and the seconds it has left.
    func current() -> (plan: FaultPlan, remainingS: Double?) {
        let now = now()
        return state.withLock { state in
            if let until = state.until {
                if until <= now {
                    state = State()
                    return (state.plan, nil)
                }
                return (state.plan, until.timeIntervalSince(now))
            }
            return (state.plan, nil)
        }
    }

    /// The faults for one notification send attempt: its delay, whether it is dropped, and whether a delivered one
    /// is sent twice.
    func notificationFaults() -> (delayMs: Double, drop: Bool, duplicate: Bool) {
        let plan = current().plan
        func hit(_ ratio: Double) -> Bool { ratio > 0 && (ratio >= 1 || random.nextUnit() < ratio) }
        return (plan.notificationDelayMs, hit(plan.notificationDropRatio), hit(plan.notificationDuplicateRatio))
    }

    /// The added latency (ms) and the outcome for one request.
    func draw() -> (delayMs: Double, outcome: FaultOutcome) {
        var plan = current().plan
        // Notification faults do not touch Apple's endpoints; without others, the fast path stays.
        plan.notificationDropRatio = 0
        plan.notificationDuplicateRatio = 0
        plan.notificationDelayMs = 0
        if plan == FaultPlan() { return (0, .answer) }
        var delay = plan.latencyMs
        if plan.latencyJitterMs > 0 { delay += random.nextUnit() * plan.latencyJitterMs }
        func hit(_ ratio: Double) -> Bool { ratio > 0 && (ratio >= 1 || random.nextUnit() < ratio) }
        if hit(plan.timeoutRatio) { return (delay, .timeout(holdMs: Int(plan.timeoutHoldMs))) }
        if hit(plan.http503Ratio) { return (delay, .http503) }
        if hit(plan.http429Ratio) {
            return (delay, .http429(retryAfterMs: AppleDates.nowMs(now()) + Int64(plan.retryAfterMs)))
        }
        if hit(plan.status21005Ratio) { return (delay, .status21005) }
        return (delay, .answer)
    }
}
