/// An adaptive limit on concurrent Apple calls: additive increase, multiplicative decrease (AIMD).
///
/// On a sign of overload (21005, 503, 429, timeout) the limit is multiplied by `decreaseFactor`; at most once per
/// round trip, since calls that were already in flight when the limit dropped report the same congestion event.
/// On success the limit grows by `increasePerWindow / limit`, that is by about `increasePerWindow` per window of
/// `limit` successful calls, but only while the limit is actually used (`inFlight ≥ utilisationForIncrease × limit`),
/// so a quiet worker does not drift up to its ceiling and then flood Apple when traffic arrives.
public struct AIMDConcurrencyLimit<Instant: InstantProtocol<Duration>>: Sendable where Instant: Sendable {

    /// The parameters in force.
    public let configuration: AIMDConfiguration
    /// The limit as a real number; ``limit`` is its integer part.
    public private(set) var exactLimit: Double
    /// When the limit last decreased; drops of calls issued before this instant are the same congestion event.
    public private(set) var lastDecrease: Instant?

    /// A limit at `configuration.start`.
    public init(configuration: AIMDConfiguration = AIMDConfiguration()) {
        self.configuration = configuration
        self.exactLimit = Double(configuration.start)
    }

    /// How many calls may be in flight now.
    public var limit: Int {
        max(configuration.minimum, Int(exactLimit))
    }

    /// Records a successful call; `inFlight` counts the calls in flight including this one.
    public mutating func recordSuccess(inFlight: Int) {
        guard Double(inFlight) >= configuration.utilisationForIncrease * exactLimit.rounded(.down) else { return }
        exactLimit = min(Double(configuration.maximum), exactLimit + configuration.increasePerWindow / exactLimit)
    }

    /// Records an overload signal for a call issued at `issuedAt`. Returns whether the limit decreased.
    @discardableResult
    public mutating func recordOverload(issuedAt: Instant, now: Instant) -> Bool {
        if let last = lastDecrease, issuedAt < last { return false }
        exactLimit = max(Double(configuration.minimum), exactLimit * configuration.decreaseFactor)
        lastDecrease = now
        return true
    }
}

/// The parameters of an ``AIMDConcurrencyLimit``.
public struct AIMDConfiguration: Sendable, Hashable {
    /// The limit never drops below this. Default: 1.
    public var minimum: Int
    /// The limit never grows above this. Default: 64.
    public var maximum: Int
    /// The limit at start-up. Default: 8.
    public var start: Int
    /// The factor applied on overload. Default: 0.5 (halve).
    public var decreaseFactor: Double
    /// About how much the limit grows per window of `limit` successes. Default: 1.
    public var increasePerWindow: Double
    /// Successes grow the limit only while `inFlight ≥ utilisationForIncrease × limit`. Default: 0.8.
    public var utilisationForIncrease: Double

    public init(
        minimum: Int = 1, maximum: Int = 64, start: Int = 8, decreaseFactor: Double = 0.5,
        increasePerWindow: Double = 1, utilisationForIncrease: Double = 0.8
    ) {
        self.minimum = max(1, minimum)
        self.maximum = max(self.minimum, maximum)
        self.start = min(max(start, self.minimum), self.maximum)
        self.decreaseFactor = min(max(decreaseFactor, 0.01), 1)
        self.increasePerWindow = max(0, increasePerWindow)
        self.utilisationForIncrease = min(max(utilisationForIncrease, 0), 1)
    }
}
