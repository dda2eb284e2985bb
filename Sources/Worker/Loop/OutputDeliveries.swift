import Synchronization

/// The outputs (verdicts, dead letters) being delivered now, each with the instant its delivery began, so that the
/// worker can tell when one is not proven delivered within the delivery timeout.
///
/// A send can wait inside librdkafka for up to its message timeout before it fails, so the delivery loop alone cannot
/// notice the timeout passing; the worker's periodic task counts the overdue ones here instead. One short critical
/// section at the start and one at the end of each delivery; the count walks every entry, once per commit interval.
final class OutputDeliveries: Sendable {
    /// A delivery under way, for ``end(_:)``.
    struct Ticket: Sendable {
        fileprivate let id: UInt64
    }

    private struct State {
        var started: [UInt64: ContinuousClock.Instant] = [:]
        var nextID: UInt64 = 0
        /// Tasks waiting until no delivery is under way (``waitUntilNone()``).
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    func begin(at instant: ContinuousClock.Instant) -> Ticket {
        state.withLock { state in
            state.nextID += 1
            state.started[state.nextID] = instant
            return Ticket(id: state.nextID)
        }
    }

    /// The delivery ended: delivered, refused, or abandoned (cancelled by a revoke or a drain).
    func end(_ ticket: Ticket) {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.started.removeValue(forKey: ticket.id)
            guard state.started.isEmpty else { return [] }
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once no delivery is under way.
    func waitUntilNone() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.started.isEmpty { return true }
                state.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Deliveries under way that began before `instant`.
    func count(startedBefore instant: ContinuousClock.Instant) -> Int {
        state.withLock { state in state.started.values.reduce(0) { $0 + ($1 < instant ? 1 : 0) } }
    }
}
