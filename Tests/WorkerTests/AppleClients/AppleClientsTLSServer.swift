import Foundation

/// The Python server of `scripts/apple_tls_test_server.py`, run as a child process: over HTTPS it makes its own
/// test CA and a certificate for 127.0.0.1; `plain` serves HTTP. It prints `ready PORT` when it accepts
/// connections, and `kill()` ends it abruptly, like a crashed Apple.
final class AppleClientsTLSServer {
    let port: Int
    let caBundlePath: String
    private let process: Process
    private let stdin: Pipe
    private let directory: URL

    private init(port: Int, directory: URL, process: Process, stdin: Pipe) {
        self.port = port
        self.directory = directory
        self.caBundlePath = directory.appendingPathComponent("ca.pem").path
        self.process = process
        self.stdin = stdin
    }

    /// Starts the server and waits (without sleeping) for its `ready` line.
    static func start(plain: Bool = false, port: Int? = nil) async throws -> AppleClientsTLSServer {
        let script = TestEnvironment.packageRoot.appendingPathComponent("scripts/apple_tls_test_server.py")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apple-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments =
            ["python3", script.path, directory.path] + (plain ? ["--plain"] : [])
            + (port.map { ["--port", "\($0)"] } ?? [])
        let stdin = Pipe()
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw MissingResource(
                what: "python3 and openssl for the TLS test server", hint: "apt-get install python3 openssl")
        }
        let line = await readLine(from: stdout.fileHandleForReading)
        guard let line, line.hasPrefix("ready "), let port = Int(line.dropFirst("ready ".count)) else {
            process.terminate()
            throw MissingResource(
                what: "a ready line from scripts/apple_tls_test_server.py",
                hint: "run it by hand to see why it fails (it needs python3 and openssl)")
        }
        return AppleClientsTLSServer(port: port, directory: directory, process: process, stdin: stdin)
    }

    /// Reads one line on a thread of its own, so the cooperative pool never blocks.
    private static func readLine(from handle: FileHandle) async -> String? {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                var bytes: [UInt8] = []
                while true {
                    let chunk = handle.availableData
                    if chunk.isEmpty { break }
                    bytes.append(contentsOf: chunk)
                    if bytes.contains(UInt8(ascii: "\n")) { break }
                }
                let text = String(decoding: bytes, as: UTF8.self)
                continuation.resume(returning: text.split(separator: "\n").first.map(String.init))
            }
        }
    }

    /// Ends the server with SIGKILL: open connections die without a goodbye.
    func kill() {
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Ends the server without waiting for it (it is called from `defer`, on the cooperative pool): the server read
    /// its certificates at start, so the directory can go at once.
    func stop() {
        try? stdin.fileHandleForWriting.close()
        process.terminate()
        try? FileManager.default.removeItem(at: directory)
    }
}
