import Synchronization

/// A value that is set once and awaited by any number of tasks (a readiness port, a fatal reason, a stop request).
/// Later resolutions are ignored.
public final class OneShot<Value: Sendable>: Sendable {
    private struct State {
        var value: Value?
        var nextWaiter: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Value?, Never>] = [:]
    }

    private let state = Mutex(State())

    public init() {}

    /// The value, if resolved.
    public var value: Value? { state.withLock { $0.value } }

    /// Sets the value and wakes every waiter; returns false if it was set already.
    @discardableResult
    public func resolve(_ value: Value) -> Bool {
        let waiters = state.withLock { state -> [CheckedContinuation<Value?, Never>]? in
            guard state.value == nil else { return nil }
            state.value = value
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        guard let waiters else { return false }
        for waiter in waiters { waiter.resume(returning: value) }
        return true
    }

    /// Waits for the value (returns at once if it is set); nil if the waiting task is cancelled first.
    public func wait() async -> Value? {
        let id = state.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Value?, Never>) in
                let ready = state.withLock { state -> Value?? in
                    if let value = state.value { return .some(value) }
                    // Checked under the lock: a cancellation after this point finds the waiter and resumes it.
                    if Task.isCancelled { return .some(nil) }
                    state.waiters[id] = continuation
                    return .none
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume(returning: nil)
        }
    }
}
