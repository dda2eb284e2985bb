import CodedErrors

/// The codes of a store's error type (the ledger's, the entitlement store's), each classified once as worth a retry
/// or not, with one of the same name per ``SQLiteFailureKind`` (the cases of the store's enum of codes meet these
/// requirements). A store's error is ``CodedError`` over these codes: one shape for the errors of the ledger and of
/// the entitlement store, on PostgreSQL and SQLite alike (a code, a message safe to log, never a receipt, a secret
/// or a password, and where it arose).
public protocol StorageErrorCode: RetryableErrorCodes, RawRepresentable where RawValue == String {
    /// What the description calls the store (`ledger`, `entitlement store`).
    static var storeName: String { get }
    static var busy: Self { get }
    static var unavailable: Self { get }
    static var corrupt: Self { get }
    static var database: Self { get }
    /// A refusal of the values (``SQLiteFailureKind/refused``).
    static var refused: Self { get }
}

extension StorageErrorCode {
    /// `<store> <code>: <message> (<file>:<line>)`.
    public static func description(of error: CodedError<Self>) -> String {
        "\(storeName) \(error.code.rawValue): \(error.message) (\(error.file):\(error.line))"
    }
}

/// A store's error is a ``SQLiteFailure`` by its codes alone.
extension CodedError: SQLiteFailure where Codes: StorageErrorCode {
    public init(sqlite kind: SQLiteFailureKind, _ detail: String, file: String, line: Int) {
        let code: Code
        switch kind {
        case .busy: code = .busy
        case .unavailable: code = .unavailable
        case .corrupt: code = .corrupt
        case .refused: code = .refused
        case .database: code = .database
        }
        self.init(code, detail, file: file, line: line)
    }

    public var isBusy: Bool { code == .busy }
}
