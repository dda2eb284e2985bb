import Foundation
import Operations
import Testing

@testable import Traffic

@Suite("Traffic: child processes", .timeLimit(.minutes(2)))
struct ChildProcessTests {
    @Test("A child's stdout lines are read and its exit status is reaped")
    func linesAndExit() async throws {
        let process = try ChildProcess(
            executable: "/bin/sh", arguments: ["-c", "echo first; echo \"listening=$GREETING\"; exit 3"],
            environment: ["GREETING": "http://127.0.0.1:1"], readsLines: true)
        let line = await process.waitForLine(timeout: .seconds(30)) { $0.hasPrefix("listening=") }
        #expect(line == "listening=http://127.0.0.1:1")
        #expect(await process.allLines() == ["first", "listening=http://127.0.0.1:1"])
        #expect(await process.waitForExit(timeout: .seconds(30)) == .exited(3))
        #expect(process.exit == .exited(3))
    }

    @Test("stop() ends a child with SIGTERM and reaps it")
    func stopSendsTerm() async throws {
        let process = try ChildProcess(executable: "/bin/sleep", arguments: ["30"], readsLines: true)
        #expect(await process.stop(grace: .seconds(20)) == .signalled(SIGTERM))
        // A line that never comes: stdout closed with the child, so the wait ends.
        #expect(await process.waitForLine(timeout: .seconds(30)) { $0 == "never" } == nil)
    }

    @Test("A child that ignores SIGTERM is killed after the grace period")
    func stopEscalatesToKill() async throws {
        let process = try ChildProcess(
            executable: "/bin/sh", arguments: ["-c", "trap '' TERM; echo ready; exec sleep 600"], readsLines: true)
        #expect(await process.waitForLine(timeout: .seconds(30)) { $0 == "ready" } == "ready")
        let clock = ContinuousClock()
        let started = clock.now
        // The child would outlive the test by far: only the kill ends it (a loaded CI run once starved this test
        // for over 30 s, long enough for a shorter sleep to end on its own). `exec`: no orphan keeps the inherited
        // stderr (swift test's output) open after the kill.
        let exit = await process.stop(grace: .milliseconds(200))
        #expect(exit == .signalled(SIGKILL), "\(exit.map(\.description) ?? "not reaped")")
        #expect(started.duration(to: clock.now) < .seconds(60))
    }

    @Test("A missing executable is an error, not a crash")
    func missingExecutable() {
        #expect(throws: ChildProcess.Failure.self) {
            try ChildProcess(executable: "/nonexistent/verify-worker", arguments: [])
        }
    }

    @Test("stdout and stderr go to the log file, which a restart empties")
    func logFile() async throws {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("child-\(UUID().uuidString).log")
        defer { try? FileManager.default.removeItem(at: log) }
        for round in 1...2 {
            let process = try ChildProcess(
                executable: "/bin/sh", arguments: ["-c", "echo out-\(round); echo err-\(round) >&2"], logFile: log)
            #expect(await process.waitForExit(timeout: .seconds(30)) == .exited(0))
            let text = try String(contentsOf: log, encoding: .utf8)
            #expect(text.split(separator: "\n").sorted() == ["err-\(round)", "out-\(round)"])
        }
    }

    @Test("Read stdout is copied to the log file; stderr goes there too")
    func readLinesAndLog() async throws {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("child-\(UUID().uuidString).log")
        defer { try? FileManager.default.removeItem(at: log) }
        let process = try ChildProcess(
            executable: "/bin/sh", arguments: ["-c", "echo ready; echo oops >&2"], logFile: log, readsLines: true)
        #expect(await process.allLines() == ["ready"])
        #expect(await process.waitForExit(timeout: .seconds(30)) == .exited(0))
        let text = try String(contentsOf: log, encoding: .utf8)
        #expect(text.split(separator: "\n").sorted() == ["oops", "ready"])
    }

    @Test("Control lines go to stdin; a reply is awaited after the lines already read")
    func controlDialogue() async throws {
        let process = try ChildProcess(
            executable: "/bin/sh", arguments: ["-c", "echo ok; while read line; do echo \"ok $line\"; done"],
            readsLines: true, opensStdin: true)
        #expect(await process.waitForLine(timeout: .seconds(30)) { $0.hasPrefix("ok") } == "ok")
        for command in ["one", "two"] {
            let before = process.lines.count
            process.send(line: command)
            // From `before` on: the earlier "ok" lines must not answer this command.
            let reply = await process.waitForLine(timeout: .seconds(30), after: before) { $0.hasPrefix("ok") }
            #expect(reply == "ok \(command)")
        }
        // Stdin closes with stop(); the shell's loop would also end at end of file.
        #expect(await process.stop(grace: .seconds(20)) == .signalled(SIGTERM))
    }

    @Test("A child that must end with its parent is told the parent's pid")
    func parentWatch() async throws {
        let process = try ChildProcess(
            executable: "/bin/sh", arguments: ["-c", "echo \"$\(ParentWatch.environmentKey)\""], environment: [:],
            readsLines: true, exitsWithParent: true)
        #expect(await process.allLines() == [String(getpid())])
        let unwatched = try ChildProcess(
            executable: "/bin/sh", arguments: ["-c", "echo \"[$\(ParentWatch.environmentKey)]\""], environment: [:],
            readsLines: true)
        #expect(await unwatched.allLines() == ["[]"])
    }

    @Test("Stdin is /dev/null unless it is opened for control lines")
    func stdinIsNull() async throws {
        let process = try ChildProcess(
            executable: "/bin/sh", arguments: ["-c", "cat; echo done"], readsLines: true)
        #expect(await process.allLines() == ["done"])
    }

    @Test("run() keeps stdout and stderr apart and reports the exit")
    func runKeepsStreamsApart() async throws {
        let done = try await ChildProcess.run(
            executable: "/bin/sh", arguments: ["-c", "echo out; echo err >&2; echo more; printf last; exit 4"])
        #expect(done.exit == .exited(4))
        #expect(!done.succeeded)
        // The last line had no newline: it is kept, and given one.
        #expect(done.output == "out\nmore\nlast\n")
        #expect(done.errors == "err\n")
    }

    @Test("run() feeds an input larger than a pipe while the child echoes it (no deadlock), then end of file")
    func runFeedsLargeInput() async throws {
        // 20,000 lines of 100 bytes: 2 MB, about 30 pipe buffers each way, and more lines than a child keeps by
        // default.
        let line = String(repeating: "x", count: 99) + "\n"
        let input = Array(String(repeating: line, count: 20_000).utf8)
        let done = try await ChildProcess.run(executable: "/bin/cat", arguments: [], input: input)
        #expect(done.exit == .exited(0))
        #expect(done.output.utf8.count == input.count)
    }

    @Test("run() without reading stdout ends when the command does, even if a daemon it started holds stdout")
    func runWithoutOutputIgnoresDaemons() async throws {
        let done = try await ChildProcess.run(
            executable: "/bin/sh", arguments: ["-c", "sleep 30 & echo started"], readsOutput: false,
            timeout: .seconds(20))
        #expect(done.exit == .exited(0))
        #expect(done.errors == "started\n")
    }

    @Test("run() kills a command that outlives its time limit and says so")
    func runTimesOut() async throws {
        // The command would run ten minutes; it ends with the time limit (plus the kill), well within the suite's
        // one-minute limit even when a full run starves the test's tasks for a while at its start.
        let clock = ContinuousClock()
        let start = clock.now
        let error = await #expect(throws: ChildProcess.Failure.self) {
            _ = try await ChildProcess.run(executable: "/bin/sleep", arguments: ["600"], timeout: .milliseconds(300))
        }
        #expect(error?.description.contains("killed") == true, "\(String(describing: error))")
        #expect(clock.now - start < .seconds(60))
    }

    @Test("Merged stderr arrives among the stdout lines")
    func mergedStderr() async throws {
        let process = try ChildProcess(
            executable: "/bin/sh", arguments: ["-c", "echo out; echo err >&2"], readsLines: true, mergesStderr: true)
        #expect(Set(await process.allLines()) == ["out", "err"])
    }
}
