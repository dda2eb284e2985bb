import Foundation
import Operations
import Synchronization
import Traffic

/// A child process a test starts and talks to: the harness's ``ChildProcess`` (`posix_spawn`, never Foundation's
/// `Process`), with a cursor over its stdout lines so that they can be taken one after another.
final class TestChild: Sendable {
    let process: ChildProcess
    private let cursor = Mutex(0)

    init(_ process: ChildProcess) { self.process = process }

    /// Where a child's stderr goes when the test does not read it.
    static let discard = URL(fileURLWithPath: "/dev/null")

    /// A child of the built `verify-worker` that ends with this test process (``ParentWatch``), so that a crashed run
    /// leaves nothing holding `swift test`'s output pipe.
    ///
    /// - Parameters:
    ///   - logFile: stderr (nil: discarded), unless `mergesStderr` puts it among the lines.
    static func verifyWorker(
        _ arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment,
        logFile: URL? = nil, mergesStderr: Bool = false, opensStdin: Bool = false, name: String? = nil
    ) throws -> TestChild {
        let binary = try TestEnvironment.verifyWorkerBinary()
        return TestChild(
            try ChildProcess(
                name: name ?? arguments.first ?? "verify-worker", executable: binary.path, arguments: arguments,
                environment: environment, logFile: logFile ?? discard, readsLines: true, mergesStderr: mergesStderr,
                copiesLines: false, opensStdin: opensStdin, exitsWithParent: true))
    }

    /// The next stdout line; nil once stdout closed without one, or after `timeout`.
    func nextLine(timeout: Duration = .seconds(60)) async -> String? {
        await firstLine(timeout: timeout) { _ in true }
    }

    /// The first stdout line from the cursor on that matches `predicate`; the cursor moves past it.
    func firstLine(
        timeout: Duration = .seconds(60), where predicate: @escaping @Sendable (String) -> Bool
    ) async
        -> String?
    {
        let after = cursor.withLock { $0 }
        guard let line = await process.waitForLine(timeout: timeout, after: after, where: predicate) else { return nil }
        let lines = process.lines
        let index = lines.indices.dropFirst(after).first { predicate(lines[$0]) } ?? after
        cursor.withLock { $0 = max($0, index + 1) }
        return line
    }

    var isRunning: Bool { process.exit == nil }

    /// SIGTERM, then SIGKILL after `grace`; how the child ended.
    func terminate(grace: Duration = .seconds(30)) async -> ChildProcess.Exit? {
        await process.stop(grace: grace)
    }

    /// SIGKILL, without waiting (for a `defer`).
    func kill() { process.signal(SIGKILL) }

    /// Runs the built `verify-worker` to its end (ending with this process if it crashes).
    static func runVerifyWorker(
        _ arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment,
        input: [UInt8] = [], timeout: Duration = .seconds(120)
    ) async throws -> ChildProcess.Completion {
        try await ChildProcess.run(
            executable: try TestEnvironment.verifyWorkerBinary().path, arguments: arguments,
            environment: ParentWatch.childEnvironment(environment), input: input, timeout: timeout)
    }
}
