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
        _ = state.withLock { $0.started.removeValue(forKey: ticket.id) }
    }

    /// Deliveries under way that began before `instant`.
    func count(startedBefore instant: ContinuousClock.Instant) -> Int {
        state.withLock { state in state.started.values.reduce(0) { $0 + ($1 < instant ? 1 : 0) } }
    }
}
