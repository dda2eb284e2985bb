/// The constraint the other workers' signals put on this one: the most conservative live signal.
public struct RemoteConstraint<Instant: InstantProtocol<Duration>>: Sendable where Instant: Sendable {
    /// The lowest concurrency limit any live signal reports, if any.
    public var concurrencyLimit: Int?
    /// Hold all calls until this instant (a remote `Retry-After`, or a remote open breaker until its signal
    /// expires), if any.
    public var holdUntil: Instant?
    /// The worker whose signal sets the limit, for logs and metrics.
    public var limitingWorkerID: String?

    /// No constraint.
    public static var none: RemoteConstraint { RemoteConstraint(concurrencyLimit: nil, holdUntil: nil) }
}

/// The live throttle signals of the other workers, each converted to this worker's clock and forgotten when it
/// expires; it exposes the most conservative of them, which ``AppleCallGate`` follows.
///
/// Each signal's remaining lifetime is capped at `maximumSignalLifetime`, so a sender whose wall clock runs far ahead
/// (or a corrupt record) cannot throttle the cluster for long, and a dead worker's last signal fades out.
public struct ClusterThrottle<Instant: InstantProtocol<Duration>>: Sendable where Instant: Sendable {
    private struct Entry: Sendable {
        var signal: ThrottleSignal
        var expiresAt: Instant
        var retryAfterUntil: Instant?
    }

    /// This worker's id; its own signals (read back from the topic) are ignored.
    public let localWorkerID: String
    /// The longest a signal is honoured after it arrives, whatever its `expiresAt` says. Default: 30 s.
    public let maximumSignalLifetime: Duration
    /// Whether a remote open breaker holds this worker's calls too. Default: true.
    public let followRemoteOpenBreaker: Bool
    private var entries: [String: Entry] = [:]

    public init(
        localWorkerID: String, maximumSignalLifetime: Duration = .seconds(30), followRemoteOpenBreaker: Bool = true
    ) {
        self.localWorkerID = localWorkerID
        self.maximumSignalLifetime = max(maximumSignalLifetime, .zero)
        self.followRemoteOpenBreaker = followRemoteOpenBreaker
    }

    /// How many workers have a signal live at `now`.
    public func liveSignalCount(now: Instant) -> Int {
        entries.values.lazy.filter { $0.expiresAt > now }.count
    }

    /// Takes in a signal received at local instant `now`, when the wall clock read `unixMillisecondsNow`.
    /// Returns whether it was accepted (not our own, not expired, not older than the one held for that worker,
    /// a known version).
    @discardableResult
    public mutating func ingest(_ signal: ThrottleSignal, now: Instant, unixMillisecondsNow: Int64) -> Bool {
        guard signal.version == ThrottleSignal.currentVersion, signal.workerID != localWorkerID,
            signal.expiresAtUnixMilliseconds > unixMillisecondsNow
        else { return false }
        if let held = entries[signal.workerID],
            held.signal.issuedAtUnixMilliseconds > signal.issuedAtUnixMilliseconds
        {
            return false
        }
        let remaining = min(
            Duration.milliseconds(signal.expiresAtUnixMilliseconds - unixMillisecondsNow), maximumSignalLifetime)
        let expiresAt = now.advanced(by: remaining)
        var retryAfterUntil: Instant?
        if let until = signal.retryAfterUntilUnixMilliseconds, until > unixMillisecondsNow {
            // Honoured no longer than the signal itself lives: a dead worker cannot hold the cluster.
            retryAfterUntil = min(now.advanced(by: .milliseconds(until - unixMillisecondsNow)), expiresAt)
        }
        entries[signal.workerID] = Entry(signal: signal, expiresAt: expiresAt, retryAfterUntil: retryAfterUntil)
        return true
    }

    /// Forgets expired signals. Returns whether any was dropped.
    @discardableResult
    public mutating func expire(now: Instant) -> Bool {
        let before = entries.count
        entries = entries.filter { $0.value.expiresAt > now }
        return entries.count != before
    }

    /// The earliest instant at which a live signal expires, if any.
    public var nextExpiry: Instant? {
        entries.values.map(\.expiresAt).min()
    }

    /// The most conservative constraint among live signals (call ``expire(now:)`` first).
    public func constraint(now: Instant) -> RemoteConstraint<Instant> {
        var result = RemoteConstraint<Instant>.none
        for (workerID, entry) in entries where entry.expiresAt > now {
            if result.concurrencyLimit.map({ entry.signal.concurrencyLimit < $0 }) ?? true {
                result.concurrencyLimit = max(1, entry.signal.concurrencyLimit)
                result.limitingWorkerID = workerID
            }
            var hold = entry.retryAfterUntil
            if followRemoteOpenBreaker, entry.signal.breakerState == .open {
                hold = max(hold ?? entry.expiresAt, entry.expiresAt)
            }
            if let hold, hold > now, result.holdUntil.map({ hold > $0 }) ?? true {
                result.holdUntil = hold
            }
        }
        return result
    }
}

/// When a worker publishes its ``ThrottleSignal``: at once on a significant change (breaker state, a new
/// `Retry-After`, the limit moving by `significantLimitChange` or more), but never more often than `minimumInterval`;
/// and as a heartbeat every `heartbeatInterval` so receivers do not expire it while it still holds.
public struct ThrottlePublishPolicy: Sendable, Hashable {
    /// The shortest time between two publications. Default: 500 ms.
    public var minimumInterval: Duration
    /// Republish at least this often. Default: 5 s.
    public var heartbeatInterval: Duration
    /// How long receivers honour a signal: several heartbeats, so one lost record does not drop it. Default: 15 s.
    public var signalLifetime: Duration
    /// The relative change of the limit worth telling at once. Default: 0.25.
    public var significantLimitChange: Double

    public init(
        minimumInterval: Duration = .milliseconds(500), heartbeatInterval: Duration = .seconds(5),
        signalLifetime: Duration = .seconds(15), significantLimitChange: Double = 0.25
    ) {
        self.minimumInterval = max(minimumInterval, .zero)
        self.heartbeatInterval = max(heartbeatInterval, self.minimumInterval)
        self.signalLifetime = max(signalLifetime, self.heartbeatInterval)
        self.significantLimitChange = max(significantLimitChange, 0)
    }

    /// Whether to publish `current` now, given the last signal published (`nil`: never) and how long ago it was.
    public func shouldPublish(current: ThrottleSignal, last: ThrottleSignal?, sinceLast: Duration?) -> Bool {
        guard let last, let sinceLast else { return true }
        if sinceLast >= heartbeatInterval { return true }
        guard sinceLast >= minimumInterval else { return false }
        if current.breakerState != last.breakerState { return true }
        if current.retryAfterUntilUnixMilliseconds != last.retryAfterUntilUnixMilliseconds,
            (current.retryAfterUntilUnixMilliseconds ?? 0) > current.issuedAtUnixMilliseconds
        {
            return true
        }
        let previous = Double(max(last.concurrencyLimit, 1))
        return abs(Double(current.concurrencyLimit) - previous) / previous >= significantLimitChange
    }
}
