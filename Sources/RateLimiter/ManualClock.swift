import Synchronization

/// A clock that moves only when told to: for tests and for the storm simulation, never for production.
///
/// `now` starts at zero and changes only through ``advance(by:)`` or ``advance(to:)``. Tasks sleeping on this clock
/// resume (in deadline order) when an advance reaches their deadline, or throw `CancellationError` when their task is
/// cancelled. Nothing here reads real time, so a test of a 30-second storm runs in milliseconds.
public final class ManualClock: GateClock {
    /// A point on a ``ManualClock``: the time elapsed since the clock was created.
    public struct Instant: InstantProtocol, CustomStringConvertible {
        /// Time since the clock's origin.
        public var offset: Duration

        /// The instant `offset` after the clock's origin.
        public init(offset: Duration) {
            self.offset = offset
        }

        public func advanced(by duration: Duration) -> Instant {
            Instant(offset: offset + duration)
        }

        public func duration(to other: Instant) -> Duration {
            other.offset - offset
        }

        public static func < (lhs: Instant, rhs: Instant) -> Bool {
            lhs.offset < rhs.offset
        }

        public var description: String { "t+\(offset)" }
    }

    private struct Sleeper {
        var id: UInt64
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now = Instant(offset: .zero)
        var nextID: UInt64 = 0
        var sleepers: [Sleeper] = []
    }

    private let state = Mutex(State())
    private let unixMillisecondsAtOrigin: Int64

    /// A clock at `Instant(offset: .zero)`, whose origin corresponds to wall time `unixMillisecondsAtOrigin`
    /// (default: 2026-01-01T00:00:00Z, any fixed value works).
    public init(unixMillisecondsAtOrigin: Int64 = 1_767_225_600_000) {
        self.unixMillisecondsAtOrigin = unixMillisecondsAtOrigin
    }

    public var now: Instant {
        state.withLock { $0.now }
    }

    public var minimumResolution: Duration { .nanoseconds(1) }

    public var unixMillisecondsNow: Int64 {
        unixMillisecondsAtOrigin + now.offset.wholeMilliseconds
    }

    /// How many tasks are currently suspended in ``sleep(until:tolerance:)``.
    public var sleeperCount: Int {
        state.withLock { $0.sleepers.count }
    }

    /// The earliest deadline any sleeping task waits for, if any.
    public var nextDeadline: Instant? {
        state.withLock { $0.sleepers.map(\.deadline).min() }
    }

    /// Moves `now` forward by `duration` (a negative duration is ignored) and wakes every sleeper now due.
    public func advance(by duration: Duration) {
        let target = now.advanced(by: max(duration, .zero))
        advance(to: target)
    }

    /// Moves `now` to `instant` if that is later, and wakes every sleeper whose deadline has been reached.
    public func advance(to instant: Instant) {
        let due: [Sleeper] = state.withLock { state in
            if instant > state.now { state.now = instant }
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }.sorted { $0.deadline < $1.deadline }
            state.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for sleeper in due {
            sleeper.continuation.resume()
        }
    }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let immediate: (any Error)?? = state.withLock { state in
                    // Checked under the lock: a cancellation before this point finds no sleeper to remove.
                    if Task.isCancelled { return .some(CancellationError()) }
                    if deadline <= state.now { return .some(nil) }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    return .none
                }
                switch immediate {
                case .none: break
                case .some(.none): continuation.resume()
                case .some(.some(let error)): continuation.resume(throwing: error)
                }
            }
        } onCancel: {
            let cancelled: Sleeper? = state.withLock { state in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.sleepers.remove(at: index)
            }
            cancelled?.continuation.resume(throwing: CancellationError())
        }
    }
}
