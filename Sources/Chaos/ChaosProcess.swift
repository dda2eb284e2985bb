import Foundation
import Operations
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A child process of the harness: started from an executable, arguments and environment, with its stdout either
/// read line by line (for the one line a service prints when it is ready, and the dev broker's control replies) or
/// appended to a log file, its stderr always to the log file, and its stdin optionally open for control lines.
final class ChaosProcess: Sendable {
    /// How a process ended.
    enum Exit: Sendable, Equatable, CustomStringConvertible {
        case exited(Int32)
        case signalled(Int32)

        var description: String {
            switch self {
            case .exited(let code): "exit \(code)"
            case .signalled(let signal): "signal \(signal)"
            }
        }
    }

    let name: String
    let pid: Int32
    private let stdin: FileHandle?
    private let state = Mutex(State())

    private struct State {
        var lines: [String] = []
        var partial: [UInt8] = []
        var exit: Exit?
        var nextWaiter = 0
        var lineWaiters: [Int: LineWaiter] = [:]
        var exitWaiters: [Int: CheckedContinuation<Exit?, Never>] = [:]
    }

    private struct LineWaiter {
        var predicate: @Sendable (String) -> Bool
        var continuation: CheckedContinuation<String?, Never>
    }

    /// Starts the process. With `readStdout` its stdout lines are kept for ``waitForLine(timeout:where:)`` (and also
    /// written to the log); otherwise stdout goes to the log file only.
    init(
        name: String, executable: URL, arguments: [String], environment: [String: String], logFile: URL,
        readStdout: Bool, openStdin: Bool
    ) throws {
        self.name = name
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        // Its workers, broker and simulator end with the harness, even when the harness crashes.
        process.environment = ParentWatch.childEnvironment(environment)
        FileManager.default.createFile(atPath: logFile.path, contents: nil)
        let log = try FileHandle(forWritingTo: logFile)
        try log.seekToEnd()
        process.standardError = log
        let stdoutPipe = Pipe()
        process.standardOutput = readStdout ? stdoutPipe : log
        let stdinPipe = openStdin ? Pipe() : nil
        process.standardInput = stdinPipe ?? FileHandle.nullDevice
        stdin = stdinPipe?.fileHandleForWriting
        let box = ChaosProcessStateBox()
        process.terminationHandler = { finished in
            let exit: Exit =
                finished.terminationReason == .uncaughtSignal
                ? .signalled(finished.terminationStatus) : .exited(finished.terminationStatus)
            box.finished(exit)
        }
        try process.run()
        pid = process.processIdentifier
        box.attach(self)
        if readStdout {
            // A blocking reader on a thread of its own, not `readabilityHandler`: that one is a dispatch read source,
            // and a pipe closed while its source was still registered crashed the test process in libdispatch's
            // event loop (`_dispatch_event_loop_drain`, during a chaos run's teardown). The thread owns the handle
            // until end of file.
            let handle = stdoutPipe.fileHandleForReading
            let reader = Thread { [weak self] in
                while true {
                    let data = handle.availableData
                    if data.isEmpty { break }
                    log.write(data)
                    self?.received(Array(data))
                }
            }
            reader.name = "chaos-stdout-\(name)"
            reader.start()
        }
    }

    /// The lines read so far on stdout.
    var lines: [String] { state.withLock { $0.lines } }

    /// How it ended, if it has.
    var exit: Exit? { state.withLock { $0.exit } }

    /// The first stdout line (past or future, from line number `after` on) matching `predicate`, or nil when the
    /// process ends or time runs out.
    func waitForLine(
        timeout: Duration, after: Int = 0, where predicate: @escaping @Sendable (String) -> Bool
    ) async -> String? {
        let id = state.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        return await withTaskGroup(of: String?.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    let immediate: String?? = self.state.withLock { state in
                        if let line = state.lines.dropFirst(after).first(where: predicate) { return .some(line) }
                        if state.exit != nil { return .some(nil) }
                        state.lineWaiters[id] = LineWaiter(predicate: predicate, continuation: continuation)
                        return .none
                    }
                    if let immediate { continuation.resume(returning: immediate) }
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            self.state.withLock { $0.lineWaiters.removeValue(forKey: id) }?.continuation.resume(returning: nil)
            return first
        }
    }

    /// Writes one control line to stdin.
    func send(line: String) {
        stdin?.write(Data((line + "\n").utf8))
    }

    /// Sends a signal (SIGKILL, SIGTERM).
    func signal(_ number: Int32) {
        guard exit == nil else { return }
        kill(pid, number)
    }

    /// Waits until the process ends, at most `timeout`; nil on timeout.
    func waitForExit(timeout: Duration) async -> Exit? {
        let id = state.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        return await withTaskGroup(of: Exit?.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    let done: Exit? = self.state.withLock { state in
                        if let exit = state.exit { return exit }
                        state.exitWaiters[id] = continuation
                        return nil
                    }
                    if let done { continuation.resume(returning: done) }
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            self.state.withLock { $0.exitWaiters.removeValue(forKey: id) }?.resume(returning: nil)
            return first
        }
    }

    /// SIGTERM, then SIGKILL after `grace`; waits for the end.
    func stop(grace: Duration = .seconds(10)) async {
        signal(SIGTERM)
        if await waitForExit(timeout: grace) == nil {
            signal(SIGKILL)
            _ = await waitForExit(timeout: .seconds(10))
        }
        try? stdin?.close()
    }

    private func received(_ bytes: [UInt8]) {
        let ready = state.withLock { state -> [(CheckedContinuation<String?, Never>, String)] in
            state.partial += bytes
            var ready: [(CheckedContinuation<String?, Never>, String)] = []
            while let newline = state.partial.firstIndex(of: 0x0A) {
                let line = String(decoding: state.partial[..<newline], as: UTF8.self)
                state.partial.removeSubrange(...newline)
                state.lines.append(line)
                for (id, waiter) in state.lineWaiters where waiter.predicate(line) {
                    ready.append((waiter.continuation, line))
                    state.lineWaiters.removeValue(forKey: id)
                }
            }
            return ready
        }
        for (continuation, line) in ready { continuation.resume(returning: line) }
    }

    fileprivate func finished(_ exit: Exit) {
        let (lineWaiters, exitWaiters) = state.withLock { state in
            state.exit = exit
            defer {
                state.lineWaiters = [:]
                state.exitWaiters = [:]
            }
            return (state.lineWaiters.values.map(\.continuation), Array(state.exitWaiters.values))
        }
        for waiter in lineWaiters { waiter.resume(returning: nil) }
        for waiter in exitWaiters { waiter.resume(returning: exit) }
    }
}

/// Lets the termination handler (set before `run()`) reach the process object created after it, and keeps an exit
/// that happened before the object was ready.
private final class ChaosProcessStateBox: Sendable {
    private let state = Mutex<(owner: ChaosProcess?, pending: ChaosProcess.Exit?)>((nil, nil))

    func attach(_ owner: ChaosProcess) {
        let pending = state.withLock { state in
            state.owner = owner
            return state.pending
        }
        if let pending { owner.finished(pending) }
    }

    func finished(_ exit: ChaosProcess.Exit) {
        let owner = state.withLock { state in
            if state.owner == nil { state.pending = exit }
            return state.owner
        }
        owner?.finished(exit)
    }
}
