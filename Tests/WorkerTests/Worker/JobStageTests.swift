import Synchronization
import Testing

@testable import Worker

/// The worker's stages: jobs that wait for the ledger or Apple wait as data, a bounded number of runners finish them.
@Suite("Pipeline: job stages", .timeLimit(.minutes(3)))
struct JobStageTests {
    /// Jobs the test lets finish one by one, with the order they started in and the most that ran at once.
    final class JobStageJobs: Sendable {
        private struct State {
            var started: [Int] = []
            var finished: [Int] = []
            var running = 0
            var mostRunning = 0
            var released: Set<Int> = []
            var waiting: [Int: CheckedContinuation<Void, Never>] = [:]
        }

        private let state = Mutex(State())

        var started: [Int] { state.withLock { $0.started } }
        var finished: [Int] { state.withLock { $0.finished } }
        var mostRunning: Int { state.withLock { $0.mostRunning } }

        /// Runs job `job`: records its start, waits until the test releases it.
        func run(_ job: Int) async {
            state.withLock { state in
                state.started.append(job)
                state.running += 1
                state.mostRunning = max(state.mostRunning, state.running)
            }
            await waitForRelease(job)
            state.withLock { state in
                state.running -= 1
                state.finished.append(job)
            }
        }

        func waitForRelease(_ job: Int) async {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.released.remove(job) != nil { return true }
                    state.waiting[job] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        }

        func release(_ job: Int) {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                guard let waiter = state.waiting.removeValue(forKey: job) else {
                    state.released.insert(job)
                    return nil
                }
                return waiter
            }
            waiter?.resume()
        }
    }

    /// Polls `condition` every 20 ms for at most 60 s (the full suite's parallel tests may keep the runners from the
    /// cooperative threads for seconds; a shorter period only adds to that load).
    static func poll(_ what: String, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now.advanced(by: .seconds(60))
        while !condition() {
            guard ContinuousClock.now < deadline else {
                Issue.record("timed out waiting for: \(what)")
                throw JobStageTimeout(what: what)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    struct JobStageTimeout: Error {
        let what: String
    }

    @Test("jobs beyond the limit stay parked, start in arrival order as runners free up, and none is lost")
    func boundedAndInOrder() async throws {
        let stage = JobStage<Int>(limit: 3)
        let jobs = JobStageJobs()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await stage.run { await jobs.run($0) } }
            for job in 0..<20 { stage.park(job) }
            try await Self.poll("three jobs started") { jobs.started.count == 3 }
            #expect(stage.parkedCount == 17)
            #expect(stage.activeCount == 3)
            // Released out of order: the freed runner takes the earliest parked job, not the one after its own.
            jobs.release(2)
            try await Self.poll("a fourth job started") { jobs.started.count == 4 }
            // One at a time, so only one runner is free when the next parked job is taken: two runners freed together
            // would each take a job in order but could record their starts in either order.
            for (index, job) in ([0, 1] + Array(3..<20)).enumerated() {
                jobs.release(job)
                let started = min(20, 5 + index)
                try await Self.poll("\(started) jobs started") { jobs.started.count >= started }
            }
            try await Self.poll("every job finished") { jobs.finished.count == 20 }
            try await Self.poll("every runner retired") { stage.activeCount == 0 }
            group.cancelAll()
        }
        // The first three start together on three runners: they may record their starts in any order. Every later
        // job starts alone, in arrival order.
        #expect(Set(jobs.started.prefix(3)) == [0, 1, 2])
        #expect(Array(jobs.started.dropFirst(3)) == Array(3..<20))
        #expect(Set(jobs.finished) == Set(0..<20))
        #expect(jobs.mostRunning == 3)
        #expect(stage.parkedCount == 0)
    }

    @Test("a job waiting elsewhere gives its runner's slot to a parked job; back, it goes on and its runner retires")
    func stepAside() async throws {
        let stage = JobStage<Int>(limit: 1)
        let jobs = JobStageJobs()
        let elsewhere = JobStageJobs()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                await stage.run { job in
                    if job == 0 {
                        // Job 0 waits for another job's answer first (as a single-flight follower does).
                        await JobStageSlot.whileWaitingElsewhere { await elsewhere.waitForRelease(0) }
                    }
                    await jobs.run(job)
                }
            }
            for job in 0..<3 { stage.park(job) }
            // Job 0 waits elsewhere, so job 1 runs in its place although the limit is one.
            try await Self.poll("job 1 started") { jobs.started == [1] }
            #expect(stage.activeCount == 1)
            #expect(stage.parkedCount == 1)
            elsewhere.release(0)
            try await Self.poll("job 0 went on") { jobs.started == [1, 0] }
            #expect(stage.activeCount == 2)
            // Above the limit, job 0's runner retires when done: job 2 waits for job 1's runner.
            jobs.release(0)
            try await Self.poll("job 0 finished") { jobs.finished == [0] }
            try await Self.poll("job 0's runner retired") { stage.activeCount == 1 }
            #expect(stage.parkedCount == 1)
            jobs.release(1)
            try await Self.poll("job 2 started") { jobs.started == [1, 0, 2] }
            jobs.release(2)
            try await Self.poll("every runner retired") { stage.activeCount == 0 }
            group.cancelAll()
        }
        #expect(jobs.finished == [0, 1, 2])
    }

    @Test("outside a runner, waiting elsewhere just waits")
    func noSlot() async {
        #expect(JobStageSlot.current == nil)
        let value = await JobStageSlot.whileWaitingElsewhere { 7 }
        #expect(value == 7)
    }

    @Test("jobs still parked when the stage stops are handed back, and later ones are kept for the owner")
    func removeAll() async throws {
        let stage = JobStage<Int>(limit: 1)
        let jobs = JobStageJobs()
        let runner = Task { await stage.run { await jobs.run($0) } }
        for job in 0..<4 { stage.park(job) }
        try await Self.poll("job 0 started") { jobs.started == [0] }
        #expect(stage.removeAll() == [1, 2, 3])
        stage.park(4)
        #expect(stage.parkedCount == 1)
        jobs.release(0)
        try await Self.poll("the runner retired") { stage.activeCount == 0 }
        #expect(jobs.started == [0])
        runner.cancel()
        await runner.value
    }
}
