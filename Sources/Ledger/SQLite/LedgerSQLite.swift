import CodedErrors
import SQLiteStorage

/// The ledger's SQLite connection: WAL (readers never wait for the writer), `synchronous=NORMAL` (a commit survives
/// a crash of the process; the verdict is re-derived from Kafka after a power loss), foreign keys on.
typealias LedgerSQLiteConnection = SQLiteConnection<LedgerError>

extension LedgerSQLiteConnection {
    static let setup = ["PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", "PRAGMA foreign_keys=ON"]
}
