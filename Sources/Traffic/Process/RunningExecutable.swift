import Foundation

/// This program's own executable (`/proc/self/exe`, else `argv[0]`), for the commands that start children of the
/// same build: the bench's workers and simulator, the chaos harness's processes.
package enum RunningExecutable {
    package static var url: URL {
        if let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            return URL(fileURLWithPath: path)
        }
        return URL(fileURLWithPath: CommandLine.arguments[0])
    }
}
