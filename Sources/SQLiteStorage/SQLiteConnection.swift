import CSQLite
import Foundation

/// What a SQLite failure is, for the store that owns the connection (the ledger and the entitlement store each turn
/// it into their own error type, with their own codes).
public enum SQLiteFailureKind: Sendable {
    /// SQLITE_BUSY or SQLITE_LOCKED: another connection holds the lock; try again.
    case busy
    /// The file cannot be opened, is not a database, or the connection is closed.
    case unavailable
    case corrupt
    /// The values were refused for good: a constraint (SQLITE_CONSTRAINT), a type (SQLITE_MISMATCH), a size
    /// (SQLITE_TOOBIG) or a parameter (SQLITE_RANGE). The same statement with the same values fails again.
    case refused
    /// Any other error.
    case database
}

/// An error type a ``SQLiteConnection`` throws: each store's own.
public protocol SQLiteFailure: Error {
    init(sqlite kind: SQLiteFailureKind, _ detail: String, file: String, line: Int)
    /// True for ``SQLiteFailureKind/busy``.
    var isBusy: Bool { get }
}

/// One SQLite connection and its cached prepared statements, shared by the ledger and the entitlement store (each
/// with its own pragmas and error type). Not thread-safe: only its store's executor queue touches it. This target is
/// the only place that imports CSQLite.
public final class SQLiteConnection<Failure: SQLiteFailure> {
    /// Owned: opened by `sqlite3_open_v2` in `init`, closed by `sqlite3_close_v2` in `close()`/`deinit`.
    private var db: OpaquePointer?
    /// Owned: each prepared once by `sqlite3_prepare_v3(SQLITE_PREPARE_PERSISTENT)`, finalized in `close()`.
    private var statements: [String: OpaquePointer] = [:]

    /// Opens `path` (created if missing) and runs `setup`, the store's pragmas in order (each retried while the file
    /// is busy: a fresh file opened by several processes at once answers SQLITE_BUSY to `journal_mode=WAL`).
    public init(path: String, busyTimeout: Duration, setup: [String]) throws(Failure) {
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &handle, flags, nil)
        guard rc == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(handle)
            throw Failure(
                sqlite: .unavailable, "cannot open SQLite database at \(path): \(message)", file: #fileID, line: #line)
        }
        db = handle
        let milliseconds =
            busyTimeout.components.seconds * 1000 + busyTimeout.components.attoseconds / 1_000_000_000_000_000
        sqlite3_busy_timeout(handle, Int32(clamping: milliseconds))
        sqlite3_extended_result_codes(handle, 1)
        for statement in setup { try executeRetryingBusy(statement, for: busyTimeout) }
    }

    deinit { close() }

    public func close() {
        for statement in statements.values { sqlite3_finalize(statement) }
        statements.removeAll()
        if let db { sqlite3_close_v2(db) }
        db = nil
    }

    public var isOpen: Bool { db != nil }

    /// Runs `sql`, retrying while the database is busy, up to `timeout`. For switching a new file to WAL: SQLite
    /// answers SQLITE_BUSY at once, without the busy handler, when several processes open a fresh file together.
    public func executeRetryingBusy(_ sql: String, for timeout: Duration) throws(Failure) {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        while true {
            do {
                return try execute(sql)
            } catch let error where error.isBusy && clock.now < deadline {
                usleep(10_000)
            }
        }
    }

    /// Runs SQL without parameters or results (pragmas, DDL, BEGIN/COMMIT).
    public func execute(_ sql: String) throws(Failure) {
        let db = try handle()
        var message: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(db, sql, nil, nil, &message)
        let text = message.map { String(cString: $0) }
        sqlite3_free(message)
        if rc != SQLITE_OK { throw Self.error(rc, text ?? "exec failed") }
    }

    /// Runs a cached statement with `bindings` and returns its rows.
    @discardableResult
    public func query(_ sql: String, _ bindings: [SQLiteValue] = []) throws(Failure) -> [[SQLiteValue]] {
        let db = try handle()
        let statement = try prepared(sql, db: db)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        for (index, value) in bindings.enumerated() {
            let position = Int32(index + 1)
            let rc: Int32
            switch value {
            case .null: rc = sqlite3_bind_null(statement, position)
            case .integer(let v): rc = sqlite3_bind_int64(statement, position, v)
            // With its length, not up to a NUL: a NUL inside the text would otherwise cut it there, and two
            // different ids would be stored as one.
            case .text(let v): rc = sqlite3_bind_text(statement, position, v, Int32(v.utf8.count), Self.transient)
            }
            if rc != SQLITE_OK { throw Self.error(rc, String(cString: sqlite3_errmsg(db))) }
        }
        var rows: [[SQLiteValue]] = []
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else { throw Self.error(rc, String(cString: sqlite3_errmsg(db))) }
            let count = sqlite3_column_count(statement)
            var row: [SQLiteValue] = []
            row.reserveCapacity(Int(count))
            for column in 0..<count {
                switch sqlite3_column_type(statement, column) {
                case SQLITE_NULL: row.append(.null)
                case SQLITE_INTEGER: row.append(.integer(sqlite3_column_int64(statement, column)))
                default:
                    if let text = sqlite3_column_text(statement, column) {
                        row.append(.text(String(cString: text)))
                    } else {
                        row.append(.null)
                    }
                }
            }
            rows.append(row)
        }
        return rows
    }

    /// Rows changed by the last INSERT/UPDATE/DELETE.
    public var changes: Int {
        db.map { Int(sqlite3_changes($0)) } ?? 0
    }

    private func handle() throws(Failure) -> OpaquePointer {
        guard let db else {
            throw Failure(sqlite: .unavailable, "the SQLite database is closed", file: #fileID, line: #line)
        }
        return db
    }

    private func prepared(_ sql: String, db: OpaquePointer) throws(Failure) -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard rc == SQLITE_OK, let statement else {
            throw Self.error(rc, String(cString: sqlite3_errmsg(db)))
        }
        statements[sql] = statement
        return statement
    }

    /// SQLite copies bound text before the call returns.
    private static var transient: sqlite3_destructor_type { unsafeBitCast(-1, to: sqlite3_destructor_type.self) }

    static func error(_ rc: Int32, _ message: String, file: String = #fileID, line: Int = #line) -> Failure {
        let kind: SQLiteFailureKind
        switch rc & 0xff {
        case SQLITE_BUSY, SQLITE_LOCKED: kind = .busy
        case SQLITE_CANTOPEN, SQLITE_NOTADB: kind = .unavailable
        case SQLITE_CORRUPT: kind = .corrupt
        case SQLITE_CONSTRAINT, SQLITE_MISMATCH, SQLITE_TOOBIG, SQLITE_RANGE: kind = .refused
        default: kind = .database
        }
        return Failure(sqlite: kind, "SQLite error \(rc): \(message)", file: file, line: line)
    }
}

/// A value bound to or read from a SQLite statement.
public enum SQLiteValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case text(String)

    public init(_ text: String?) { self = text.map { .text($0) } ?? .null }
    public init(_ text: String) { self = .text(text) }
    public init(_ date: Date?) { self = date.map { .integer(SQLiteValue.milliseconds($0)) } ?? .null }
    public init(_ flag: Bool) { self = .integer(flag ? 1 : 0) }
    public init(_ number: Int) { self = .integer(Int64(number)) }

    public var text: String? {
        if case .text(let v) = self { return v }
        return nil
    }

    public var integer: Int64? {
        if case .integer(let v) = self { return v }
        return nil
    }

    public var date: Date? { integer.map { Date(timeIntervalSince1970: Double($0) / 1000) } }

    public var bool: Bool { integer.map { $0 != 0 } ?? false }

    public static func milliseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1000).rounded())
    }
}

extension SQLiteConnection {
    /// Runs `body` in `BEGIN IMMEDIATE` … `COMMIT` (or `ROLLBACK` when it throws or asks not to commit): the write
    /// lock is taken at the start, so another process sharing the file waits (busy timeout) instead of failing at
    /// its first write.
    public func writeTransaction<T>(_ body: () throws -> (T, commit: Bool)) throws -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let (result, commit) = try body()
            try execute(commit ? "COMMIT" : "ROLLBACK")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// ``writeTransaction(_:)`` that always commits what `body` wrote when it returns.
    public func inWriteTransaction<T>(_ body: () throws -> T) throws -> T {
        try writeTransaction { (try body(), commit: true) }
    }
}
