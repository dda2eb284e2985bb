import AppleSimulator
import Foundation
import Logging
import Messages
import Operations
import RateLimiter
import Synchronization
import Testing
import Worker

/// Apple's refusals of the worker's own configuration (verifyReceipt 21004: wrong shared secret; Server API 401:
/// wrong key) are the worker's fault, not an answer about the purchase: no verdict is drawn from them.
@Suite("Pipeline: Apple refuses the worker's configuration", .serialized, .timeLimit(.minutes(3)))
struct StoreConfigurationFaultTests {
    @Test("a wrong shared secret keeps paid purchases undecided and the worker unready; the right one grants them")
    func wrongSharedSecret() async throws {
        // Bootstrapped before the worker creates its counters, which bind to the factory in force then.
        _ = MetricsBootstrap.registry()
        let refusedBefore = AppleCallStatusLabelTests.calls(endpoint: StoreEndpoint.verifyReceipt.name, status: "21004")
        try await PipelineHarness.with(simulatorSharedSecret: "the-right-secret") { harness in
            try harness.startWorker(0, environment: ["VERIFY_SHARED_SECRET": "a-wrong-secret"])
            try await harness.waitUntilAssigned()
            let jobs = try (0..<5).map { try harness.genuineJob(account: "acct-secret-\($0)").job }
            try await harness.submit(jobs)

            // The first job put to Apple was refused; the others wait for the setting without asking (one probe per
            // 30 s); the worker says why it is not ready.
            let simulator = harness.simulator
            try await PipelineHarness.poll("a receipt refused with 21004") {
                simulator.stats.snapshot().statuses["21004"] ?? 0 >= 1
            }
            // Counted as what Apple answered, not as `ok`.
            try await PipelineHarness.poll("verify_apple_calls_total{status=\"21004\"}") {
                AppleCallStatusLabelTests.calls(endpoint: StoreEndpoint.verifyReceipt.name, status: "21004")
                    > refusedBefore
            }
            let health = try #require(harness.health(0))
            try await PipelineHarness.poll("not ready, naming the shared secret") {
                health.notReadyReasons.contains("apple_shared_secret_rejected")
            }
            // Held, not decided: nothing recorded, nothing published, nothing committed.
            #expect(harness.verdicts.verdicts.filter { v in jobs.contains { $0.jobID == v.jobID } }.isEmpty)
            try await harness.stopWorker(0)

            try harness.startWorker(1, environment: ["VERIFY_SHARED_SECRET": "the-right-secret"])
            try await harness.waitUntilAssigned()
            try await harness.verdicts.waitForVerdicts(of: jobs.map(\.jobID))
            let verdicts = harness.verdicts.verdicts.filter { v in jobs.contains { $0.jobID == v.jobID } }
            // Every verdict of these jobs is a grant: none was published as unverifiable or rejected before.
            #expect(verdicts.allSatisfy { $0.outcome == .granted }, "\(verdicts.map(\.outcome))")
            #expect(Set(verdicts.map(\.jobID)) == Set(jobs.map(\.jobID)))
            #expect(harness.health(1)?.notReadyReasons.contains("apple_shared_secret_rejected") == false)
        }
    }

    @Test("the watch: one probe per interval while a fault stands, readiness and release when Apple accepts")
    func watch() async throws {
        let health = WorkerHealth()
        var logger = Logger(label: "watch")
        logger.logLevel = .critical
        let watch = StoreConfigurationWatch(
            health: health, logger: logger, probeInterval: .milliseconds(50), pollInterval: .milliseconds(5))
        // No fault: no wait.
        try await watch.waitForTurn(.sharedSecret)
        watch.refused(.sharedSecret)
        #expect(watch.isStanding(.sharedSecret))
        #expect(!watch.isStanding(.serverAPIKey))
        #expect(health.notReadyReasons.contains("apple_shared_secret_rejected"))
        // Another setting is not held back.
        try await watch.waitForTurn(.serverAPIKey)

        // Three jobs wait; the first probe goes after the interval, the others keep waiting.
        let released = ReleasedCount()
        let waiters = (0..<3).map { _ in
            Task {
                try await watch.waitForTurn(.sharedSecret)
                released.add()
            }
        }
        try await PipelineHarness.poll("one probe", timeout: .seconds(10)) { released.value == 1 }
        #expect(released.value == 1)
        watch.accepted(.sharedSecret)
        for waiter in waiters { try await waiter.value }
        #expect(released.value == 3)
        #expect(!health.notReadyReasons.contains("apple_shared_secret_rejected"))

        // A draining worker's held jobs end at once (they stay uncommitted).
        watch.refused(.serverAPIKey)
        health.draining()
        await #expect(throws: CancellationError.self) { try await watch.waitForTurn(.serverAPIKey) }
    }
}

private final class ReleasedCount: Sendable {
    private let count = Mutex(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}
