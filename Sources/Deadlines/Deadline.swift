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
        try await race(gate, timeout, onTimeout: onTimeout, connect: connect, cancelsOperation: true, operation)
    } onCancel: {
        gate.resume(.failure(CancellationError()))
    }
}

/// What ``waitWithin(_:_:)`` found.
public enum DeadlineOutcome<T: Sendable>: Sendable {
    case value(T)
    case failure(any Error)
    case timedOut
}

/// Waits for `operation` up to `deadline`, like ``withDeadline(_:onTimeout:connect:_:)`` but without cancelling it:
/// when the deadline passes the operation goes on, and its late result is dropped (the gateway's wait for Kafka: a
/// produce already handed to librdkafka cannot be taken back). The caller's cancellation does not end the wait
/// either, so an answer is always the operation's or the deadline's.
public func waitWithin<T: Sendable>(
    _ deadline: Duration, _ operation: @escaping @Sendable () async throws -> T
) async -> DeadlineOutcome<T> {
    do {
        return .value(
            try await race(
                ResumeGate(), deadline, onTimeout: { DeadlinePassed() }, connect: nil, cancelsOperation: false,
                operation))
    } catch is DeadlinePassed {
        return .timedOut
    } catch {
        return .failure(error)
    }
}

/// ``waitWithin(_:_:)``'s deadline, told apart from the operation's own errors.
private struct DeadlinePassed: Error {}

/// The one race of an operation against its deadlines, resumed through `gate` by whichever comes first.
private func race<T: Sendable>(
    _ gate: ResumeGate<T, any Error>, _ timeout: Duration, onTimeout: @escaping @Sendable () -> any Error,
    connect: (timeout: Duration, isConnected: @Sendable () -> Bool, error: @Sendable () -> any Error)?,
    cancelsOperation: Bool, _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
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
            if gate.resume(.failure(onTimeout())), cancelsOperation {
                work.cancel()
            }
        }
        let connectTimer = connect.map { connect in
            Task {
                try await Task.sleep(for: connect.timeout)
                if !connect.isConnected(), gate.resume(.failure(connect.error())), cancelsOperation {
                    work.cancel()
                }
            }
        }
        gate.onFinish {
            if cancelsOperation { work.cancel() }
            timer.cancel()
            connectTimer?.cancel()
        }
    }
}

/// Resumes a continuation exactly once, from whichever of its racers comes first (the operation, a timer,
/// cancellation), also when one comes before the continuation is installed.
final class ResumeGate<T: Sendable, Failure: Error>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T, Failure>?
        var pending: Result<T, Failure>?
        var finished = false
        var cleanup: (@Sendable () -> Void)?
    }

    private let state = Mutex(State())

    init() {}

    func install(_ continuation: CheckedContinuation<T, Failure>) {
        // A result that came before the continuation resumes it at once; otherwise the continuation waits for it.
        let pending = state.withLock { state -> Result<T, Failure>? in
            if state.pending == nil { state.continuation = continuation }
            return state.pending.take()
        }
        if let pending { continuation.resume(with: pending) }
    }

    /// Runs `cleanup` once the continuation is resumed (at once if it was already).
    func onFinish(_ cleanup: @escaping @Sendable () -> Void) {
        let run = state.withLock { state -> Bool in
            if state.finished { return true }
            state.cleanup = cleanup
            return false
        }
        if run { cleanup() }
    }

    /// Returns true when this call was the one that resumed.
    @discardableResult
    func resume(_ result: Result<T, Failure>) -> Bool {
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
