import Synchronization

/// Jobs that wait for the ledger or for Apple, parked as data until one of a bounded set of runners takes them.
///
/// A job waiting for an Apple call permit (or for its turn at the ledger) used to be a suspended task: up to about
/// twelve async frames, each in a task allocator slab of ~1 KB kept until the task ends (~13 KB per waiting job,
/// 243 MB at 10,000 in flight: docs/BENCHMARKS.md, "Memory per waiting job"). Parked, a job is what it needs to go
/// on (its message without payload, the job, its local evidence, its deadline for Apple): the lane's task ends, and
/// the job's key stays busy in the scheduler, so the next job of the account waits behind it as before.
///
/// At most `limit` runners are active; each takes parked jobs in arrival order (for Apple: the earliest deadline
/// first, since every job gets the same deadline) until none is left. A runner whose job waits for something other
/// than what the stage is for (another job's Apple answer, another worker's lease, an operator fixing a setting) steps
/// aside while it waits (``JobStageSlot/whileWaitingElsewhere(_:)``), so those waits never keep parked jobs back;
/// back from such a wait it goes on at once, above the limit if it must, and retires when its job is done.
final class JobStage<Job: Sendable>: Sendable {
    private struct State {
        /// Parked jobs, the next at the end of `front`, later ones in arrival order in `back` (two stacks, so a taken
        /// job's bytes are let go at once).
        var front: [Job] = []
        var back: [Job] = []
        var active = 0
        var isClosed = false

        var count: Int { front.count + back.count }

        mutating func popFirst() -> Job? {
            if front.isEmpty {
                front = back.reversed()
                back = []
            }
            return front.popLast()
        }
    }

    /// Runners active at most.
    let limit: Int
    private let state = Mutex(State())
    private let startsContinuation: AsyncStream<Handoff<Job>>.Continuation
    /// Jobs for new runners: the owner starts one runner per element (``run(_:)``).
    private let starts: AsyncStream<Handoff<Job>>
    /// What lets this stage's runners step aside (``JobStageSlot/whileWaitingElsewhere(_:)``).
    private let slot: JobStageSlot

    init(limit: Int) {
        self.limit = max(1, limit)
        let (starts, startsContinuation) = AsyncStream.makeStream(of: Handoff<Job>.self)
        self.starts = starts
        self.startsContinuation = startsContinuation
        // The slot's closures reach the stage through a weak box set below: `self` is not whole until every field is,
        // and a strong reference would keep the stage alive for ever.
        let box = WeakStage<Job>()
        slot = JobStageSlot(stepAside: { box.stage?.stepAside() }, stepBack: { box.stage?.stepBack() })
        box.stage = self
    }

    /// Jobs parked now (not yet taken by a runner).
    var parkedCount: Int { state.withLock { $0.count } }

    /// Runners active now (not counting those waiting elsewhere).
    var activeCount: Int { state.withLock { $0.active } }

    /// Parks `job`; a runner starts with it at once if fewer than `limit` are active.
    func park(_ job: Job) {
        if claim(job) { startsContinuation.yield(Handoff(job)) }
    }

    /// Whether a runner may start with `job` now (fewer than `limit` active): then it counts as active, and the caller
    /// starts that runner, in its own task (``runner(from:_:)``) or through the stage's stream (``park(_:)``). The
    /// consumer loop starts its ready jobs' runners itself, one hop less per job. Otherwise `job` is parked, for a
    /// runner that finishes, and this returns false.
    func claim(_ job: Job) -> Bool {
        state.withLock { state in
            if state.active < limit, !state.isClosed {
                state.active += 1
                return true
            }
            state.back.append(job)
            return false
        }
    }

    /// The next job for a runner that finished one, or nil: the runner retires (nothing parked, or more runners
    /// active than the limit).
    func next() -> Job? {
        state.withLock { state in
            if state.active <= limit, !state.isClosed, let job = state.popFirst() { return job }
            state.active -= 1
            return nil
        }
    }

    /// Every job still parked, taken out (the owner ends them once its runners stopped). Closes the stage: a job
    /// parked later stays parked.
    func removeAll() -> [Job] {
        state.withLock { state in
            state.isClosed = true
            defer {
                state.front = []
                state.back = []
            }
            return state.front.reversed() + state.back
        }
    }

    /// A runner steps aside while its job waits elsewhere; a parked job gets a runner in its place.
    func stepAside() {
        let start = state.withLock { state -> Job? in
            state.active -= 1
            guard state.active < limit, !state.isClosed, let job = state.popFirst() else { return nil }
            state.active += 1
            return job
        }
        if let start { startsContinuation.yield(Handoff(start)) }
    }

    /// A runner back from waiting elsewhere: it goes on at once, counted again.
    func stepBack() {
        state.withLock { $0.active += 1 }
    }

    /// Starts a runner for each job handed out by ``park(_:)`` or ``stepAside()``, until the task is cancelled;
    /// returns when its runners have ended. A runner runs `work` on its job, then on each job ``next()`` gives, with
    /// ``JobStageSlot/current`` set.
    func run(_ work: @escaping @Sendable (Job) async -> Void) async {
        await withDiscardingTaskGroup { runners in
            for await handoff in starts {
                // Through the handoff, not a capture: the closure lives as long as the runner.
                runners.addTask { await self.runner(from: handoff, work) }
            }
        }
    }

    /// A runner: `work` on the job `first` holds (taken from it), then on each job ``next()`` gives, with
    /// ``JobStageSlot/current`` set. Started by ``run(_:)``, or by the owner of a job ``claim(_:)`` took.
    func runner(from first: Handoff<Job>, _ work: @Sendable (Job) async -> Void) async {
        await JobStageSlot.$current.withValue(slot) {
            var job = first.take()
            while let current = job {
                job = nil
                await work(current)
                job = self.next()
            }
        }
    }
}

/// A stage, weakly: set once while the stage is made, before any runner reads it.
private final class WeakStage<Job: Sendable>: @unchecked Sendable {
    weak var stage: JobStage<Job>?
}

/// What lets a job step aside from its stage while it waits for something else than the stage is for.
struct JobStageSlot: Sendable {
    let stepAside: @Sendable () -> Void
    let stepBack: @Sendable () -> Void

    /// The stage slot of the current task (set in the stage's runners; nil elsewhere, e.g. in tests that call a
    /// ``JobProcessor`` directly).
    @TaskLocal static var current: JobStageSlot?

    /// Runs `body`, a wait for another job's Apple answer, another worker's lease or an operator, with the current
    /// task's slot given to a parked job meanwhile.
    static func whileWaitingElsewhere<T>(_ body: () async throws -> T) async rethrows -> T {
        guard let slot = current else { return try await body() }
        slot.stepAside()
        defer { slot.stepBack() }
        return try await body()
    }
}
