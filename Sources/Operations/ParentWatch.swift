import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Ends a child process when the process that started it is gone.
///
/// The test suite, `bench`, `demo` and `chaos` start `verify-worker` children (brokers, simulators, workers). When
/// the starting process crashed, its children lived on and kept its output pipes open: `swift test` then waited for
/// end of file for ever, and a `bench` stopped with Ctrl-C left its simulator running. A child started with
/// ``environmentKey`` set to its starter's process id watches that process and, once it is gone (exited, or a zombie
/// nobody reaped yet), stops itself like an operator would: SIGTERM (so a worker drains), then exit after a grace.
/// A process started without the variable (a pod, an operator's shell) is not watched.
public enum ParentWatch {
    /// The environment variable naming the process to outlive no longer.
    public static let environmentKey = "VERIFY_EXIT_WITH_PARENT"

    /// `environment` (by default this process's) with ``environmentKey`` naming this process: for a child that must
    /// not outlive it.
    public static func childEnvironment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> [String: String] {
        var environment = environment
        environment[environmentKey] = String(getpid())
        return environment
    }

    /// Starts the watch if ``environmentKey`` names a process (a thread of its own polls `/proc` four times a second).
    public static func startIfRequested(
        environment: [String: String] = ProcessInfo.processInfo.environment, grace: Duration = .seconds(30)
    ) {
        guard let value = environment[environmentKey], let watched = Int32(value), watched > 1,
            watched != getpid()
        else { return }
        let thread = Thread {
            while isRunning(watched) { usleep(250_000) }
            FileHandle.standardError.write(
                Data("verify-worker: the process that started this one (\(watched)) is gone; stopping\n".utf8))
            kill(getpid(), SIGTERM)
            Thread.sleep(forTimeInterval: Double(grace.components.seconds))
            _exit(70)
        }
        thread.name = "parent-watch"
        thread.start()
    }

    /// Whether `pid` is a process that has not ended: `/proc/PID/stat` exists and its state is not zombie or dead.
    static func isRunning(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return false }
        // "PID (comm) S …": the state is the first field after the command name, which may hold spaces.
        let state = stat[stat.index(after: close)...].split(separator: " ").first
        return state != "Z" && state != "X" && state != "x"
    }
}
