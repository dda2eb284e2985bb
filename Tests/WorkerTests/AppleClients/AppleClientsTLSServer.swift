import Foundation
import Traffic

/// The Python server of `scripts/apple_tls_test_server.py`, run as a child process: over HTTPS it makes its own
/// test CA and a certificate for 127.0.0.1; `plain` serves HTTP. It prints `ready PORT` when it accepts
/// connections, and `kill()` ends it abruptly, like a crashed Apple.
final class AppleClientsTLSServer: Sendable {
    let port: Int
    let caBundlePath: String
    private let child: ChildProcess
    private let directory: URL

    private init(port: Int, directory: URL, child: ChildProcess) {
        self.port = port
        self.directory = directory
        self.caBundlePath = directory.appendingPathComponent("ca.pem").path
        self.child = child
    }

    /// Starts the server and waits (without sleeping) for its `ready` line.
    static func start(plain: Bool = false, port: Int? = nil) async throws -> AppleClientsTLSServer {
        let script = TestEnvironment.packageRoot.appendingPathComponent("scripts/apple_tls_test_server.py")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apple-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let child: ChildProcess
        do {
            // Stdin stays open: the server ends when it reads end of file (`stop()`), or with its starter.
            child = try ChildProcess(
                name: "apple-tls-server", executable: "/usr/bin/env",
                arguments: ["python3", script.path, directory.path] + (plain ? ["--plain"] : [])
                    + (port.map { ["--port", "\($0)"] } ?? []),
                logFile: TestChild.discard, readsLines: true, copiesLines: false, opensStdin: true)
        } catch {
            throw MissingResource(
                what: "python3 and openssl for the TLS test server", hint: "apt-get install python3 openssl")
        }
        let line = await child.waitForLine(timeout: .seconds(60)) { _ in true }
        guard let line, line.hasPrefix("ready "), let port = Int(line.dropFirst("ready ".count)) else {
            child.signal(SIGKILL)
            throw MissingResource(
                what: "a ready line from scripts/apple_tls_test_server.py",
                hint: "run it by hand to see why it fails (it needs python3 and openssl)")
        }
        return AppleClientsTLSServer(port: port, directory: directory, child: child)
    }

    /// Ends the server with SIGKILL: open connections die without a goodbye.
    func kill() async {
        child.signal(SIGKILL)
        _ = await child.waitForExit(timeout: .seconds(30))
    }

    /// Ends the server without waiting for it (it is called from `defer`): the server read its certificates at start,
    /// so the directory can go at once.
    func stop() {
        child.closeStdin()
        child.signal(SIGTERM)
        try? FileManager.default.removeItem(at: directory)
    }
}
