import Dispatch

/// The one thread that owns a store's ``SQLiteConnection`` (the ledger's, each of the entitlement store's): every
/// call runs on a private serial dispatch queue, so blocking SQLite calls never run on Swift's cooperative pool and
/// the connection is never used concurrently.
///
/// `@unchecked Sendable` is safe because the connection and the fault hook are only read or written inside
/// `queue.async` blocks of this one serial queue.
public final class SQLiteExecutor<Failure: SQLiteFailure>: @unchecked Sendable {
    private let queue: DispatchQueue
    private let connection: SQLiteConnection<Failure>
    /// Tests only: called with a label before each statement of a write; a returned error is thrown there.
    private var faultHook: (@Sendable (String) -> Failure?)?

    /// Opens `path` with the store's pragmas (`setup`); `label` names the queue in thread dumps.
    public init(path: String, busyTimeout: Duration, setup: [String], label: String) throws(Failure) {
        queue = DispatchQueue(label: label, qos: .userInitiated)
        connection = try SQLiteConnection(path: path, busyTimeout: busyTimeout, setup: setup)
    }

    /// Runs `body` on the connection's queue and returns its result.
    public func run<T: Sendable>(
        _ body: @escaping @Sendable (SQLiteConnection<Failure>, FaultPoint) throws -> T
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

    /// Runs `body` on the connection's queue and returns its result (a store that injects no faults).
    public func run<T: Sendable>(
        _ body: @escaping @Sendable (SQLiteConnection<Failure>) throws -> T
    ) async throws -> T {
        try await run { connection, _ in try body(connection) }
    }

    /// Tests only: see ``FaultPoint``.
    public func setFaultHook(_ hook: (@Sendable (String) -> Failure?)?) async {
        await withCheckedContinuation { continuation in
            queue.async {
                self.faultHook = hook
                continuation.resume()
            }
        }
    }

    public func close() async {
        await withCheckedContinuation { continuation in
            queue.async {
                self.connection.close()
                continuation.resume()
            }
        }
    }
}

/// Where a test may inject a failure between the statements of a transaction.
public struct FaultPoint {
    let check: (String) throws -> Void

    public func callAsFunction(_ label: String) throws { try check(label) }
}
