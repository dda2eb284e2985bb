import CSQLite
import Foundation

/// One SQLite connection and its cached prepared statements (the ledger's pattern; the entitlement service does
/// not depend on the ledger). Not thread-safe: only ``EntitlementSQLiteExecutor``'s queue touches it. This folder is
/// the only place of the target that imports CSQLite.
final class EntitlementSQLiteConnection {
    /// Owned: opened by `sqlite3_open_v2` in `init`, closed by `sqlite3_close_v2` in `close()`/`deinit`.
    private var db: OpaquePointer?
    /// Owned: each prepared once by `sqlite3_prepare_v3(SQLITE_PREPARE_PERSISTENT)`, finalized in `close()`.
    private var statements: [String: OpaquePointer] = [:]

    init(path: String, busyTimeout: Duration) throws(EntitlementStoreError) {
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &handle, flags, nil)
        guard rc == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(handle)
            throw EntitlementStoreError(.unavailable, "cannot open SQLite database at \(path): \(message)")
        }
        db = handle
        let milliseconds =
            busyTimeout.components.seconds * 1000 + busyTimeout.components.attoseconds / 1_000_000_000_000_000
        sqlite3_busy_timeout(handle, Int32(clamping: milliseconds))
        sqlite3_extended_result_codes(handle, 1)
        try executeRetryingBusy("PRAGMA journal_mode=WAL", for: busyTimeout)
        try execute("PRAGMA synchronous=NORMAL")
        try execute("PRAGMA foreign_keys=ON")
    }

    deinit { close() }

    func close() {
        for statement in statements.values { sqlite3_finalize(statement) }
        statements.removeAll()
        if let db { sqlite3_close_v2(db) }
        db = nil
    }

    var isOpen: Bool { db != nil }

    /// Runs `sql`, retrying while the database is busy, up to `timeout`. For switching a new file to WAL: SQLite
    /// answers SQLITE_BUSY at once, without the busy handler, when several processes open a fresh file together.
    func executeRetryingBusy(_ sql: String, for timeout: Duration) throws(EntitlementStoreError) {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        while true {
            do {
                return try execute(sql)
            } catch let error where error.code == .busy && clock.now < deadline {
                usleep(10_000)
            }
        }
    }

    /// Runs SQL without parameters or results (pragmas, DDL, BEGIN/COMMIT).
    func execute(_ sql: String) throws(EntitlementStoreError) {
        let db = try handle()
        var message: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(db, sql, nil, nil, &message)
        let text = message.map { String(cString: $0) }
        sqlite3_free(message)
        if rc != SQLITE_OK { throw Self.error(rc, text ?? "exec failed") }
    }

    /// Runs a cached statement with `bindings` and returns its rows.
    @discardableResult
    func query(_ sql: String, _ bindings: [SQLValue] = []) throws(EntitlementStoreError) -> [[SQLValue]] {
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
            case .text(let v): rc = sqlite3_bind_text(statement, position, v, -1, Self.transient)
            }
            if rc != SQLITE_OK { throw Self.error(rc, String(cString: sqlite3_errmsg(db))) }
        }
        var rows: [[SQLValue]] = []
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else { throw Self.error(rc, String(cString: sqlite3_errmsg(db))) }
            let count = sqlite3_column_count(statement)
            var row: [SQLValue] = []
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
    var changes: Int {
        db.map { Int(sqlite3_changes($0)) } ?? 0
    }

    private func handle() throws(EntitlementStoreError) -> OpaquePointer {
        guard let db else { throw EntitlementStoreError(.unavailable, "the SQLite entitlement store is closed") }
        return db
    }

    private func prepared(_ sql: String, db: OpaquePointer) throws(EntitlementStoreError) -> OpaquePointer {
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

    static func error(
        _ rc: Int32, _ message: String, file: String = #fileID, line: Int = #line
    ) -> EntitlementStoreError {
        let primary = rc & 0xff
        let code: EntitlementStoreError.Code
        switch primary {
        case SQLITE_BUSY, SQLITE_LOCKED: code = .busy
        case SQLITE_CANTOPEN, SQLITE_NOTADB: code = .unavailable
        case SQLITE_CORRUPT: code = .corrupt
        default: code = .database
        }
        return EntitlementStoreError(code, "SQLite error \(rc): \(message)", file: file, line: line)
    }
}

/// A value bound to or read from a SQLite statement.
enum SQLValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case text(String)

    init(_ text: String?) { self = text.map { .text($0) } ?? .null }
    init(_ text: String) { self = .text(text) }
    init(_ date: Date?) { self = date.map { .integer(SQLValue.milliseconds($0)) } ?? .null }

    var text: String? {
        if case .text(let v) = self { return v }
        return nil
    }

    var integer: Int64? {
        if case .integer(let v) = self { return v }
        return nil
    }

    var date: Date? { integer.map { Date(timeIntervalSince1970: Double($0) / 1000) } }

    var bool: Bool { integer.map { $0 != 0 } ?? false }

    init(_ flag: Bool) { self = .integer(flag ? 1 : 0) }
    init(_ number: Int) { self = .integer(Int64(number)) }

    static func milliseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1000).rounded())
    }
}
