import AppleClients
import Foundation
import Testing

@testable import Traffic

@Suite("Apple clients: spawned processes", .timeLimit(.minutes(1)))
struct AppleClientsSpawnedProcessTests {
    @Test("A child's stdout lines are read and its exit status is reaped")
    func linesAndExit() async throws {
        let process = try SpawnedProcess(
            executable: "/bin/sh", arguments: ["-c", "echo first; echo \"listening=$GREETING\"; exit 3"],
            environment: ["GREETING": "http://127.0.0.1:1"])
        let line = await process.firstLine(timeout: .seconds(30)) { $0.hasPrefix("listening=") }
        #expect(line == "listening=http://127.0.0.1:1")
        #expect(await process.allLines() == ["first", "listening=http://127.0.0.1:1"])
        #expect(await process.waitForExit(timeout: .seconds(30)) == .exited(3))
        #expect(process.exit == .exited(3))
    }

    @Test("stop() ends a child with SIGTERM and reaps it")
    func stopSendsTerm() async throws {
        let process = try SpawnedProcess(executable: "/bin/sleep", arguments: ["30"])
        #expect(await process.stop(grace: .seconds(20)) == .signalled(SIGTERM))
        // A line that never comes: stdout closed with the child, so the wait ends.
        #expect(await process.firstLine(timeout: .seconds(30)) { $0 == "never" } == nil)
    }

    @Test("A child that ignores SIGTERM is killed after the grace period")
    func stopEscalatesToKill() async throws {
        let process = try SpawnedProcess(
            executable: "/bin/sh", arguments: ["-c", "trap '' TERM; echo ready; sleep 30"])
        #expect(await process.firstLine(timeout: .seconds(30)) { $0 == "ready" } == "ready")
        let clock = ContinuousClock()
        let started = clock.now
        #expect(await process.stop(grace: .milliseconds(200)) == .signalled(SIGKILL))
        #expect(started.duration(to: clock.now) < .seconds(20))
    }

    @Test("A missing executable is an error, not a crash")
    func missingExecutable() {
        #expect(throws: SpawnedProcess.Failure.self) {
            try SpawnedProcess(executable: "/nonexistent/verify-worker", arguments: [])
        }
    }
}
