import Foundation

/// What one worker tells the others about its view of Apple, on the compacted `receipt-control` topic (key: the
/// worker id, so the topic keeps each worker's latest signal).
///
/// Times are wall-clock milliseconds since 1970, since the workers share no monotonic clock. A signal always carries
/// the sender's *local* state (its own AIMD limit and breaker), never what it follows from others: echoing remote
/// constraints would let one old signal circulate and keep the cluster throttled after its cause is gone.
public struct ThrottleSignal: Sendable, Hashable, Codable {
    /// The format version; receivers ignore signals of a version they do not know.
    public var version: Int
    /// The sending worker.
    public var workerID: String
    /// The sender's adaptive concurrency limit.
    public var concurrencyLimit: Int
    /// The sender's circuit breaker state.
    public var breakerState: BreakerState
    /// Until when Apple asked the sender to hold its calls (`Retry-After`), if it did.
    public var retryAfterUntilUnixMilliseconds: Int64?
    /// When the signal was made.
    public var issuedAtUnixMilliseconds: Int64
    /// When receivers must forget the signal unless a newer one replaces it.
    public var expiresAtUnixMilliseconds: Int64

    /// The version this code writes.
    public static let currentVersion = 1

    public init(
        workerID: String, concurrencyLimit: Int, breakerState: BreakerState, retryAfterUntilUnixMilliseconds: Int64?,
        issuedAtUnixMilliseconds: Int64, expiresAtUnixMilliseconds: Int64, version: Int = ThrottleSignal.currentVersion
    ) {
        self.version = version
        self.workerID = workerID
        self.concurrencyLimit = concurrencyLimit
        self.breakerState = breakerState
        self.retryAfterUntilUnixMilliseconds = retryAfterUntilUnixMilliseconds
        self.issuedAtUnixMilliseconds = issuedAtUnixMilliseconds
        self.expiresAtUnixMilliseconds = expiresAtUnixMilliseconds
    }

    enum CodingKeys: String, CodingKey {
        case version = "v"
        case workerID = "worker"
        case concurrencyLimit = "limit"
        case breakerState = "breaker"
        case retryAfterUntilUnixMilliseconds = "retry_after_until_ms"
        case issuedAtUnixMilliseconds = "issued_at_ms"
        case expiresAtUnixMilliseconds = "expires_at_ms"
    }

    /// The signal as compact JSON (no whitespace, keys sorted), the value of a `receipt-control` record.
    public func jsonData() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(self)
    }

    /// Decodes a signal from a `receipt-control` record value. Throws on anything that is not a valid signal.
    public init(jsonData: Data) throws {
        self = try JSONDecoder().decode(ThrottleSignal.self, from: jsonData)
    }
}
