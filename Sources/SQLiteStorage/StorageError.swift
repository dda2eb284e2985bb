import CodedErrors

/// The codes of a store's error type (the ledger's, the entitlement store's): those SQLite's failures map to, and
/// the ones every store has besides, each classified once as worth a retry or not. A store's error is
/// ``CodedError`` over these codes: one shape for the errors of the ledger and of the entitlement store, on
/// PostgreSQL and SQLite alike (a code, a message safe to log, never a receipt, a secret or a password, and where it
/// arose).
public protocol StorageErrorCode: SQLiteFailureCodes, RetryableErrorCodes, RawRepresentable where RawValue == String {
    /// What the description calls the store (`ledger`, `entitlement store`).
    static var storeName: String { get }
    /// An operation took longer than its timeout.
    static var timeout: Self { get }
    /// The store's URL or configuration is wrong.
    static var invalidConfiguration: Self { get }
    /// The schema is newer than this build, or a migration failed.
    static var schema: Self { get }
}

extension StorageErrorCode {
    /// `<store> <code>: <message> (<file>:<line>)`.
    public static func description(of error: CodedError<Self>) -> String {
        "\(storeName) \(error.code.rawValue): \(error.message) (\(error.file):\(error.line))"
    }
}

/// A store's error is a ``SQLiteFailure`` by its codes alone.
extension CodedError: SQLiteFailure, SQLiteCodedFailure where Codes: StorageErrorCode {}
