import Foundation
import Traffic

/// Runs a tool to its end for a test: `posix_spawn` through the harness's ``ChildProcess``, never Foundation's
/// `Process`, whose `run()` crashed a whole test run (SIGSEGV in its memcpy) while other tests started children.
enum TestCommand {
    /// Runs `arguments` (a tool looked up on PATH by `/usr/bin/env`, then its arguments), in `directory` when given,
    /// with `input` on stdin.
    static func run(
        _ arguments: [String], in directory: URL? = nil, input: [UInt8]? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment, timeout: Duration = .seconds(300)
    ) async throws -> ChildProcess.Completion {
        try await ChildProcess.run(
            executable: "/usr/bin/env", arguments: (directory.map { ["-C", $0.path] } ?? []) + arguments,
            environment: environment, input: input, timeout: timeout)
    }

    /// Runs `command` with bash, stdout and stderr together, waiting only for bash itself (a daemon it started may
    /// keep its descriptors).
    static func shell(_ command: String, timeout: Duration = .seconds(300)) async throws -> ChildProcess.Completion {
        try await ChildProcess.run(
            executable: "/bin/bash", arguments: ["-c", command], readsOutput: false, timeout: timeout)
    }
}
