import Synchronization

/// Jobs asking about one Google Play purchase at the same time, in one worker, share one read: a replay storm of a
/// token (one purchase sent by many accounts, or a client retrying) costs one call to Google, and once the first grant
/// is recorded the ledger decides the rest without any.
///
/// The read runs in a task of its own, so a job that is cancelled (a revoke, a drain) stops waiting at once without
/// ending the read for the others; the read is cancelled only when every job waiting for it is.
final class GooglePlayReadFlights<Value: Sendable>: Sendable {
    private struct Flight {
        /// The leading waiter's number: names this read, so that a read that ends never touches a later one's flight.
        let id: UInt64
        var waiters: [UInt64: CheckedContinuation<Value?, Never>] = [:]
        var task: Task<Void, Never>?
    }

    private struct State {
        var flights: [String: Flight] = [:]
        var nextWaiter: UInt64 = 0
    }

    private let state = Mutex(State())

    /// The reads running now (tests).
    var count: Int { state.withLock { $0.flights.count } }

    /// The jobs waiting for the read of `key` (tests).
    func waiting(for key: String) -> Int { state.withLock { $0.flights[key]?.waiters.count ?? 0 } }

    /// The value of the read running for `key`, or of a new one made by `read`. Throws `CancellationError` when the
    /// calling task is cancelled before the value comes.
    func value(for key: String, read: @escaping @Sendable () async -> Value) async throws -> Value {
        let waiter = state.withLock { state -> UInt64 in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        let value: Value? = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let leads = state.withLock { state -> Bool? in
                    // Checked under the lock the cancellation handler takes: either it sees this waiter, or this
                    // sees the cancellation.
                    if Task.isCancelled { return nil }
                    let leads = state.flights[key] == nil
                    state.flights[key, default: Flight(id: waiter)].waiters[waiter] = continuation
                    return leads
                }
                guard let leads else {
                    continuation.resume(returning: nil)
                    return
                }
                guard leads else { return }
                let task = Task { [self] in
                    let value = await read()
                    let waiters = state.withLock { state in
                        state.flights[key]?.id == waiter ? state.flights.removeValue(forKey: key)?.waiters : nil
                    }
                    for continuation in (waiters ?? [:]).values { continuation.resume(returning: value) }
                }
                let abandoned = state.withLock { state -> Bool in
                    guard state.flights[key]?.id == waiter else { return true }
                    state.flights[key]?.task = task
                    return false
                }
                // Every waiter was cancelled before the read started: nobody needs it.
                if abandoned { task.cancel() }
            }
        } onCancel: {
            let (continuation, abandoned) = state.withLock {
                state -> (CheckedContinuation<Value?, Never>?, Task<Void, Never>?) in
                guard let continuation = state.flights[key]?.waiters.removeValue(forKey: waiter) else {
                    return (nil, nil)
                }
                guard state.flights[key]?.waiters.isEmpty == true else { return (continuation, nil) }
                return (continuation, state.flights.removeValue(forKey: key)?.task)
            }
            continuation?.resume(returning: nil)
            abandoned?.cancel()
        }
        guard let value else { throw CancellationError() }
        return value
    }
}
