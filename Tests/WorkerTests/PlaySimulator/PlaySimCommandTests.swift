import Foundation
import Messages
import Testing
import Traffic

@Suite("Play simulator: command", .timeLimit(.minutes(2)))
struct PlaySimCommandTests {
    @Test(
        "`verify-worker play-sim --port 0 --service-account-file F` writes the key file, prints its address, serves, exits 0 on SIGTERM"
    )
    func commandLifecycle() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("play-sim-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let keyFile = directory.appendingPathComponent("service-account.json").path
        let child = try TestChild.verifyWorker(["play-sim", "--port", "0", "--service-account-file", keyFile])
        defer { child.kill() }

        // The first line is the address, printed once the key file is written; awaited, not guessed.
        let line = try #require(await child.nextLine())
        #expect(line.hasPrefix("listening=http://127.0.0.1:"))
        let base = String(line.dropFirst("listening=".count))

        let data = try #require(FileManager.default.contents(atPath: keyFile))
        let keyFileJSON = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(keyFileJSON["type"] as? String == "service_account")
        #expect(keyFileJSON["token_uri"] as? String == "\(base)/token")
        let mode = try FileManager.default.attributesOfItem(atPath: keyFile)[.posixPermissions] as? Int
        #expect(mode == 0o600)

        let key = try #require(await TestHTTP.get(base + "/sim/apps/com.example.app/licensing-key"))
        #expect(key.status == 200)
        #expect(key.body.contains("licensing_key"))

        #expect(await child.terminate() == .exited(0))
    }

    @Test(
        "with --push-endpoint the serving loop pushes a test notification, its token naming the flags' audience and account"
    )
    func commandPushes() async throws {
        try await PlayPushReceiver.with { url, receiver in
            let child = try TestChild.verifyWorker([
                "play-sim", "--port", "0", "--push-endpoint", url, "--push-audience", "https://verifier.example.com",
                "--push-service-account", "pusher@example.iam.gserviceaccount.com", "--jwks-max-age", "60",
            ])
            defer { child.kill() }
            let line = try #require(await child.nextLine())
            let base = String(line.dropFirst("listening=".count))
            let status = try await TestHTTP.post(
                base + "/sim/test-notification", json: #"{"package_name": "com.example.app"}"#)
            #expect(status == 200)
            var arrivals = receiver.arrivals.makeAsyncIterator()
            let push = try #require(await arrivals.next())
            #expect(push.notification["packageName"] as? String == "com.example.app")
            #expect(push.notification["testNotification"] != nil)
            let claims = try #require(
                (push.bearer?.split(separator: ".").dropFirst().first).flatMap { Base64URL.decode($0) }.flatMap {
                    (try? JSONSerialization.jsonObject(with: $0)) as? [String: Any]
                })
            #expect(claims["aud"] as? String == "https://verifier.example.com")
            #expect(claims["email"] as? String == "pusher@example.iam.gserviceaccount.com")
            let certs = try #require(await TestHTTP.get(base + "/oauth2/v3/certs"))
            #expect(certs.status == 200 && certs.body.contains("\"RS256\""))
            #expect(await child.terminate() == .exited(0))
        }
    }

    @Test("a time scale that is not positive is refused")
    func badTimeScale() async throws {
        let refused = try await TestChild.runVerifyWorker(["play-sim", "--port", "0", "--time-scale", "0"])
        #expect(!refused.succeeded)
    }
}
