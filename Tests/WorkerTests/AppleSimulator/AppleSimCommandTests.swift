import Foundation
import Testing

@Suite("Apple simulator: command", .timeLimit(.minutes(1)))
struct AppleSimCommandTests {
    @Test("`verify-worker apple-sim --port 0` prints its address, serves, and exits 0 on SIGTERM")
    func commandLifecycle() async throws {
        let directory = try AppleSimTemporaryDirectory()
        defer { directory.remove() }
        let process = try TestEnvironment.verifyWorkerProcess(
            ["apple-sim", "--port", "0", "--state-dir", directory.file("state")])
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { process.terminate() } }

        // Read the first line (the address) without guessing a delay.
        let line: String = await Task.detached {
            var bytes: [UInt8] = []
            while true {
                let chunk = output.fileHandleForReading.readData(ofLength: 1)
                guard let byte = chunk.first else { break }
                if byte == UInt8(ascii: "\n") { break }
                bytes.append(byte)
            }
            return String(decoding: bytes, as: UTF8.self)
        }.value
        #expect(line.hasPrefix("listening=http://127.0.0.1:"))
        let base = try #require(URL(string: String(line.dropFirst("listening=".count))))

        let reply = try #require(await TestHTTP.get(base.appendingPathComponent("sim/roots").absoluteString))
        let data = Data(reply.body.utf8)
        #expect(reply.status == 200)
        #expect(String(decoding: data, as: UTF8.self).contains("BEGIN CERTIFICATE"))
        #expect(FileManager.default.fileExists(atPath: directory.file("state/pki-ec-root.pem")))

        process.terminate()  // SIGTERM
        await Task.detached { process.waitUntilExit() }.value
        #expect(process.terminationReason == .exit)
        #expect(process.terminationStatus == 0)
    }

    @Test("`--notification-url` sets the target; a time scale that is not positive is refused")
    func notificationFlags() async throws {
        let process = try TestEnvironment.verifyWorkerProcess(
            [
                "apple-sim", "--port", "0", "--notification-url", "http://127.0.0.1:9/hook",
                "--notification-time-scale", "60",
            ])
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        let line: String = await Task.detached {
            var bytes: [UInt8] = []
            while let byte = output.fileHandleForReading.readData(ofLength: 1).first, byte != UInt8(ascii: "\n") {
                bytes.append(byte)
            }
            return String(decoding: bytes, as: UTF8.self)
        }.value
        let base = try #require(URL(string: String(line.dropFirst("listening=".count))))
        let reply = try #require(
            await TestHTTP.get(base.appendingPathComponent("sim/notifications/target").absoluteString))
        #expect(reply.body.contains("http://127.0.0.1:9/hook"))
        process.terminate()
        await Task.detached { process.waitUntilExit() }.value

        let refused = try TestEnvironment.verifyWorkerProcess(
            ["apple-sim", "--port", "0", "--notification-time-scale", "0"])
        refused.standardOutput = FileHandle.nullDevice
        refused.standardError = FileHandle.nullDevice
        try refused.run()
        await Task.detached { refused.waitUntilExit() }.value
        #expect(refused.terminationStatus != 0)
    }
}
