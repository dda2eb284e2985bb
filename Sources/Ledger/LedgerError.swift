import CodedErrors
import SQLiteStorage

/// Why a ledger operation failed. The description never holds a receipt, a secret or a password.
public typealias LedgerError = CodedError<LedgerErrorCode>

/// What went wrong in the ledger (``LedgerError``'s codes).
public enum LedgerErrorCode: String, StorageErrorCode, CaseIterable {
    /// The database cannot be reached (refused, closed, connect timeout). Retry later.
    case unavailable
    /// An operation took longer than its timeout. Retry later.
    case timeout
    /// The database is busy or locked by another writer longer than the busy timeout. Retry later.
    case busy
    /// Claims kept losing races after several attempts. Retry later.
    case contention
    /// The ledger URL or configuration is wrong. Fix the configuration.
    case invalidConfiguration = "invalid_configuration"
    /// The schema is newer than this build, or a migration failed. Needs an operator.
    case schema
    /// Stored data could not be read back (a corrupt row). Needs an operator.
    case corrupt
    /// The database refused the job's values for good (a constraint, an encoding it cannot store, a value out of
    /// range): the same operation with the same values fails again. The job becomes a dead letter, never a retry.
    case refused
    /// Any other database error (I/O, SQL). Retried, as a database fault is usually transient.
    case database

    public static let storeName = "ledger"

    /// Whether retrying the same work later may succeed (as opposed to dead-lettering it or stopping).
    public var isRetryable: Bool {
        switch self {
        case .unavailable, .timeout, .busy, .contention, .database: true
        case .invalidConfiguration, .schema, .corrupt, .refused: false
        }
    }
}
