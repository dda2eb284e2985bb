/// The one shape of the product's errors: a stable code, a message safe to log (never a receipt, a token, a shared
/// secret, a key or a password) and the file and line where the error arose. Each error type is this struct over its
/// own codes (`public typealias LedgerError = CodedError<LedgerErrorCode>`), so `LedgerError.Code.busy`,
/// `LedgerError(.busy, "…")` and `catch let error as LedgerError` read as they would for a struct of its own; the
/// codes say how the description reads.
public struct CodedError<Codes: ErrorCodes>: Error, Sendable, Hashable, CustomStringConvertible {
    /// The codes of this error type (a generic parameter is not reachable as a member type, this alias is).
    public typealias Code = Codes

    /// What happened.
    public var code: Code
    /// What happened, in words safe to log; empty where the code says it all.
    public var message: String
    /// Where the error arose.
    public var file: String
    /// The line where the error arose.
    public var line: Int

    public init(_ code: Code, _ message: String = "", file: String = #fileID, line: Int = #line) {
        self.code = code
        self.message = message
        self.file = file
        self.line = line
    }

    /// Errors are equal when their code and message are: where they arose is for logs.
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code && lhs.message == rhs.message }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(message)
    }

    public var description: String { Code.description(of: self) }
}

/// The codes of one error type, and how that type's errors describe themselves.
public protocol ErrorCodes: Hashable, Sendable {
    /// The error's description: the code, the message and where it arose, never a value that could be a secret.
    static func description(of error: CodedError<Self>) -> String
}

/// Codes that decide between trying the same work again later and giving up (a dead letter, an operator).
public protocol RetryableErrorCodes: ErrorCodes {
    /// Whether the same work may succeed later.
    var isRetryable: Bool { get }
}

extension CodedError where Codes: RetryableErrorCodes {
    /// Whether the same work may succeed later (the code's classification).
    public var isRetryable: Bool { code.isRetryable }
}
