/// The codes of a store's error type (the ledger's, the entitlement store's): those SQLite's failures map to, and
/// the ones every store has besides, each classified once as worth a retry or not.
public protocol StorageErrorCode: SQLiteFailureCodes, Hashable, Sendable, RawRepresentable where RawValue == String {
    /// An operation took longer than its timeout.
    static var timeout: Self { get }
    /// The store's URL or configuration is wrong.
    static var invalidConfiguration: Self { get }
    /// The schema is newer than this build, or a migration failed.
    static var schema: Self { get }
    /// Whether the same work may succeed later (retried), as opposed to failing for good (a dead letter, an
    /// operator).
    var isRetryable: Bool { get }
}

/// One shape for the errors of the ledger and of the entitlement store, on PostgreSQL and SQLite alike: a code, a
/// detail safe to log (never a receipt, a secret or a password), and where it arose. Two errors are equal when
/// their code and detail are.
public protocol StorageError: SQLiteCodedFailure, Hashable, CustomStringConvertible where Code: StorageErrorCode {
    /// What the description calls the store (`ledger`, `entitlement store`).
    static var storeName: String { get }
    var detail: String { get }
    var file: String { get }
    var line: Int { get }
}

/// Each conforming type also declares `isRetryable` (its code's) and `description` (``storageDescription``) as its own
/// members, so that a file that imports only the store's module sees them.
extension StorageError {
    /// `<store> <code>: <detail> (<file>:<line>)`.
    public var storageDescription: String { "\(Self.storeName) \(code.rawValue): \(detail) (\(file):\(line))" }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code && lhs.detail == rhs.detail }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(detail)
    }
}
