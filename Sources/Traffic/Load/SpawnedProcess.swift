import Foundation
import Glibc
import Synchronization

/// A child process started with `posix_spawn` and reaped here with a blocking `waitpid` on a thread of its own.
///
/// Foundation's `Process.waitUntilExit()` was seen to spin forever in a loaded process after its child had ended,
/// so benchmarks start their helpers (the Apple simulator, wrk) this way instead. The child's stdout is read on a
/// second thread of its own, line by line, so that a parent can wait for a "ready" line; stderr is inherited.
public final class SpawnedProcess: Sendable {
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
    }

    /// Why the child could not be started.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    public let pid: pid_t
    private let state = Mutex(State())

    private struct State {
        var lines: [String] = []
        var stdoutClosed = false
        var exit: Exit?
        var nextWaiter = 0
        /// Waiters are kept by id, so that a timeout can take its own waiter out and resume it with nil.
        var lineWaiters:
            [Int: (predicate: @Sendable (String) -> Bool, continuation: CheckedContinuation<String?, Never>)] =
                [:]
        var exitWaiters: [Int: CheckedContinuation<Exit?, Never>] = [:]
        var closeWaiters: [CheckedContinuation<[String], Never>] = []

        mutating func waiterID() -> Int {
            defer { nextWaiter += 1 }
            return nextWaiter
        }
    }

    /// Starts `executable` with `arguments` (without argv[0]) and the parent's environment plus `environment`.
    public init(executable: String, arguments: [String], environment: [String: String] = [:]) throws(Failure) {
        var descriptors: [Int32] = [-1, -1]
        guard pipe(&descriptors) == 0 else {
            throw Failure(description: "pipe failed (errno \(errno))")
        }
        let (readEnd, writeEnd) = (descriptors[0], descriptors[1])
        // Close-on-exec, so that other children never inherit them (Glibc's module does not export pipe2).
        _ = fcntl(readEnd, F_SETFD, FD_CLOEXEC)
        _ = fcntl(writeEnd, F_SETFD, FD_CLOEXEC)

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // dup2 clears close-on-exec on the child's stdout; the pipe's own descriptors close at exec.
        posix_spawn_file_actions_adddup2(&actions, writeEnd, STDOUT_FILENO)

        var merged = ProcessInfo.processInfo.environment
        merged.merge(environment) { _, new in new }

        // Ownership: every strdup'ed string is freed right after posix_spawn copied them into the child.
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
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
        close(writeEnd)
        guard spawned == 0 else {
            close(readEnd)
            throw Failure(description: "cannot start \(executable) (posix_spawn errno \(spawned))")
        }
        pid = child

        let reader = Thread { [self] in readLines(from: readEnd) }
        reader.name = "spawned-stdout"
        reader.start()
        let reaper = Thread { [self] in reap() }
        reaper.name = "spawned-reaper"
        reaper.start()
    }

    /// How the child ended, if it has.
    public var exit: Exit? { state.withLock { $0.exit } }

    /// The first stdout line matching `predicate` (already read or still to come); nil once stdout closed without
    /// one, or after `timeout`.
    public func firstLine(
        timeout: Duration, where predicate: @escaping @Sendable (String) -> Bool
    ) async -> String? {
        await withCheckedContinuation { continuation in
            let (immediate, id): (String??, Int) = state.withLock { state in
                if let line = state.lines.first(where: predicate) { return (.some(line), 0) }
                if state.stdoutClosed { return (.some(nil), 0) }
                let id = state.waiterID()
                state.lineWaiters[id] = (predicate, continuation)
                return (.none, id)
            }
            if let immediate {
                continuation.resume(returning: immediate)
                return
            }
            Task {
                try? await Task.sleep(for: timeout)
                self.state.withLock { $0.lineWaiters.removeValue(forKey: id) }?.continuation.resume(returning: nil)
            }
        }
    }

    /// Every stdout line (the first 1,000), once stdout has closed.
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
        await withCheckedContinuation { continuation in
            let (done, id): (Exit?, Int) = state.withLock { state in
                if let exit = state.exit { return (exit, 0) }
                let id = state.waiterID()
                state.exitWaiters[id] = continuation
                return (nil, id)
            }
            if let done {
                continuation.resume(returning: done)
                return
            }
            Task {
                try? await Task.sleep(for: timeout)
                self.state.withLock { $0.exitWaiters.removeValue(forKey: id) }?.resume(returning: nil)
            }
        }
    }

    /// Sends `signal` unless the child has already been reaped (its pid may then belong to another process).
    public func send(_ signal: Int32) {
        state.withLock { state in
            if state.exit == nil { _ = kill(pid, signal) }
        }
    }

    /// SIGTERM, then SIGKILL if the child is still there after `grace`; returns how it ended.
    public func stop(grace: Duration = .seconds(10)) async -> Exit {
        send(SIGTERM)
        if let exit = await waitForExit(timeout: grace) { return exit }
        send(SIGKILL)
        // SIGKILL cannot be refused; the reaper thread resumes this as soon as the kernel has ended the child.
        while true {
            if let exit = await waitForExit(timeout: .seconds(60)) { return exit }
        }
    }

    // MARK: Threads

    private func readLines(from descriptor: Int32) {
        var partial: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            partial.append(contentsOf: buffer[..<count])
            while let newline = partial.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: partial[..<newline], as: UTF8.self)
                partial.removeSubrange(...newline)
                received(line)
            }
        }
        close(descriptor)
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
            // Only the first lines are kept: a chatty child must not grow the parent's memory without bound.
            if state.lines.count < 1000 { state.lines.append(line) }
            var matched: [CheckedContinuation<String?, Never>] = []
            for (id, waiter) in state.lineWaiters where waiter.predicate(line) {
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
        let waiters = state.withLock { state in
            state.exit = exit
            defer { state.exitWaiters = [:] }
            return Array(state.exitWaiters.values)
        }
        for waiter in waiters { waiter.resume(returning: exit) }
    }
}
