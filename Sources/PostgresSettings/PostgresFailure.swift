import PostgresNIO

/// What a PostgreSQL failure is, read once for the ledger and the entitlement store (each turns it into its own
/// error type, with its own codes), and a detail safe to log: the server's message and SQLSTATE, never a value.
public struct PostgresFailure: Error, Sendable {
    public enum Kind: Sendable {
        /// `statement_timeout` (57014).
        case timeout
        /// A lock not granted (55P03), a serialization failure (40001) or a deadlock (40P01): try again.
        case busy
        /// A unique key already taken (23505): another writer won a race.
        case uniqueViolation
        /// Data exceptions (class 22: an encoding such as NUL in text, a value out of range), the other integrity
        /// constraints (23) and program limits (54): the same values are refused again, whenever asked.
        case refused
        /// The server is shutting down, the connection failed or resources ran out (57P, 08, 53), or the error came
        /// from the client side (connection errors, closed connections, SSL, authentication).
        case unavailable
        /// A row could not be decoded.
        case corrupt
        /// Any other error the server reported.
        case database
    }

    public var kind: Kind
    public var detail: String

    public init(_ kind: Kind, _ detail: String) {
        self.kind = kind
        self.detail = detail
    }

    /// Reads `error` of the PostgreSQL operation `what` (a ``PostgresFailure`` as it is); nil when it is neither an
    /// error PostgreSQL reported nor a row that could not be decoded (a transaction's error is unwrapped by the
    /// caller, which may own its body's error).
    public init?(_ error: any Error, _ what: String) {
        if let error = error as? PostgresFailure {
            self = error
        } else if let error = error as? PSQLError {
            let state = error.serverInfo?[.sqlState]
            let message = error.serverInfo?[.message] ?? "\(error.code)"
            switch (error.code, state) {
            case (.server, "57014"?): kind = .timeout
            case (.server, "55P03"?), (.server, "40001"?), (.server, "40P01"?): kind = .busy
            case (.server, let s?) where s.hasPrefix("57P") || s.hasPrefix("08") || s.hasPrefix("53"):
                kind = .unavailable
            case (.server, "23505"?): kind = .uniqueViolation
            case (.server, let s?) where s.hasPrefix("22") || s.hasPrefix("23") || s.hasPrefix("54"): kind = .refused
            case (.server, _): kind = .database
            default: kind = .unavailable
            }
            detail = "PostgreSQL \(what) failed: \(message)\(state.map { " (SQLSTATE \($0))" } ?? "")"
        } else if error is PostgresDecodingError {
            kind = .corrupt
            detail = "PostgreSQL \(what): a row could not be decoded"
        } else {
            return nil
        }
    }
}
