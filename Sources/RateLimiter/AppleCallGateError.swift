import CodedErrors

/// Why ``AppleCallGate/acquire(_:priority:deadline:)`` gave no permit. Never carries receipt data; the code says it
/// all, so the message stays empty.
public typealias AppleCallGateError = CodedError<AppleCallGateErrorCode>

/// What happened (``AppleCallGateError``'s codes).
public enum AppleCallGateErrorCode: String, RetryableErrorCodes, CaseIterable {
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

    /// Whether the job may try again later (it always may: the gate refuses for now, never for good).
    public var isRetryable: Bool { self != .shutDown }

    public static func description(of error: AppleCallGateError) -> String {
        let what =
            switch error.code {
            case .deadlineExceeded: "the job's deadline passed while waiting to call Apple"
            case .circuitOpen: "Apple's circuit breaker is open; try again after the cool-down"
            case .queueFull: "too many calls wait for Apple; try again later"
            case .shutDown: "the Apple call gate is shutting down"
            case .quotaExhausted: "the store's quota budget is spent until after the job's deadline"
            }
        return "AppleCallGateError.\(error.code.rawValue): \(what) (\(error.file):\(error.line))"
    }
}
