/// The state of a ``CircuitBreaker``, also published in ``ThrottleSignal``s.
public enum BreakerState: String, Sendable, Hashable, Codable {
    /// Calls flow.
    case closed
    /// No calls until the cool-down ends.
    case open
    /// A few probe calls test whether Apple has recovered.
    case halfOpen = "half_open"

    /// A number for the breaker-state gauge: 0 closed, 1 half-open, 2 open.
    public var gaugeValue: Int {
        switch self {
        case .closed: 0
        case .halfOpen: 1
        case .open: 2
        }
    }
}

/// A circuit breaker over a sliding time window of call outcomes.
///
/// Closed: it opens when, over the last `window`, at least `minimumCalls` calls ended and the share that failed
/// reaches `failureRatioThreshold`. Open: no calls for the cool-down. Half-open: up to `probeCalls` probes go; if all
/// succeed the breaker closes (with an empty window), if any fails it opens again with the cool-down doubled (up to
/// `maximumCoolDown`). The window is a ring of `windowSlots` counters, so memory is constant whatever the traffic.
public struct CircuitBreaker<Instant: InstantProtocol<Duration>>: Sendable where Instant: Sendable {

    private struct Slot: Sendable {
        var index: Int64 = -1
        var successes = 0
        var failures = 0
    }

    /// The parameters in force.
    public let configuration: CircuitBreakerConfiguration
    /// The current state (call ``refresh(now:)`` first to let an elapsed cool-down take effect).
    public private(set) var state: BreakerState = .closed
    /// When the open state ends, while open.
    public private(set) var openUntil: Instant?
    /// Probes handed out in the current half-open period.
    public private(set) var probesIssued = 0
    private var probesSucceeded = 0
    private var currentCoolDown: Duration
    private var slots: [Slot]
    private let origin: Instant
    private let slotLength: Duration

    /// A closed breaker; `origin` is any instant of the clock it will be fed (it anchors the window slots).
    public init(configuration: CircuitBreakerConfiguration = CircuitBreakerConfiguration(), origin: Instant) {
        self.configuration = configuration
        self.currentCoolDown = configuration.coolDown
        self.slots = Array(repeating: Slot(), count: configuration.windowSlots)
        self.origin = origin
        self.slotLength = configuration.window / configuration.windowSlots
    }

    /// Moves from open to half-open once the cool-down has passed.
    public mutating func refresh(now: Instant) {
        if state == .open, let until = openUntil, now >= until {
            state = .halfOpen
            openUntil = nil
            probesIssued = 0
            probesSucceeded = 0
        }
    }

    /// Whether a call may start now, and whether it is a probe. Call ``refresh(now:)`` first.
    public var admission: Admission {
        switch state {
        case .closed: .call
        case .open: .refuse
        case .halfOpen: probesIssued < configuration.probeCalls ? .probe : .refuse
        }
    }

    /// What ``admission`` allows.
    public enum Admission: Sendable, Hashable {
        /// A normal call.
        case call
        /// A probe call in half-open state.
        case probe
        /// No call now.
        case refuse
    }

    /// Records that a probe was handed out.
    public mutating func recordProbeIssued() {
        probesIssued += 1
    }

    /// Records the end of a call. `wasProbe` says whether it was admitted as a probe. Returns whether the state changed.
    @discardableResult
    public mutating func record(failed: Bool, wasProbe: Bool, now: Instant) -> Bool {
        refresh(now: now)
        switch state {
        case .closed:
            addToWindow(failed: failed, now: now)
            let (successes, failures) = windowTotals(now: now)
            let total = successes + failures
            if total >= configuration.minimumCalls,
                Double(failures) >= configuration.failureRatioThreshold * Double(total)
            {
                open(now: now)
                return true
            }
            return false
        case .halfOpen:
            guard wasProbe else { return false }
            if failed {
                currentCoolDown = min(currentCoolDown * 2, configuration.maximumCoolDown)
                open(now: now)
                return true
            }
            probesSucceeded += 1
            if probesSucceeded >= configuration.probeCalls {
                close()
                return true
            }
            return false
        case .open:
            return false
        }
    }

    /// Returns a probe that was handed out but never used (the caller reported ``CallOutcome/notSent``).
    public mutating func returnUnusedProbe() {
        if state == .halfOpen, probesIssued > probesSucceeded { probesIssued -= 1 }
    }

    /// The failure share over the current window (0 when empty).
    func failureRatio(now: Instant) -> Double {
        let (successes, failures) = windowTotals(now: now)
        let total = successes + failures
        return total == 0 ? 0 : Double(failures) / Double(total)
    }

    private mutating func open(now: Instant) {
        state = .open
        openUntil = now.advanced(by: currentCoolDown)
        probesIssued = 0
        probesSucceeded = 0
    }

    private mutating func close() {
        state = .closed
        openUntil = nil
        currentCoolDown = configuration.coolDown
        slots = Array(repeating: Slot(), count: configuration.windowSlots)
    }

    private func slotIndex(now: Instant) -> Int64 {
        let elapsed = origin.duration(to: now)
        guard elapsed > .zero else { return 0 }
        return Int64(elapsed / slotLength)
    }

    private mutating func addToWindow(failed: Bool, now: Instant) {
        let index = slotIndex(now: now)
        let position = Int(index % Int64(slots.count))
        if slots[position].index != index {
            slots[position] = Slot(index: index)
        }
        if failed { slots[position].failures += 1 } else { slots[position].successes += 1 }
    }

    private func windowTotals(now: Instant) -> (successes: Int, failures: Int) {
        let current = slotIndex(now: now)
        let oldest = current - Int64(slots.count) + 1
        var successes = 0
        var failures = 0
        for slot in slots where slot.index >= oldest && slot.index <= current {
            successes += slot.successes
            failures += slot.failures
        }
        return (successes, failures)
    }
}

/// The parameters of a ``CircuitBreaker``.
public struct CircuitBreakerConfiguration: Sendable, Hashable {
    /// The span over which the failure ratio is measured. Default: 1 s.
    public var window: Duration
    /// How many counters the window is split into (its time resolution). Default: 4.
    public var windowSlots: Int
    /// The fewest ended calls in the window before the breaker may open. Default: 10.
    public var minimumCalls: Int
    /// The failure share that opens the breaker. Default: 0.25.
    public var failureRatioThreshold: Double
    /// How long the breaker stays open the first time. Default: 1 s.
    public var coolDown: Duration
    /// The longest cool-down after repeated failed probes. Default: 4 s.
    public var maximumCoolDown: Duration
    /// How many probe calls go in half-open state; all must succeed to close. Default: 5.
    public var probeCalls: Int

    public init(
        window: Duration = .seconds(1), windowSlots: Int = 4, minimumCalls: Int = 10,
        failureRatioThreshold: Double = 0.25, coolDown: Duration = .seconds(1),
        maximumCoolDown: Duration = .seconds(4), probeCalls: Int = 5
    ) {
        self.window = max(window, .milliseconds(1))
        self.windowSlots = max(1, windowSlots)
        self.minimumCalls = max(1, minimumCalls)
        self.failureRatioThreshold = min(max(failureRatioThreshold, 0.01), 1)
        self.coolDown = max(coolDown, .zero)
        self.maximumCoolDown = max(maximumCoolDown, self.coolDown)
        self.probeCalls = max(1, probeCalls)
    }
}
