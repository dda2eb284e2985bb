import SQLiteStorage

/// The ledger's SQLite connection: WAL (readers never wait for the writer), `synchronous=NORMAL` (a commit survives
/// a crash of the process; the verdict is re-derived from Kafka after a power loss), foreign keys on.
typealias LedgerSQLiteConnection = SQLiteConnection<LedgerError>

extension LedgerSQLiteConnection {
    static let setup = ["PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", "PRAGMA foreign_keys=ON"]
}

extension LedgerError: SQLiteFailure {
    public init(sqlite kind: SQLiteFailureKind, _ detail: String, file: String, line: Int) {
        let code: Code
        switch kind {
        case .busy: code = .busy
        case .unavailable: code = .unavailable
        case .corrupt: code = .corrupt
        case .database: code = .database
        }
        self.init(code, detail, file: file, line: line)
    }

    public var isBusy: Bool { code == .busy }
}
