import CodedErrors
import SQLiteStorage

/// Why an entitlement store operation failed. The description never holds a secret or a password.
public typealias EntitlementStoreError = CodedError<EntitlementStoreErrorCode>

/// What went wrong in the entitlement store (``EntitlementStoreError``'s codes).
public enum EntitlementStoreErrorCode: String, StorageErrorCode, CaseIterable {
    /// The database cannot be reached (refused, closed, connect timeout). Retry later.
    case unavailable
    /// An operation took longer than its timeout. Retry later.
    case timeout
    /// Locked by another writer, or a serialization conflict with another instance. Retry.
    case busy
    /// The store URL or configuration is wrong. Fix the configuration.
    case invalidConfiguration = "invalid_configuration"
    /// The schema is newer than this build. Needs an operator.
    case schema
    /// Stored data could not be read back. Needs an operator.
    case corrupt
    /// Any other database error; retried, as a database fault is usually transient.
    case database

    public static let storeName = "entitlement store"

    /// Whether retrying the same work later may succeed; the projection then retries the batch without committing.
    public var isRetryable: Bool {
        switch self {
        case .unavailable, .timeout, .busy, .database: true
        case .invalidConfiguration, .schema, .corrupt: false
        }
    }

    /// The projection retries every database error of a batch, so a refusal of the values is one of them here.
    public static var refused: Self { .database }
}
