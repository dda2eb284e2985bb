import Synchronization

/// Runs `operation` but returns at `timeout` at the latest, throwing `onTimeout()` (the ledger's and the entitlement
/// store's PostgreSQL operations, each with its own error type).
///
/// Unlike a task group, this does not wait for the operation to finish after the deadline: a query stuck on a
/// dead connection must not hang the caller. The operation is cancelled and left to end on its own; every write
/// it could still commit is idempotent, so the caller's retry is safe either way.
///
/// `connect`, when given, is a second, earlier deadline: if `isConnected()` is still false after its timeout
/// (the operation never got a connection), the call fails with `error` instead of waiting for `timeout`.
public func withDeadline<T: Sendable>(
    _ timeout: Duration, onTimeout: @escaping @Sendable () -> any Error,
    connect: (timeout: Duration, isConnected: @Sendable () -> Bool, error: @Sendable () -> any Error)? = nil,
    _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    let gate = ResumeGate<T, any Error>()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            gate.install(continuation)
            let work = Task {
                do {
                    gate.resume(.success(try await operation()))
                } catch {
                    gate.resume(.failure(error))
                }
            }
            let timer = Task {
                try await Task.sleep(for: timeout)
                if gate.resume(.failure(onTimeout())) {
                    work.cancel()
                }
            }
            let connectTimer = connect.map { connect in
                Task {
                    try await Task.sleep(for: connect.timeout)
                    if !connect.isConnected(), gate.resume(.failure(connect.error())) {
                        work.cancel()
                    }
                }
            }
            gate.onFinish {
                work.cancel(); timer.cancel(); connectTimer?.cancel()
            }
        }
    } onCancel: {
        gate.resume(.failure(CancellationError()))
    }
}

/// Resumes a continuation exactly once, from whichever of its racers comes first (the operation, a timer,
/// cancellation), also when one comes before the continuation is installed.
public final class ResumeGate<T: Sendable, Failure: Error>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T, Failure>?
        var pending: Result<T, Failure>?
        var finished = false
        var cleanup: (@Sendable () -> Void)?
    }

    private let state = Mutex(State())

    public init() {}

    public func install(_ continuation: CheckedContinuation<T, Failure>) {
        // A result that came before the continuation resumes it at once; otherwise the continuation waits for it.
        let pending = state.withLock { state -> Result<T, Failure>? in
            if state.pending == nil { state.continuation = continuation }
            return state.pending.take()
        }
        if let pending { continuation.resume(with: pending) }
    }

    /// Runs `cleanup` once the continuation is resumed (at once if it was already).
    public func onFinish(_ cleanup: @escaping @Sendable () -> Void) {
        let run = state.withLock { state -> Bool in
            if state.finished { return true }
            state.cleanup = cleanup
            return false
        }
        if run { cleanup() }
    }

    /// Returns true when this call was the one that resumed.
    @discardableResult
    public func resume(_ result: Result<T, Failure>) -> Bool {
        let (continuation, cleanup, first) = state.withLock {
            state -> (CheckedContinuation<T, Failure>?, (@Sendable () -> Void)?, Bool) in
            guard !state.finished else { return (nil, nil, false) }
            state.finished = true
            let cleanup = state.cleanup
            state.cleanup = nil
            if let continuation = state.continuation {
                state.continuation = nil
                return (continuation, cleanup, true)
            }
            state.pending = result
            return (nil, cleanup, true)
        }
        continuation?.resume(with: result)
        cleanup?()
        return first
    }
}
