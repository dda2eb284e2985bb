import Foundation
import Glibc

extension ChildProcess {
    /// What a command that ran to its end printed, and how it ended.
    public struct Completion: Sendable {
        public var exit: Exit
        /// Stdout, each line ending with a newline (the last one too); empty when it was not read.
        public var output: String
        /// Stderr, and stdout too when it was not read.
        public var errors: String

        /// The command exited with 0.
        public var succeeded: Bool { exit == .exited(0) }
    }

    /// Runs `executable` to its end: feeds it `input` (then end of file; without input, stdin is `/dev/null`), keeps
    /// what it printed, and returns how it ended. After `timeout` the child is killed with SIGKILL and this throws;
    /// when the calling task is cancelled this throws at once and leaves the child running.
    ///
    /// With `readsOutput` false, stdout goes with stderr to the log, and the wait ends when the child exits, even if
    /// a daemon it started still holds its descriptors (a shell that starts PostgreSQL).
    public static func run(
        executable: String, arguments: [String],
        environment: [String: String] = ProcessInfo.processInfo.environment, input: [UInt8]? = nil,
        readsOutput: Bool = true, timeout: Duration = .seconds(300)
    ) async throws(Failure) -> Completion {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("child-\(UUID().uuidString).log")
        defer { try? FileManager.default.removeItem(at: log) }
        let child = try ChildProcess(
            executable: executable, arguments: arguments, environment: environment, logFile: log,
            readsLines: readsOutput, copiesLines: false, keptLines: .max, opensStdin: input != nil)
        if let input {
            // On a thread of its own: a full pipe blocks the write until the child reads.
            Thread.detachNewThread {
                child.send(bytes: input)
                child.closeStdin()
            }
        }
        guard let exit = await child.waitForExit(timeout: timeout) else {
            // A cancelled caller (a test's time limit) returns at once; the command runs on, so that a cleanup
            // started in that state (stopping a database) still happens.
            if Task.isCancelled { throw Failure(description: "\(child.name): the wait was cancelled; left running") }
            child.signal(SIGKILL)
            _ = await child.waitForExit(timeout: .seconds(10))
            throw Failure(description: "\(child.name) did not end within \(timeout); killed")
        }
        let lines = readsOutput ? await child.allLines() : []
        let errors = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        return Completion(exit: exit, output: lines.map { $0 + "\n" }.joined(), errors: errors)
    }
}
