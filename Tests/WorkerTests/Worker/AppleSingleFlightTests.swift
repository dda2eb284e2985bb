import Foundation
import Operations
import Synchronization
import Testing

@testable import Worker

/// The worker's single flight: one call per key at a time, the answer shared, a failed leader replaced by the
/// follower with the earliest deadline, no follower kept past its own deadline.
@Suite("Apple single flight", .timeLimit(.minutes(2)))
struct AppleSingleFlightTests {
    typealias Machine = AppleSingleFlightStateMachine<String, Int, String, String>

    // MARK: The state machine (instants are plain numbers)

    @Test("the first job leads, later ones follow, and finishing hands every follower the answer")
    func leadFollowFinish() {
        var machine = Machine()
        let led = machine.leadIfIdle("r", deadline: 10)
        #expect(led)
        let ledAgain = machine.leadIfIdle("r", deadline: 11)
        #expect(!ledAgain)
        for (id, name) in ["a", "b", "c"].enumerated() {
            guard case .follow(let wakeUp) = machine.join("r", id: id, deadline: 20 + id, waiter: name) else {
                Issue.record("a job joining a flight under way must follow")
                return
            }
            // Their deadlines come after the leader's: no timer needed.
            #expect(wakeUp == nil)
        }
        #expect(machine.followerCount == 3)
        let answered = machine.finish("r")
        #expect(Set(answered) == ["a", "b", "c"])
        #expect(machine.flightCount == 0)
        // The flight ended: the next job to join leads a new one.
        guard case .lead = machine.join("r", id: 9, deadline: 30, waiter: "late") else {
            Issue.record("a job joining after the flight ended must lead")
            return
        }
    }

    @Test("a failed leader hands over to the follower with the earliest deadline; with none the flight ends")
    func handOver() {
        var machine = Machine()
        let led = machine.leadIfIdle("r", deadline: 10)
        #expect(led)
        _ = machine.join("r", id: 1, deadline: 40, waiter: "late")
        _ = machine.join("r", id: 2, deadline: 25, waiter: "early")
        _ = machine.join("r", id: 3, deadline: 30, waiter: "middle")
        let first = machine.handOver("r")
        #expect(first == "early")
        #expect(machine.followerCount == 2)
        let second = machine.handOver("r")
        #expect(second == "middle")
        let third = machine.handOver("r")
        #expect(third == "late")
        #expect(machine.flightCount == 1)
        let none = machine.handOver("r")
        #expect(none == nil)
        #expect(machine.flightCount == 0)
    }

    @Test("a follower whose deadline comes before the leader's gets a timer, and only it stops waiting then")
    func followerDeadline() {
        var machine = Machine()
        let led = machine.leadIfIdle("r", deadline: 100)
        #expect(led)
        guard case .follow(let first) = machine.join("r", id: 1, deadline: 50, waiter: "fifty"),
            case .follow(let later) = machine.join("r", id: 2, deadline: 70, waiter: "seventy"),
            case .follow(let earlier) = machine.join("r", id: 3, deadline: 40, waiter: "forty"),
            case .follow(let patient) = machine.join("r", id: 4, deadline: 200, waiter: "patient")
        else {
            Issue.record("every job must follow")
            return
        }
        #expect(first == 50)
        #expect(later == nil)  // the flight's timer fires earlier already
        #expect(earlier == 40)  // earlier than the pending timer: one more
        #expect(patient == nil)
        // The 50 timer fires first at 50: a leftover (the flight's timer is 40 now), it ends what is due, no more.
        let stale = machine.expire("r", firedAt: 50, now: 50)
        #expect(Set(stale.expired) == ["forty", "fifty"])
        #expect(stale.next == nil)
        // The flight's own timer (40) fires late: it ends nothing more and schedules the next follower before 100.
        let own = machine.expire("r", firedAt: 40, now: 55)
        #expect(own.expired.isEmpty)
        #expect(own.next == 70)
        let last = machine.expire("r", firedAt: 70, now: 70)
        #expect(last.expired == ["seventy"])
        #expect(last.next == nil)
        let answered = machine.finish("r")
        #expect(answered == ["patient"])
    }

    @Test("a cancelled follower leaves the flight; cancelling twice finds nothing")
    func cancelFollower() {
        var machine = Machine()
        let led = machine.leadIfIdle("r", deadline: 10)
        #expect(led)
        _ = machine.join("r", id: 1, deadline: 20, waiter: "a")
        let cancelled = machine.cancel("r", id: 1)
        #expect(cancelled == "a")
        let again = machine.cancel("r", id: 1)
        #expect(again == nil)
        let answered = machine.finish("r")
        #expect(answered.isEmpty)
    }

    // MARK: The flight with real tasks

    @Test("50 jobs asking at once: one call, the other 49 share its answer")
    func fiftyJobsOneCall() async throws {
        let flight = AppleSingleFlight<String, String>()
        let calls = CallCount()
        let release = OneShot<Void>()
        let deadline = ContinuousClock.now.advanced(by: .seconds(30))
        let outcomes = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<50 {
                group.addTask {
                    let outcome = try await flight.run("receipt", deadline: deadline) {
                        calls.add()
                        _ = await release.wait()
                        return "answer"
                    }
                    return switch outcome {
                    case .own(let value): "own \(value)"
                    case .shared(let value): "shared \(value)"
                    case .deadlinePassed: "deadline"
                    }
                }
            }
            // Every job has joined before the call returns: one leader, 49 followers.
            try await poll("49 followers") { flight.followerCount == 49 }
            release.resolve(())
            var outcomes: [String: Int] = [:]
            for try await outcome in group { outcomes[outcome, default: 0] += 1 }
            return outcomes
        }
        #expect(calls.value == 1)
        #expect(outcomes == ["own answer": 1, "shared answer": 49])
        #expect(flight.flightCount == 0)
    }

    @Test("a leader cancelled mid-call hands over: one follower calls, the rest share its answer")
    func cancelledLeader() async throws {
        let flight = AppleSingleFlight<String, String>()
        let calls = CallCount()
        let deadline = ContinuousClock.now.advanced(by: .seconds(30))
        let leaderCalling = OneShot<Void>()
        let leader = Task {
            try await flight.run("receipt", deadline: deadline) {
                calls.add()
                leaderCalling.resolve(())
                // Waits for its cancellation, as a job waiting for Apple does.
                _ = await OneShot<Void>().wait()
                throw CancellationError()
            }
        }
        _ = await leaderCalling.wait()
        let followers = (0..<5).map { index in
            Task {
                try await flight.run("receipt", deadline: deadline.advanced(by: .milliseconds(index))) {
                    calls.add()
                    return "follower \(index)"
                }
            }
        }
        try await poll("5 followers") { flight.followerCount == 5 }
        leader.cancel()
        await #expect(throws: CancellationError.self) { try await leader.value }
        var owned: [String] = []
        var shared: [String] = []
        for follower in followers {
            switch try await follower.value {
            case .own(let value): owned.append(value)
            case .shared(let value): shared.append(value)
            case .deadlinePassed: Issue.record("no follower waits until its deadline here")
            }
        }
        #expect(calls.value == 2)
        // The follower with the earliest deadline took over.
        #expect(owned == ["follower 0"])
        #expect(shared == Array(repeating: "follower 0", count: 4))
        #expect(flight.flightCount == 0)
    }

    @Test("a follower whose deadline comes before the leader's stops waiting at its deadline, not the leader's")
    func earlyFollowerStopsAtItsDeadline() async throws {
        let flight = AppleSingleFlight<String, String>()
        let clock = ContinuousClock()
        let release = OneShot<Void>()
        let leaderCalling = OneShot<Void>()
        let leader = Task {
            try await flight.run("receipt", deadline: clock.now.advanced(by: .seconds(60))) {
                leaderCalling.resolve(())
                _ = await release.wait()
                return "answer"
            }
        }
        _ = await leaderCalling.wait()
        let followerDeadline = clock.now.advanced(by: .milliseconds(200))
        let outcome = try await flight.run("receipt", deadline: followerDeadline) { "must not call" }
        guard case .deadlinePassed = outcome else {
            Issue.record("expected the follower to stop at its deadline, got \(outcome)")
            return
        }
        #expect(clock.now >= followerDeadline)
        // Its leader is still calling: the follower did not wait for it.
        #expect(flight.flightCount == 1)
        release.resolve(())
        guard case .own("answer") = try await leader.value else {
            Issue.record("the leader keeps its own answer")
            return
        }
    }

    @Test("a cancelled follower ends at once with CancellationError and leaves the leader alone")
    func cancelledFollower() async throws {
        let flight = AppleSingleFlight<String, String>()
        let release = OneShot<Void>()
        let leaderCalling = OneShot<Void>()
        let deadline = ContinuousClock.now.advanced(by: .seconds(30))
        let leader = Task {
            try await flight.run("receipt", deadline: deadline) {
                leaderCalling.resolve(())
                _ = await release.wait()
                return "answer"
            }
        }
        _ = await leaderCalling.wait()
        let follower = Task { try await flight.run("receipt", deadline: deadline) { "must not call" } }
        try await poll("1 follower") { flight.followerCount == 1 }
        follower.cancel()
        await #expect(throws: CancellationError.self) { try await follower.value }
        #expect(flight.followerCount == 0)
        release.resolve(())
        guard case .own = try await leader.value else {
            Issue.record("the leader keeps its own answer")
            return
        }
    }

    /// Polls `condition` every 5 ms until it holds, for at most 10 s.
    func poll(_ what: String, _ condition: () -> Bool) async throws {
        let limit = ContinuousClock.now.advanced(by: .seconds(10))
        while !condition() {
            guard ContinuousClock.now < limit else {
                Issue.record("timed out waiting for \(what)")
                throw CancellationError()
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}

/// How many calls a test's flights made.
final class CallCount: Sendable {
    private let count = Mutex(0)

    var value: Int { count.withLock { $0 } }

    func add() { count.withLock { $0 += 1 } }
}
