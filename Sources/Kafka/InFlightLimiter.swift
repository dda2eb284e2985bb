import Synchronization

/// An async counting semaphore that bounds the number of messages a producer has in flight.
/// Callers of `acquire()` suspend (in FIFO order) while the limit is reached; cancellation of a
/// waiting caller throws `CancellationError` and gives nothing away.
final class InFlightLimiter: Sendable {
    private struct Waiter {
        var id: UInt64
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var available: Int
        var waiters: [Waiter] = []
        var nextID: UInt64 = 0
    }

    private let state: Mutex<State>
    let limit: Int

    init(limit: Int) {
        precondition(limit > 0, "the in-flight limit must be positive")
        self.limit = limit
        self.state = Mutex(State(available: limit))
    }

    /// Number of permits currently taken.
    var inFlight: Int { limit - state.withLock { $0.available } }

    /// Takes a permit if one is free and nobody waits for one; never suspends.
    func tryAcquire() -> Bool {
        state.withLock { state in
            guard state.available > 0, state.waiters.isEmpty else { return false }
            state.available -= 1
            return true
        }
    }

    func acquire() async throws {
        try Task.checkCancellation()
        let fast = state.withLock { state -> Bool in
            guard state.available > 0, state.waiters.isEmpty else { return false }
            state.available -= 1
            return true
        }
        if fast { return }
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resumeNow = state.withLock { state -> Bool? in
                    if Task.isCancelled { return false }
                    if state.available > 0 && state.waiters.isEmpty {
                        state.available -= 1
                        return true
                    }
                    state.waiters.append(Waiter(id: id, continuation: continuation))
                    return nil
                }
                switch resumeNow {
                case true?: continuation.resume()
                case false?: continuation.resume(throwing: CancellationError())
                case nil: break
                }
            }
        } onCancel: {
            let cancelled = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index).continuation
            }
            cancelled?.resume(throwing: CancellationError())
        }
    }

    func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            if state.waiters.isEmpty {
                state.available += 1
                return nil
            }
            return state.waiters.removeFirst().continuation
        }
        next?.resume()
    }
}
