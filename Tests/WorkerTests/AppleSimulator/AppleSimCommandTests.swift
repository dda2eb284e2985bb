import Foundation
import Testing
import Traffic

@Suite("Apple simulator: command", .timeLimit(.minutes(2)))
struct AppleSimCommandTests {
    @Test("`verify-worker apple-sim --port 0` prints its address, serves, and exits 0 on SIGTERM")
    func commandLifecycle() async throws {
        let directory = try AppleSimTemporaryDirectory()
        defer { directory.remove() }
        let child = try TestChild.verifyWorker(["apple-sim", "--port", "0", "--state-dir", directory.file("state")])
        defer { child.kill() }

        // The first line is the address; awaited, not guessed.
        let line = try #require(await child.nextLine())
        #expect(line.hasPrefix("listening=http://127.0.0.1:"))
        let base = try #require(URL(string: String(line.dropFirst("listening=".count))))

        let reply = try #require(await TestHTTP.get(base.appendingPathComponent("sim/roots").absoluteString))
        #expect(reply.status == 200)
        #expect(reply.body.contains("BEGIN CERTIFICATE"))
        #expect(FileManager.default.fileExists(atPath: directory.file("state/pki-ec-root.pem")))

        #expect(await child.terminate() == .exited(0))
    }

    @Test("`--notification-url` sets the target; a time scale that is not positive is refused")
    func notificationFlags() async throws {
        let child = try TestChild.verifyWorker([
            "apple-sim", "--port", "0", "--notification-url", "http://127.0.0.1:9/hook",
            "--notification-time-scale", "60",
        ])
        defer { child.kill() }
        let line = try #require(await child.nextLine())
        let base = try #require(URL(string: String(line.dropFirst("listening=".count))))
        let reply = try #require(
            await TestHTTP.get(base.appendingPathComponent("sim/notifications/target").absoluteString))
        #expect(reply.body.contains("http://127.0.0.1:9/hook"))
        _ = await child.terminate()

        let refused = try await TestChild.runVerifyWorker([
            "apple-sim", "--port", "0", "--notification-time-scale", "0",
        ])
        #expect(!refused.succeeded)
    }
}
