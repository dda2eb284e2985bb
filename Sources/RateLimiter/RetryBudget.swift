/// A token-based retry budget, as in gRPC's retry throttling and Google SRE's per-client retry budget.
///
/// Every first attempt deposits `ratio` tokens (up to `maximumTokens`); every retry withdraws one whole token. So over any
/// long run, retries are at most `ratio` of first attempts, plus `maximumTokens` for a short burst. When the budget is
/// spent, a retry waits (or its job ends when its deadline passes) instead of adding load to a struggling Apple.
///
/// With `minimumPerSecond` above zero the budget also earns that many tokens per second of time (Finagle's
/// `minRetriesPerSec`), so a handful of jobs caught in a storm with no new traffic behind them still retry, slowly,
/// instead of waiting for first attempts that never come.
public struct RetryBudget: Sendable, Hashable {
    /// The share of first attempts that may be retried. Default: 0.1 (10 %).
    public let ratio: Double
    /// The most tokens the budget can hold, i.e. the largest burst of retries. Default: 10.
    public let maximumTokens: Double
    /// Tokens earned per second of time, whatever the traffic. Default: 0 (none).
    public let minimumPerSecond: Double
    /// Tokens are counted in thousandths, so that ten deposits of 0.1 make exactly one token.
    private static let scale = 1_000
    private let depositMillis: Int
    private let maximumMillis: Int
    private var millis: Int
    /// Thousandths earned over time but not yet whole.
    private var carry: Double = 0

    /// A full budget.
    public init(ratio: Double = 0.1, maximumTokens: Double = 10, minimumPerSecond: Double = 0) {
        self.minimumPerSecond = max(0, minimumPerSecond)
        self.ratio = min(max(ratio, 0), 1)
        self.maximumTokens = max(maximumTokens, 1)
        self.depositMillis = Int((self.ratio * Double(Self.scale)).rounded())
        self.maximumMillis = Int((self.maximumTokens * Double(Self.scale)).rounded())
        self.millis = maximumMillis
    }

    /// Tokens available now.
    public var tokens: Double { Double(millis) / Double(Self.scale) }

    /// Records a first attempt, earning `ratio` tokens.
    public mutating func recordFirstAttempt() {
        millis = min(maximumMillis, millis + depositMillis)
    }

    /// Earns `minimumPerSecond` tokens per second of `elapsed` time.
    public mutating func earn(over elapsed: Duration) {
        guard minimumPerSecond > 0, elapsed > .zero else { return }
        let (seconds, attoseconds) = elapsed.components
        carry += (Double(seconds) + Double(attoseconds) / 1e18) * minimumPerSecond * Double(Self.scale)
        let whole = carry.rounded(.down)
        carry -= whole
        millis = min(maximumMillis, millis + Int(min(whole, Double(maximumMillis))))
    }

    /// How long until time alone makes a retry possible; nil when the budget earns nothing over time.
    public var timeUntilRetry: Duration? {
        guard minimumPerSecond > 0 else { return nil }
        guard millis < Self.scale else { return .zero }
        let missing = Double(Self.scale - millis) - carry
        return .seconds(max(0, missing) / (minimumPerSecond * Double(Self.scale)))
    }

    /// Whether a retry could be admitted now.
    public var canRetry: Bool { millis >= Self.scale }

    /// Takes one token for a retry if one is available.
    public mutating func tryWithdrawRetry() -> Bool {
        guard millis >= Self.scale else { return false }
        millis -= Self.scale
        return true
    }
}
