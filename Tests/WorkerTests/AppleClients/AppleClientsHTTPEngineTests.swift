import Foundation
import Testing

@testable import AppleClients
@testable import StoreHTTP

@Suite("Apple clients: curl HTTP engine", .serialized, .timeLimit(.minutes(2)))
struct AppleClientsHTTPEngineTests {
    private func transportError(_ body: () async throws -> Void) async -> HTTPTransportError? {
        do {
            try await body()
            return nil
        } catch {
            return error as? HTTPTransportError
        }
    }

    @Test("GET and POST round trip with headers and body")
    func roundTrip() async throws {
        let engine = try CurlHTTPEngine()
        try await AppleClientsFakeServer.withRunning { server, base in
            server.enqueue("/echo", .json(#"{"ok":true}"#, headers: ["X-Answer": "42"]))
            let response = try await engine.execute(
                TransportRequest(
                    method: .post, url: base + "/echo", headers: [("X-Test", "yes")], body: Array("hi".utf8)))
            #expect(response.status == 200)
            #expect(response.header("x-answer") == "42")
            #expect(String(decoding: response.body, as: UTF8.self) == #"{"ok":true}"#)
            let seen = try #require(server.received(path: "/echo").first)
            #expect(seen.method == "POST")
            #expect(seen.body == Array("hi".utf8))
            #expect(seen.headers["x-test"] == "yes")
            #expect(seen.headers["expect"] == nil)
        }
    }

    @Test("Sequential requests reuse one connection")
    func connectionReuse() async throws {
        let engine = try CurlHTTPEngine()
        try await AppleClientsFakeServer.withRunning { server, base in
            server.setFallback("/ping", .json("{}"))
            for _ in 0..<20 {
                _ = try await engine.execute(TransportRequest(url: base + "/ping"))
            }
            #expect(engine.statistics.connectionsOpened == 1)
            #expect(engine.statistics.completed == 20)
        }
    }

    @Test("A reused easy handle carries nothing of the previous request (method, body, headers)")
    func reusedHandleStartsClean() async throws {
        // A pool of one handle: every request below runs on the same easy handle, one after the other.
        let engine = try CurlHTTPEngine(configuration: HTTPEngineConfiguration(easyHandlePoolSize: 1))
        try await AppleClientsFakeServer.withRunning { server, base in
            server.setFallback("/post", .json("{}"))
            server.setFallback("/get", .json("{}"))
            _ = try await engine.execute(
                TransportRequest(
                    method: .post, url: base + "/post", headers: [("X-Only-Once", "1")], body: Array("first".utf8)))
            _ = try await engine.execute(TransportRequest(url: base + "/get"))
            _ = try await engine.execute(
                TransportRequest(method: .post, url: base + "/post", body: Array("second, longer".utf8)))
            _ = try await engine.execute(TransportRequest(method: .post, url: base + "/post", body: []))

            let get = try #require(server.received(path: "/get").first)
            #expect(get.method == "GET")
            #expect(get.body.isEmpty)
            #expect(get.headers["x-only-once"] == nil)
            let posts = server.received(path: "/post")
            #expect(posts.map(\.body) == [Array("first".utf8), Array("second, longer".utf8), []])
            #expect(posts.map { $0.headers["x-only-once"] } == ["1", nil, nil])
            #expect(engine.statistics.connectionsOpened == 1)
        }
    }

    @Test("Requests submitted while the loop waits are started at once, not at the next timer")
    func wakeUpStartsWorkPromptly() async throws {
        // The idle wait is a minute here, so a request that did not wake the loop would wait for most of one: ten
        // of them would take minutes, not the fraction of a second they take even on a loaded machine.
        var configuration = HTTPEngineConfiguration()
        configuration.idleWaitLimit = .seconds(60)
        let engine = try CurlHTTPEngine(configuration: configuration)
        try await AppleClientsFakeServer.withRunning { server, base in
            server.setFallback("/ping", .json("{}"))
            _ = try await engine.execute(TransportRequest(url: base + "/ping"))
            // The loop is now idle in epoll_wait; each request must wake it.
            let clock = ContinuousClock()
            let started = clock.now
            for _ in 0..<10 {
                _ = try await engine.execute(TransportRequest(url: base + "/ping"))
            }
            #expect(started.duration(to: clock.now) < .seconds(30))
            #expect(engine.statistics.completed == 11)
        }
    }

    @Test("Hundreds of concurrent requests all complete")
    func manyConcurrentRequests() async throws {
        let engine = try CurlHTTPEngine()
        try await AppleClientsFakeServer.withRunning { server, base in
            server.setFallback("/slow", AppleClientsFakeServer.Reply(body: Array("x".utf8), delay: .milliseconds(50)))
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<300 {
                    group.addTask { try await engine.execute(TransportRequest(url: base + "/slow")).status }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.count == 300)
            #expect(statuses.allSatisfy { $0 == 200 })
            #expect(engine.statistics.inFlight == 0)
        }
    }

    @Test("Cancelling the task removes the transfer at once")
    func cancellation() async throws {
        let engine = try CurlHTTPEngine()
        try await AppleClientsFakeServer.withRunning { server, base in
            server.setFallback("/hang", AppleClientsFakeServer.Reply(delay: .seconds(30)))
            let task = Task { try await engine.execute(TransportRequest(url: base + "/hang")) }
            _ = await server.nextArrival()
            task.cancel()
            let result = await task.result
            #expect(throws: CancellationError.self) { try result.get() }
            #expect(engine.statistics.inFlight == 0)
        }
    }

    @Test("A task cancelled before it starts never reaches the server")
    func cancelledBeforeStart() async throws {
        let engine = try CurlHTTPEngine()
        try await AppleClientsFakeServer.withRunning { server, base in
            let task = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return try await engine.execute(TransportRequest(url: base + "/never"))
            }
            await #expect(throws: CancellationError.self) { try await task.value }
            #expect(server.received(path: "/never").isEmpty)
        }
    }

    @Test("The total time limit turns into a retryable timeout")
    func timeout() async throws {
        let engine = try CurlHTTPEngine()
        try await AppleClientsFakeServer.withRunning { server, base in
            server.setFallback("/slow", AppleClientsFakeServer.Reply(delay: .seconds(10)))
            let error = await transportError {
                _ = try await engine.execute(TransportRequest(url: base + "/slow", timeout: .milliseconds(200)))
            }
            #expect(error?.code == .timeout)
            #expect(error?.isRetryable == true)
        }
    }

    @Test("Bodies above the limit are aborted")
    func responseSizeLimit() async throws {
        let engine = try CurlHTTPEngine(configuration: HTTPEngineConfiguration(maximumResponseBytes: 1024))
        try await AppleClientsFakeServer.withRunning { server, base in
            server.enqueue("/big", AppleClientsFakeServer.Reply(body: Array(repeating: 65, count: 64 * 1024)))
            server.enqueue("/small", AppleClientsFakeServer.Reply(body: Array(repeating: 65, count: 1024)))
            let error = await transportError { _ = try await engine.execute(TransportRequest(url: base + "/big")) }
            #expect(error?.code == .responseTooLarge)
            #expect(error?.isRetryable == false)
            let result1 = try await engine.execute(TransportRequest(url: base + "/small"))
            #expect(result1.body.count == 1024)
        }
    }

    @Test("A dropped connection is a retryable transport error")
    func droppedConnection() async throws {
        let engine = try CurlHTTPEngine()
        try await AppleClientsFakeServer.withRunning { server, base in
            server.enqueue("/drop", AppleClientsFakeServer.Reply(body: Array("partial".utf8), dropConnection: true))
            let error = await transportError { _ = try await engine.execute(TransportRequest(url: base + "/drop")) }
            #expect(error?.code == .connectionLost)
            #expect(error?.isRetryable == true)
        }
    }

    @Test("Redirects are returned, never followed")
    func redirectsNotFollowed() async throws {
        let engine = try CurlHTTPEngine()
        try await AppleClientsFakeServer.withRunning { server, base in
            server.enqueue("/moved", AppleClientsFakeServer.Reply(status: 302, headers: ["Location": base + "/target"]))
            server.setFallback("/target", .json("{}"))
            let response = try await engine.execute(TransportRequest(url: base + "/moved"))
            #expect(response.status == 302)
            #expect(server.received(path: "/target").isEmpty)
        }
    }

    @Test("Schemes other than http and https are refused")
    func otherSchemesRefused() async throws {
        let engine = try CurlHTTPEngine()
        let error = await transportError {
            _ = try await engine.execute(TransportRequest(url: "file:///etc/passwd"))
        }
        #expect(error?.code == .invalidRequest)
    }

    @Test("The engine survives the server being killed and restarted")
    func serverRestart() async throws {
        let engine = try CurlHTTPEngine(configuration: HTTPEngineConfiguration(connectTimeout: .seconds(2)))
        let first = try await AppleClientsTLSServer.start(plain: true)
        let url = "http://127.0.0.1:\(first.port)/ping"
        for _ in 0..<3 {
            #expect(try await engine.execute(TransportRequest(url: url)).status == 200)
        }

        await first.kill()
        for _ in 0..<3 {
            let error = await transportError { _ = try await engine.execute(TransportRequest(url: url)) }
            #expect(error?.isRetryable == true, "\(String(describing: error))")
        }

        let second = try await AppleClientsTLSServer.start(plain: true, port: first.port)
        defer { second.stop() }
        first.stop()
        for _ in 0..<3 {
            #expect(try await engine.execute(TransportRequest(url: url)).status == 200)
        }
    }

    @Test("After shutdown, requests are refused")
    func shutdown() async throws {
        let engine = try CurlHTTPEngine()
        engine.shutdown()
        let error = await transportError { _ = try await engine.execute(TransportRequest(url: "http://127.0.0.1:9/")) }
        #expect(error?.code == .engineShutDown)
    }

    @Test("TLS: a server with an unknown CA is rejected; with its CA configured it is accepted")
    func tlsVerification() async throws {
        let server = try await AppleClientsTLSServer.start()
        defer { server.stop() }
        let url = "https://127.0.0.1:\(server.port)/"

        let systemTrust = try CurlHTTPEngine()
        let rejected = await transportError { _ = try await systemTrust.execute(TransportRequest(url: url)) }
        #expect(rejected?.code == .tlsVerificationFailed)
        #expect(rejected?.isRetryable == false)

        let trusting = try CurlHTTPEngine(configuration: HTTPEngineConfiguration(caBundlePath: server.caBundlePath))
        let response = try await trusting.execute(TransportRequest(url: url))
        #expect(response.status == 200)
        #expect(String(decoding: response.body, as: UTF8.self) == "tls ok")

        // The certificate names 127.0.0.1 only: the same server under another name fails host verification.
        let wrongName = await transportError {
            _ = try await trusting.execute(TransportRequest(url: "https://localhost:\(server.port)/"))
        }
        #expect(wrongName?.code == .tlsVerificationFailed)
    }
}

@Suite("Apple clients: Content-Length header lines")
struct AppleClientsContentLengthTests {
    private func length(_ line: String) -> Int? {
        Array(line.utf8).withUnsafeBytes { curlContentLength($0) }
    }

    @Test("Plain values in any letter case are read; anything else is ignored")
    func values() {
        #expect(length("Content-Length: 6617\r\n") == 6617)
        #expect(length("content-length:0\r\n") == 0)
        #expect(length("CONTENT-LENGTH: \t42 \r\n") == 42)
        #expect(length("Content-Type: application/json\r\n") == nil)
        #expect(length("Content-Length: 12a\r\n") == nil)
        #expect(length("Content-Length: -1\r\n") == nil)
        #expect(length("Content-Length: \r\n") == nil)
    }

    @Test("Hostile lengths do not overflow")
    func overflow() {
        #expect(length("Content-Length: 99999999999999999999\r\n") == nil)
        #expect(length("Content-Length: 999999999999999999\r\n") == 999_999_999_999_999_999)
    }
}
