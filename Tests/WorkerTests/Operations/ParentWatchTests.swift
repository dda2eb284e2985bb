import Foundation
import Testing
import Traffic

@testable import Operations

/// A `verify-worker` child started with `VERIFY_EXIT_WITH_PARENT` ends when its starter is gone: a crashed test run,
/// bench or chaos harness leaves no broker, simulator or worker behind holding its pipes.
@Suite("Operations: children end with their starter", .timeLimit(.minutes(2)))
struct ParentWatchTests {
    @Test("a child whose starter is killed with SIGKILL stops itself")
    func childStopsWhenStarterDies() async throws {
        let binary = try TestEnvironment.verifyWorkerBinary()
        // The starter is a shell: it starts the simulator watching the shell ($$), prints the child's pid, waits.
        // Its stderr is discarded, not this process's: if this test process died, the shell and its child would
        // hold `swift test`'s output pipe open until its timeout.
        let starter = TestChild(
            try ChildProcess(
                name: "starter", executable: "/bin/sh",
                arguments: [
                    "-c", #"VERIFY_EXIT_WITH_PARENT=$$ "$0" apple-sim --port 0 2>/dev/null & echo "child=$!"; wait"#,
                    binary.path,
                ], logFile: TestChild.discard, readsLines: true, copiesLines: false))
        // Both lines, in either order: the child's pid from the shell, and the simulator's own `listening=` line,
        // so the child is known to be up and serving before its starter dies.
        var child: Int32?
        var listening = false
        while child == nil || !listening, let line = await starter.nextLine() {
            if line.hasPrefix("child=") { child = Int32(line.dropFirst("child=".count)) }
            if line.hasPrefix("listening=") { listening = true }
        }
        let pid = try #require(child)
        #expect(listening)
        #expect(ParentWatch.isRunning(pid))

        starter.kill()
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(40)
        while ParentWatch.isRunning(pid), clock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
        }
        let stillRunning = ParentWatch.isRunning(pid)
        if stillRunning { kill(pid, SIGKILL) }
        #expect(!stillRunning, "the child outlived its starter")
    }

    @Test("a process is running until it is gone or a zombie")
    func isRunning() {
        #expect(ParentWatch.isRunning(getpid()))
        #expect(!ParentWatch.isRunning(Int32.max))
    }

    @Test("a child's environment names this process")
    func childEnvironment() {
        let environment = ParentWatch.childEnvironment(["A": "b"])
        #expect(environment == ["A": "b", ParentWatch.environmentKey: String(getpid())])
    }
}
