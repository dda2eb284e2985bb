/// Why ``AppleCallGate/acquire(_:priority:deadline:)`` gave no permit. Never carries receipt data.
public struct AppleCallGateError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What happened.
    public enum Code: String, Sendable, Hashable, CaseIterable {
        /// The caller's deadline passed while it waited; the job should end `unverifiable`, `apple_unavailable`.
        case deadlineExceeded = "deadline_exceeded"
        /// The breaker is open and the gate is configured to fail fast.
        case circuitOpen = "circuit_open"
        /// Too many callers are waiting already.
        case queueFull = "queue_full"
        /// The gate was shut down.
        case shutDown = "shut_down"
        /// The endpoint's quota budget is spent and renews only after the caller's deadline.
        case quotaExhausted = "quota_exhausted"
    }

    /// What happened.
    public var code: Code
    /// Where the error arose.
    public var file: String
    /// The line where the error arose.
    public var line: Int

    public init(_ code: Code, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.file = file
        self.line = line
    }

    /// Whether the job may try again later (it always may: the gate refuses for now, never for good).
    public var isRetryable: Bool { code != .shutDown }

    /// Errors are equal when their codes are: where they arose is for logs.
    public static func == (lhs: AppleCallGateError, rhs: AppleCallGateError) -> Bool {
        lhs.code == rhs.code
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
    }

    public var description: String {
        let what =
            switch code {
            case .deadlineExceeded: "the job's deadline passed while waiting to call Apple"
            case .circuitOpen: "Apple's circuit breaker is open; try again after the cool-down"
            case .queueFull: "too many calls wait for Apple; try again later"
            case .shutDown: "the Apple call gate is shutting down"
            case .quotaExhausted: "the store's quota budget is spent until after the job's deadline"
            }
        return "AppleCallGateError.\(code.rawValue): \(what) (\(file):\(line))"
    }
}
