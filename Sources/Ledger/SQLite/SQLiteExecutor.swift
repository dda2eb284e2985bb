import Dispatch
import SQLiteStorage

/// The one thread that owns a ``LedgerSQLiteConnection``: every call runs on a private serial dispatch queue, so
/// blocking SQLite calls never run on Swift's cooperative pool and the connection is never used concurrently.
///
/// `@unchecked Sendable` is safe because the connection and the fault hook are only read or written inside
/// `queue.async` blocks of this one serial queue.
final class SQLiteExecutor: @unchecked Sendable {
    private let queue: DispatchQueue
    private let connection: LedgerSQLiteConnection
    /// Tests only: called with a label before each statement of a write; a returned error is thrown there.
    private var faultHook: (@Sendable (String) -> LedgerError?)?

    init(path: String, busyTimeout: Duration) throws(LedgerError) {
        queue = DispatchQueue(label: "verify.ledger.sqlite", qos: .userInitiated)
        connection = try LedgerSQLiteConnection(
            path: path, busyTimeout: busyTimeout, setup: LedgerSQLiteConnection.setup)
    }

    /// Runs `body` on the connection's queue and returns its result.
    func run<T: Sendable>(
        _ body: @escaping @Sendable (LedgerSQLiteConnection, FaultPoint) throws -> T
    ) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async {
                let hook = self.faultHook
                let fault = FaultPoint { label in
                    if let error = hook?(label) { throw error }
                }
                continuation.resume(with: Result { try body(self.connection, fault) })
            }
        }
    }

    func setFaultHook(_ hook: (@Sendable (String) -> LedgerError?)?) async {
        await withCheckedContinuation { continuation in
            queue.async {
                self.faultHook = hook
                continuation.resume()
            }
        }
    }

    func close() async {
        await withCheckedContinuation { continuation in
            queue.async {
                self.connection.close()
                continuation.resume()
            }
        }
    }
}

/// Where a test may inject a failure between the statements of a transaction.
struct FaultPoint {
    let check: (String) throws -> Void

    func callAsFunction(_ label: String) throws { try check(label) }
}
