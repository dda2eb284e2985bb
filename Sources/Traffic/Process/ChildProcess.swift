import Foundation
import Glibc
import Operations
import Synchronization

/// A child process of the harness (a worker, the dev broker, the Apple simulator, wrk, a script), started with
/// `posix_spawn` and reaped here with a blocking `waitpid` on a thread of its own.
///
/// The one way the demo, the benchmarks and the chaos harness start and stop children. Not Foundation's `Process`:
/// its `waitUntilExit()` was seen to spin forever in a loaded process after its child had ended, and its pipes'
/// dispatch sources crashed libdispatch when closed during a chaos run's teardown. Stdout is either kept line by line
/// (for the one line a service prints when it is ready, and the dev broker's control replies; copied to the log file
/// when there is one) or written to the log file; stderr goes to the log file, or is inherited without one.
public final class ChildProcess: Sendable {
    /// How the child ended.
    public enum Exit: Sendable, Equatable, CustomStringConvertible {
        case exited(Int32)
        case signalled(Int32)

        public var description: String {
            switch self {
            case .exited(let code): "exit \(code)"
            case .signalled(let signal): "signal \(signal)"
            }
        }

        /// The status as a shell reports it: the exit code, or the signal's number for a child a signal ended.
        public var status: Int32 {
            switch self {
            case .exited(let code): code
            case .signalled(let signal): signal
            }
        }
    }

    /// Why the child could not be started.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// A short name for logs and thread names (`worker-2`, `dev-broker`).
    public let name: String
    public let pid: pid_t
    /// Where stderr (and stdout, unless it is read) goes; nil: both are inherited from this process.
    public let logFile: URL?
    private let state = Mutex(State())

    /// Stdout lines kept for ``waitForLine(timeout:after:where:)`` and ``allLines()``: by default enough for any
    /// control dialogue, bounded so that a chatty child cannot grow the parent's memory without end.
    private let keptLines: Int

    private struct State {
        var lines: [String] = []
        var stdoutClosed = false
        var exit: Exit?
        /// The write end of the child's stdin, while it is open.
        var stdin: Int32?
        var nextWaiter = 0
        /// Waiters are kept by id, so that a timeout can take its own waiter out and resume it with nil.
        var lineWaiters: [Int: LineWaiter] = [:]
        var exitWaiters: [Int: CheckedContinuation<Exit?, Never>] = [:]
        var closeWaiters: [CheckedContinuation<[String], Never>] = []

        mutating func waiterID() -> Int {
            defer { nextWaiter += 1 }
            return nextWaiter
        }
    }

    private struct LineWaiter {
        var after: Int
        var predicate: @Sendable (String) -> Bool
        var continuation: CheckedContinuation<String?, Never>
    }

    /// Starts `executable` with `arguments` (without argv[0]) and exactly `environment`.
    ///
    /// - Parameters:
    ///   - logFile: created (emptied if it exists) for stderr, and for stdout unless `readsLines`; nil: inherited.
    ///   - readsLines: stdout is read line by line (and copied to `logFile` when `copiesLines`).
    ///   - mergesStderr: with `readsLines`, stderr goes into the same lines as stdout instead of the log.
    ///   - keptLines: how many stdout lines are kept for the waits (the first ones).
    ///   - opensStdin: stdin is a pipe for ``send(line:)`` and ``send(bytes:)``; otherwise `/dev/null`.
    ///   - exitsWithParent: the child ends with this process, even when this one crashes (``ParentWatch``).
    public init(
        name: String? = nil, executable: String, arguments: [String],
        environment: [String: String] = ProcessInfo.processInfo.environment, logFile: URL? = nil,
        readsLines: Bool = false, mergesStderr: Bool = false, copiesLines: Bool = true, keptLines: Int = 10_000,
        opensStdin: Bool = false, exitsWithParent: Bool = false
    ) throws(Failure) {
        // A control line written to a child that has just died must fail with EPIPE, not end this process with
        // SIGPIPE's default action (a test run or harness killed without a word). The child gets the default back.
        _ = Glibc.signal(SIGPIPE, SIG_IGN)
        let name = name ?? URL(fileURLWithPath: executable).lastPathComponent
        self.name = name
        self.logFile = logFile
        self.keptLines = keptLines
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // Every descriptor the parent keeps is close-on-exec, so that other children never inherit it; dup2 clears
        // the flag on the child's copy. Ownership: the parent closes its ends below, or when they are done.
        var log: Int32 = -1
        if let logFile {
            log = open(logFile.path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0o644)
            guard log >= 0 else { throw Failure(description: "cannot open \(logFile.path) (errno \(errno))") }
            posix_spawn_file_actions_adddup2(&actions, log, STDERR_FILENO)
        }
        let stdout = readsLines ? try Self.pipeEnds() : nil
        if let stdout {
            posix_spawn_file_actions_adddup2(&actions, stdout.write, STDOUT_FILENO)
            if mergesStderr { posix_spawn_file_actions_adddup2(&actions, stdout.write, STDERR_FILENO) }
        } else if log >= 0 {
            posix_spawn_file_actions_adddup2(&actions, log, STDOUT_FILENO)
        }
        let stdin = opensStdin ? try Self.pipeEnds() : nil
        if let stdin {
            posix_spawn_file_actions_adddup2(&actions, stdin.read, STDIN_FILENO)
        } else {
            posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0)
        }

        let environment = exitsWithParent ? ParentWatch.childEnvironment(environment) : environment
        // Ownership: every strdup'ed string is freed right after posix_spawn copied them into the child.
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        // The child starts with no blocked signal and every signal at its default action: a parent that blocks or
        // ignores SIGTERM (as service runtimes do, to handle it themselves) must not pass that on, or stop()'s
        // SIGTERM would be lost.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        var child: pid_t = 0
        let spawned = posix_spawn(&child, executable, &actions, &attributes, argv, envp)
        if let stdout { close(stdout.write) }
        if let stdin { close(stdin.read) }
        // The log stays open in the parent only to copy the stdout it reads.
        if log >= 0 && (stdout == nil || !copiesLines) {
            close(log)
            log = -1
        }
        guard spawned == 0 else {
            if let stdout { close(stdout.read) }
            if let stdin { close(stdin.write) }
            if log >= 0 { close(log) }
            throw Failure(description: "cannot start \(executable) (posix_spawn errno \(spawned))")
        }
        pid = child
        state.withLock {
            $0.stdin = stdin?.write
            $0.stdoutClosed = stdout == nil
        }

        if let stdout {
            let copy = log
            let reader = Thread { [self] in readLines(from: stdout.read, copyTo: copy) }
            reader.name = "child-stdout-\(name)"
            reader.start()
        }
        let reaper = Thread { [self] in reap() }
        reaper.name = "child-reaper-\(name)"
        reaper.start()
    }

    private static func pipeEnds() throws(Failure) -> (read: Int32, write: Int32) {
        var descriptors: [Int32] = [-1, -1]
        guard pipe(&descriptors) == 0 else { throw Failure(description: "pipe failed (errno \(errno))") }
        // Close-on-exec (Glibc's module does not export pipe2).
        _ = fcntl(descriptors[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(descriptors[1], F_SETFD, FD_CLOEXEC)
        return (descriptors[0], descriptors[1])
    }

    /// How the child ended, if it has.
    public var exit: Exit? { state.withLock { $0.exit } }

    /// The stdout lines read so far (the first 10,000).
    public var lines: [String] { state.withLock { $0.lines } }

    /// The first stdout line from line number `after` on (already read or still to come) matching `predicate`; nil
    /// once stdout closed without one (or, when stdout is not read, the child ended), or after `timeout`.
    public func waitForLine(
        timeout: Duration, after: Int = 0, where predicate: @escaping @Sendable (String) -> Bool
    ) async -> String? {
        await wait(timeout: timeout) { state, id, continuation in
            if let line = state.lines.dropFirst(after).first(where: predicate) { return .some(line) }
            if state.stdoutClosed { return .some(nil) }
            state.lineWaiters[id] = LineWaiter(after: after, predicate: predicate, continuation: continuation)
            return .none
        } unregister: { state, id in
            state.lineWaiters.removeValue(forKey: id)?.continuation
        }
    }

    /// Every stdout line (the first 10,000), once stdout has closed.
    public func allLines() async -> [String] {
        await withCheckedContinuation { continuation in
            let done: [String]? = state.withLock { state in
                if state.stdoutClosed { return state.lines }
                state.closeWaiters.append(continuation)
                return nil
            }
            if let done { continuation.resume(returning: done) }
        }
    }

    /// Waits until the child has ended and been reaped; nil after `timeout` (the child may still run).
    public func waitForExit(timeout: Duration) async -> Exit? {
        await wait(timeout: timeout) { state, id, continuation in
            if let exit = state.exit { return .some(exit) }
            state.exitWaiters[id] = continuation
            return .none
        } unregister: { state, id in
            state.exitWaiters.removeValue(forKey: id)
        }
    }

    /// Awaits a waiter that `register` leaves in the state (or the value it returns at once), at most `timeout`. The
    /// timer is a child task, cancelled as soon as the value comes: no sleeper outlives the wait; a waiter the time
    /// ran out for is taken out by `unregister` and resumed with nil.
    private func wait<Value: Sendable>(
        timeout: Duration,
        register: @escaping @Sendable (inout State, Int, CheckedContinuation<Value?, Never>) -> Value??,
        unregister: @escaping @Sendable (inout State, Int) -> CheckedContinuation<Value?, Never>?
    ) async -> Value? {
        let id = state.withLock { $0.waiterID() }
        return await withTaskGroup(of: Value?.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    let immediate = self.state.withLock { register(&$0, id, continuation) }
                    if let immediate { continuation.resume(returning: immediate) }
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            self.state.withLock { unregister(&$0, id) }?.resume(returning: nil)
            return first
        }
    }

    /// Writes one control line to stdin (opened with `opensStdin`); nothing once the child has ended.
    public func send(line: String) {
        send(bytes: Array((line + "\n").utf8))
    }

    /// Writes `bytes` to stdin (opened with `opensStdin`); nothing once the child has ended or stdin was closed. Blocks
    /// while the pipe is full (large inputs belong on a thread of their own), but never holds the state's lock while
    /// it does: the stdout reader needs it, and a child blocked on a full stdout stops reading its stdin.
    public func send(bytes: [UInt8]) {
        // A copy of the descriptor: the reaper may close the original while this writes.
        let descriptor: Int32 = state.withLock { state in
            guard state.exit == nil, let stdin = state.stdin else { return -1 }
            return fcntl(stdin, F_DUPFD_CLOEXEC, 0)
        }
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        var written = 0
        while written < bytes.count {
            let count = bytes[written...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return }
            written += count
        }
    }

    /// Closes stdin (opened with `opensStdin`): the child reads end of file once every copy is closed.
    public func closeStdin() {
        state.withLock { state in
            if let stdin = state.stdin { close(stdin) }
            state.stdin = nil
        }
    }

    /// Sends `signal` (SIGTERM, SIGKILL) unless the child has already been reaped (its pid may then belong to another
    /// process).
    public func signal(_ signal: Int32) {
        state.withLock { state in
            if state.exit == nil { _ = kill(pid, signal) }
        }
    }

    /// SIGTERM, then SIGKILL if the child is still there after `grace`; returns how it ended (nil: not even SIGKILL
    /// ended it within `killLimit`).
    @discardableResult
    public func stop(grace: Duration = .seconds(10), killLimit: Duration = .seconds(10)) async -> Exit? {
        signal(SIGTERM)
        if let exit = await waitForExit(timeout: grace) { return exit }
        signal(SIGKILL)
        return await waitForExit(timeout: killLimit)
    }

    /// The child's resident memory (`/proc/PID/status`), nil once it is gone.
    public func memory() -> ProcessMemory? { ProcessMemory.of(pid: pid) }

    /// The CPU time the child has used (`/proc/PID/stat`), nil once it is gone.
    public func cpuTime() -> ProcessCPUTime? { ProcessCPUTime.of(pid: pid) }

    // MARK: Threads

    private func readLines(from descriptor: Int32, copyTo log: Int32) {
        var partial: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            if log >= 0 { _ = buffer.withUnsafeBytes { write(log, $0.baseAddress, count) } }
            partial.append(contentsOf: buffer[..<count])
            while let newline = partial.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: partial[..<newline], as: UTF8.self)
                partial.removeSubrange(...newline)
                received(line)
            }
        }
        // A last line without its newline is a line too (curl's `-w` status, a child that died mid-write).
        if !partial.isEmpty { received(String(decoding: partial, as: UTF8.self)) }
        close(descriptor)
        if log >= 0 { close(log) }
        let (waiters, closeWaiters, lines) = state.withLock { state in
            state.stdoutClosed = true
            defer {
                state.lineWaiters = [:]
                state.closeWaiters = []
            }
            return (state.lineWaiters.values.map(\.continuation), state.closeWaiters, state.lines)
        }
        for waiter in waiters { waiter.resume(returning: nil) }
        for waiter in closeWaiters { waiter.resume(returning: lines) }
    }

    private func received(_ line: String) {
        let matched = state.withLock { state -> [CheckedContinuation<String?, Never>] in
            let number = state.lines.count
            if number < keptLines { state.lines.append(line) }
            var matched: [CheckedContinuation<String?, Never>] = []
            for (id, waiter) in state.lineWaiters where number >= waiter.after && waiter.predicate(line) {
                matched.append(waiter.continuation)
                state.lineWaiters.removeValue(forKey: id)
            }
            return matched
        }
        for continuation in matched { continuation.resume(returning: line) }
    }

    private func reap() {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 {
            guard errno == EINTR else {
                // Reaped by someone else (ECHILD): the status is unknown.
                status = 0xFF << 8
                break
            }
        }
        let signal = status & 0x7F
        let exit: Exit = signal == 0 ? .exited((status >> 8) & 0xFF) : .signalled(signal)
        let (exitWaiters, lineWaiters) = state.withLock {
            state -> ([CheckedContinuation<Exit?, Never>], [CheckedContinuation<String?, Never>]) in
            state.exit = exit
            if let stdin = state.stdin { close(stdin) }
            state.stdin = nil
            defer { state.exitWaiters = [:] }
            // Without a stdout to read, no line can come any more; with one, its end of file ends the waits.
            guard state.stdoutClosed else { return (Array(state.exitWaiters.values), []) }
            defer { state.lineWaiters = [:] }
            return (Array(state.exitWaiters.values), state.lineWaiters.values.map(\.continuation))
        }
        for waiter in exitWaiters { waiter.resume(returning: exit) }
        for waiter in lineWaiters { waiter.resume(returning: nil) }
    }
}
