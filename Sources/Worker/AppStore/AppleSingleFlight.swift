import Synchronization

/// One Apple call at a time per key within a worker: the first job to ask (the leader) calls, the jobs asking the
/// same meanwhile (followers) wait for its answer. The entry is removed when the call ends, so memory follows the
/// calls in flight.
///
/// - A leader that fails (its task cancelled: a rebalance, a drain) hands the flight to the follower with the
///   earliest deadline, which then calls; the others keep waiting. So no follower is stranded.
/// - A follower never waits past its own deadline: the leader's deadline is the earliest of the flight when it took
///   over, and a follower that joins with an earlier one (its local stage took longer) gets a timer that ends its
///   wait at its deadline (``AppleSingleFlightOutcome/deadlinePassed``).
final class AppleSingleFlight<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private typealias Waiter = CheckedContinuation<AppleSingleFlightEnding<Value>, Never>
    private typealias StateMachine = AppleSingleFlightStateMachine<Key, ContinuousClock.Instant, Value, Waiter>

    private let state = Mutex(StateMachine())

    init() {}

    /// Runs `call` as the key's leader, or waits for the leader's value. Throws `CancellationError` when this task is
    /// cancelled while waiting, and whatever `call` throws when it led.
    func run(
        _ key: Key, deadline: ContinuousClock.Instant, _ call: () async throws -> Value
    ) async throws -> AppleSingleFlightOutcome<Value> {
        // Most keys have no flight (receipts are mostly distinct): take the lead without a continuation.
        if state.withLock({ $0.leadIfIdle(key, deadline: deadline) }) == false {
            // A follower waits for another job's answer, not for a permit: it leaves its stage slot meanwhile.
            switch await JobStageSlot.whileWaitingElsewhere({ await follow(key, deadline: deadline) }) {
            case .answered(let value): return .shared(value)
            case .deadlinePassed: return .deadlinePassed
            case .cancelled: throw CancellationError()
            case .lead: break
            }
        }
        let value: Value
        do {
            value = try await call()
        } catch {
            let successor = state.withLock { $0.handOver(key) }
            successor?.resume(returning: .lead)
            throw error
        }
        let followers = state.withLock { $0.finish(key) }
        for follower in followers { follower.resume(returning: .answered(value)) }
        return .own(value)
    }

    /// Keys with a flight now (tests).
    var flightCount: Int { state.withLock { $0.flightCount } }

    /// Followers waiting now (tests).
    var followerCount: Int { state.withLock { $0.followerCount } }

    private func follow(_ key: Key, deadline: ContinuousClock.Instant) async -> AppleSingleFlightEnding<Value> {
        let id = state.withLock { $0.reserveID() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (waiter: Waiter) in
                let action = state.withLock { machine -> StateMachine.JoinAction in
                    // Checked under the lock: a cancellation before this point found no follower to remove.
                    guard !Task.isCancelled else { return .refuse }
                    return machine.join(key, id: id, deadline: deadline, waiter: waiter)
                }
                switch action {
                case .refuse: waiter.resume(returning: .cancelled)
                case .lead: waiter.resume(returning: .lead)
                case .follow(let wakeUp): if let wakeUp { schedule(key, at: wakeUp) }
                }
            }
        } onCancel: {
            state.withLock { $0.cancel(key, id: id) }?.resume(returning: .cancelled)
        }
    }

    /// One timer per flight at a time, for the earliest follower whose deadline comes before its leader's.
    private func schedule(_ key: Key, at instant: ContinuousClock.Instant) {
        Task {
            try? await ContinuousClock().sleep(until: instant, tolerance: nil)
            let (expired, next) = state.withLock { $0.expire(key, firedAt: instant, now: .now) }
            for waiter in expired { waiter.resume(returning: .deadlinePassed) }
            if let next { schedule(key, at: next) }
        }
    }
}

/// How a job's turn in an ``AppleSingleFlight`` ended.
enum AppleSingleFlightOutcome<Value: Sendable>: Sendable {
    /// This job called (it led).
    case own(Value)
    /// Another job of the worker called; this is its value.
    case shared(Value)
    /// The job's deadline came while it waited.
    case deadlinePassed
}

/// What wakes a waiting follower.
enum AppleSingleFlightEnding<Value: Sendable>: Sendable {
    case answered(Value)
    /// The leader failed and this follower leads now.
    case lead
    case deadlinePassed
    case cancelled
}

/// The flights of an ``AppleSingleFlight``: per key, the leader's deadline and the followers. Pure state; its methods
/// return the waiters to resume (and when to wake up), which the owner does after releasing its lock.
struct AppleSingleFlightStateMachine<Key: Hashable, Instant: Comparable, Value, Waiter> {
    struct Follower {
        var deadline: Instant
        var waiter: Waiter
    }

    struct Flight {
        var leaderDeadline: Instant
        var followers: [Int: Follower] = [:]
        /// The instant of the flight's pending timer, if any.
        var wakeUp: Instant?
    }

    enum JoinAction {
        /// The task was cancelled before joining.
        case refuse
        /// No flight any more (it ended before this job joined): lead one.
        case lead
        /// Waiting; schedule a timer at this instant if given.
        case follow(wakeUp: Instant?)
    }

    private var flights: [Key: Flight] = [:]
    private var nextID = 0

    var flightCount: Int { flights.count }
    var followerCount: Int { flights.values.reduce(0) { $0 + $1.followers.count } }

    mutating func reserveID() -> Int {
        defer { nextID += 1 }
        return nextID
    }

    /// Starts a flight led by the caller when the key has none; false when one is under way.
    mutating func leadIfIdle(_ key: Key, deadline: Instant) -> Bool {
        guard flights[key] == nil else { return false }
        flights[key] = Flight(leaderDeadline: deadline)
        return true
    }

    mutating func join(_ key: Key, id: Int, deadline: Instant, waiter: Waiter) -> JoinAction {
        guard var flight = flights[key] else {
            flights[key] = Flight(leaderDeadline: deadline)
            return .lead
        }
        flight.followers[id] = Follower(deadline: deadline, waiter: waiter)
        var wakeUp: Instant?
        if deadline < flight.leaderDeadline, flight.wakeUp.map({ deadline < $0 }) ?? true {
            flight.wakeUp = deadline
            wakeUp = deadline
        }
        flights[key] = flight
        return .follow(wakeUp: wakeUp)
    }

    /// The leader answered: the flight ends; every follower gets the value.
    mutating func finish(_ key: Key) -> [Waiter] {
        flights.removeValue(forKey: key)?.followers.values.map(\.waiter) ?? []
    }

    /// The leader failed: the follower with the earliest deadline leads (returned, to resume with `.lead`); with no
    /// follower the flight ends.
    mutating func handOver(_ key: Key) -> Waiter? {
        guard var flight = flights[key] else { return nil }
        guard let (id, successor) = flight.followers.min(by: { $0.value.deadline < $1.value.deadline }) else {
            flights[key] = nil
            return nil
        }
        flight.followers[id] = nil
        flight.leaderDeadline = successor.deadline
        flights[key] = flight
        return successor.waiter
    }

    /// Removes a cancelled follower (nil when it was resumed already).
    mutating func cancel(_ key: Key, id: Int) -> Waiter? {
        flights[key]?.followers.removeValue(forKey: id)?.waiter
    }

    /// A timer fired: followers whose deadline has come stop waiting. Returns them, and the next timer's instant
    /// when this was the flight's own timer and a follower still has a deadline before its leader's.
    mutating func expire(_ key: Key, firedAt: Instant, now: Instant) -> (expired: [Waiter], next: Instant?) {
        guard var flight = flights[key] else { return ([], nil) }
        let due = flight.followers.filter { $0.value.deadline <= now }
        for id in due.keys { flight.followers[id] = nil }
        var next: Instant?
        // A timer left from an earlier flight of the key only ends what is due; the flight's own timer reschedules.
        if flight.wakeUp == firedAt {
            next = flight.followers.values.map(\.deadline).filter { $0 < flight.leaderDeadline }.min()
            flight.wakeUp = next
        }
        flights[key] = flight
        return (due.values.map(\.waiter), next)
    }
}
