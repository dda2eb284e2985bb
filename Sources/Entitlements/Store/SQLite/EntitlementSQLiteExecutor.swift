import Dispatch
import SQLiteStorage

/// The one thread that owns an ``EntitlementSQLiteConnection``: every call runs on a private serial dispatch
/// queue, so blocking SQLite calls never run on Swift's cooperative pool and the connection is never used
/// concurrently.
///
/// `@unchecked Sendable` is safe because the connection is only touched inside `queue.async` blocks of this one
/// serial queue.
final class EntitlementSQLiteExecutor: @unchecked Sendable {
    private let queue: DispatchQueue
    private let connection: EntitlementSQLiteConnection

    init(path: String, busyTimeout: Duration, label: String) throws(EntitlementStoreError) {
        queue = DispatchQueue(label: label, qos: .userInitiated)
        connection = try EntitlementSQLiteConnection(
            path: path, busyTimeout: busyTimeout, setup: EntitlementSQLiteConnection.setup)
    }

    /// Runs `body` on the connection's queue and returns its result.
    func run<T: Sendable>(_ body: @escaping @Sendable (EntitlementSQLiteConnection) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async {
                continuation.resume(with: Result { try body(self.connection) })
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
