import AppleClients
import Foundation
import Logging
import Messages
import StoreHTTP
import Synchronization
import Testing

@Suite("Apple clients: verifyReceipt client", .serialized, .timeLimit(.minutes(2)))
struct AppleClientsVerifyReceiptTests {
    static let secret = "s3cr3t-shared-0123456789abcdef"

    /// One fake Apple, one engine and one client with a shared secret, for one test.
    struct Harness {
        let server: AppleClientsFakeServer
        let client: VerifyReceiptClient
        let logs: AppleClientsLogCapture

        var production: [AppleClientsFakeServer.Received] { server.received(path: "/verifyReceipt") }
        var sandbox: [AppleClientsFakeServer.Received] { server.received(path: "/sandbox/verifyReceipt") }
    }

    private func withHarness(
        requestTimeout: Duration = .seconds(10), _ body: (Harness) async throws -> Void
    ) async throws {
        let server = AppleClientsFakeServer()
        let port = try await server.start()
        let logs = AppleClientsLogCapture()
        var configuration = VerifyReceiptConfiguration.endpoints(
            base: "http://127.0.0.1:\(port)", sharedSecret: AppleSharedSecret(Self.secret), excludeOldTransactions: true
        )
        configuration.requestTimeout = requestTimeout
        let client = VerifyReceiptClient(
            transport: try CurlHTTPEngine(), configuration: configuration, logger: logs.logger)
        do {
            try await body(Harness(server: server, client: client, logs: logs))
        } catch {
            server.retire()
            throw error
        }
        server.retire()
    }

    @Test("The request carries receipt-data, password and exclude-old-transactions")
    func requestBody() async throws {
        try await withHarness { harness in
            harness.server.enqueue("/verifyReceipt", .receiptStatus(0))
            _ = try await harness.client.verify(receiptData: "TUlJ+/base64==")
            let body = try #require(harness.production.first?.jsonBody)
            #expect(body["receipt-data"] as? String == "TUlJ+/base64==")
            #expect(body["password"] as? String == Self.secret)
            #expect(body["exclude-old-transactions"] as? Bool == true)
            #expect(harness.production.first?.method == "POST")
        }
    }

    /// What one status must lead to, when production answers it alone.
    enum Expected: Sendable {
        case answered
        case retryable
    }

    @Test(
        "Every status is classified",
        arguments: [
            (0, "", Expected.answered), (21000, "", .answered), (21003, "", .answered), (21004, "", .answered),
            (21005, "", .retryable), (21006, "", .answered), (21009, "", .retryable), (21010, "", .answered),
            (21100, #","is-retryable":true"#, .retryable), (21150, #","is-retryable":false"#, .answered),
            (21199, "", .retryable), (21101, #","is_retryable":"1""#, .retryable), (12345, "", .answered),
        ])
    func statusTable(status: Int, extra: String, expected: Expected) async throws {
        try await withHarness { harness in
            harness.server.enqueue("/verifyReceipt", .receiptStatus(status, extra: extra))
            let outcome = try await harness.client.verify(receiptData: "cmVjZWlwdA==")
            switch (outcome, expected) {
            case (.answered(let response), .answered):
                #expect(response.status.code == status)
                #expect(response.answeredBy == .production)
            case (.retryable(let advice), .retryable):
                #expect(advice.reason == .receiptStatus(status))
            default:
                Issue.record("status \(status): unexpected outcome \(outcome)")
            }
            #expect(harness.production.count == 1)
            #expect(harness.sandbox.isEmpty)
        }
    }

    @Test("21007: a sandbox receipt sent to production ends verified by sandbox in one call")
    func sandboxReceiptHop() async throws {
        try await withHarness { harness in
            harness.server.enqueue("/verifyReceipt", .receiptStatus(21007))
            harness.server.enqueue(
                "/sandbox/verifyReceipt",
                .json(
                    String(decoding: try TestEnvironment.fixture("mbaasy/validator_remote_unified.json"), as: UTF8.self)
                ))
            let outcome = try await harness.client.verify(receiptData: "cmVjZWlwdA==")
            let response = try #require(outcome.answer)
            #expect(response.status == .valid)
            #expect(response.answeredBy == .sandbox)
            #expect(response.environment == .sandbox)
            #expect(response.receipt?.bundleID == "com.mbaasy.ios.demo")
            #expect(harness.production.count == 1)
            #expect(harness.sandbox.count == 1)
            #expect(harness.sandbox.first?.jsonBody?["password"] as? String == Self.secret)
        }
    }

    @Test("21008: a production receipt sent to sandbox is repeated at production")
    func productionReceiptHop() async throws {
        try await withHarness { harness in
            harness.server.enqueue("/sandbox/verifyReceipt", .receiptStatus(21008))
            harness.server.enqueue("/verifyReceipt", .receiptStatus(0))
            let response = try #require(
                try await harness.client.verify(receiptData: "cmVjZWlwdA==", startingAt: .sandbox).answer)
            #expect(response.status == .valid)
            #expect(response.answeredBy == .production)
            #expect(harness.sandbox.count == 1)
            #expect(harness.production.count == 1)
        }
    }

    @Test("Environments are hopped once at most")
    func noPingPong() async throws {
        try await withHarness { harness in
            harness.server.enqueue("/verifyReceipt", .receiptStatus(21007))
            harness.server.enqueue("/sandbox/verifyReceipt", .receiptStatus(21008))
            let response = try #require(try await harness.client.verify(receiptData: "cmVjZWlwdA==").answer)
            #expect(response.status == .productionReceiptSentToSandbox)
            #expect(harness.production.count == 1)
            #expect(harness.sandbox.count == 1)
        }
    }

    @Test("21002 is repeated once, then final")
    func malformedRetriedOnce() async throws {
        try await withHarness { harness in
            harness.server.enqueue("/verifyReceipt", .receiptStatus(21002), .receiptStatus(0))
            let result1 = try await harness.client.verify(receiptData: "eA==")
            #expect(result1.answer?.status == .valid)
            #expect(harness.production.count == 2)

            harness.server.enqueue("/verifyReceipt", .receiptStatus(21002), .receiptStatus(21002))
            let result2 = try await harness.client.verify(receiptData: "eA==")
            #expect(result2.answer?.status == .malformedReceiptData)
            #expect(harness.production.count == 4)
        }
    }

    @Test("HTTP 503 and 429 are retryable and carry Retry-After; 500 too")
    func httpErrors() async throws {
        try await withHarness { harness in
            harness.server.enqueue(
                "/verifyReceipt", .init(status: 503, headers: ["Retry-After": "7"]),
                .init(status: 429, headers: ["Retry-After": "Wed, 21 Oct 2099 07:28:00 GMT"]), .init(status: 500))
            guard case .retryable(let first) = try await harness.client.verify(receiptData: "eA==") else {
                Issue.record("503 not retryable")
                return
            }
            #expect(first.reason == .httpStatus(503))
            #expect(first.retryAfter == .seconds(7))
            guard case .retryable(let second) = try await harness.client.verify(receiptData: "eA==") else {
                Issue.record("429 not retryable")
                return
            }
            #expect(second.reason == .httpStatus(429))
            #expect((second.retryAfter ?? .zero) > .seconds(86_400))
            #expect(try await harness.client.verify(receiptData: "eA==").isRetryable)
        }
    }

    @Test("A timeout is retryable")
    func timeout() async throws {
        try await withHarness(requestTimeout: .milliseconds(300)) { harness in
            harness.server.enqueue("/verifyReceipt", .init(body: [], delay: .seconds(10)))
            guard case .retryable(let advice) = try await harness.client.verify(receiptData: "eA==") else {
                Issue.record("timeout not retryable")
                return
            }
            #expect(advice.reason == .transport(.timeout))
        }
    }

    @Test("A broken body is a failed outcome; a redirect is not followed")
    func brokenAndRedirect() async throws {
        try await withHarness { harness in
            harness.server.enqueue("/verifyReceipt", .json("<html>oops</html>"))
            guard case .failed(let error) = try await harness.client.verify(receiptData: "eA==") else {
                Issue.record("garbage accepted")
                return
            }
            #expect(error.code == .malformedResponse)

            harness.server.enqueue("/verifyReceipt", .init(status: 301, headers: ["Location": "http://127.0.0.1:9/x"]))
            guard case .failed(let redirect) = try await harness.client.verify(receiptData: "eA==") else {
                Issue.record("redirect accepted")
                return
            }
            #expect(redirect.httpStatus == 301)
        }
    }

    @Test("The shared secret never appears in a log line or an error text")
    func secretNeverLeaks() async throws {
        try await withHarness(requestTimeout: .milliseconds(300)) { harness in
            harness.server.enqueue(
                "/verifyReceipt", .receiptStatus(21004), .receiptStatus(21007), .json("garbage"), .init(status: 404),
                .init(body: [], delay: .seconds(5)))
            harness.server.enqueue("/sandbox/verifyReceipt", .receiptStatus(21002), .receiptStatus(21002))
            var texts: [String] = []
            for _ in 0..<5 {
                let outcome = try await harness.client.verify(receiptData: "eA==")
                texts.append("\(outcome)")
                texts.append(String(reflecting: outcome))
                if case .failed(let error) = outcome { texts.append(error.description) }
            }
            let configuration = VerifyReceiptConfiguration(sharedSecret: AppleSharedSecret(Self.secret))
            texts.append("\(configuration)")
            texts.append(String(reflecting: configuration))
            var dumped = ""
            dump(configuration, to: &dumped)
            texts.append(dumped)

            let lines = harness.logs.lines
            #expect(lines.count >= 5)
            for text in texts + lines {
                #expect(!text.contains(Self.secret), "secret leaked in: \(text)")
            }
            // The secret did go to Apple, where it belongs.
            #expect(harness.production.allSatisfy { $0.jsonBody?["password"] as? String == Self.secret })
        }
    }
}

/// A swift-log handler that keeps every line (message and metadata) in memory.
final class AppleClientsLogCapture: Sendable {
    private let stored = Mutex<[String]>([])

    var lines: [String] { stored.withLock { $0 } }

    var logger: Logger {
        var logger = Logger(label: "apple-clients-test") { _ in
            RecordingLogHandler { event, metadata in self.append("\(event.level) \(event.message) \(metadata)") }
        }
        logger.logLevel = .trace
        return logger
    }

    fileprivate func append(_ line: String) { stored.withLock { $0.append(line) } }
}
