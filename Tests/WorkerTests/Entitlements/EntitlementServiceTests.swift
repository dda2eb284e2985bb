import AppleClients
import Crypto
import Entitlements
import Foundation
import Kafka
import Logging
import Messages
import Operations
import StoreHTTP
import Synchronization
import Testing

/// The whole service in-process over librdkafka's mock cluster: verdicts in, entitlements visible in the API,
/// events out, webhooks signed; a restart re-reads nothing twice.
@Suite("Entitlement service", .timeLimit(.minutes(3)))
struct EntitlementServiceTests {
    typealias F = EntitlementFixtures
    static let day = EntitlementFixtures.day

    /// A running service over a mock cluster, with a client for its API.
    struct Running {
        let service: EntitlementsService
        let task: Task<Void, any Error>
        let port: Int
        let http: CurlHTTPEngine

        func get(_ path: String) async throws -> (status: Int, json: [String: Any]) {
            let response = try await http.execute(
                TransportRequest(
                    url: "http://127.0.0.1:\(port)\(path)",
                    headers: [("Authorization", "Bearer \(EntitlementAPIHarness.token)")], timeout: .seconds(30)))
            let json = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any] ?? [:]
            return (response.status, json)
        }

        /// Polls the API until `condition` holds on the account's entitlements, within `limit`.
        func waitFor(
            _ account: String, limit: Duration = .seconds(60), _ condition: ([String: Any]) -> Bool
        ) async throws -> [String: Any] {
            let clock = ContinuousClock()
            let deadline = clock.now + limit
            var last: [String: Any] = [:]
            while clock.now < deadline {
                let reply = try await get("/v1/accounts/\(account)/entitlements")
                last = reply.json
                if reply.status == 200, condition(reply.json) { return reply.json }
                try await Task.sleep(for: .milliseconds(50))
            }
            throw EntitlementTestFailure("account \(account) never reached the expected state; last: \(last)")
        }

        /// Stops as on SIGTERM (graceful), or by cancellation (`graceful: false`).
        func stop(graceful: Bool = true) async {
            if graceful { await service.shutdown() } else { task.cancel() }
            _ = await task.result
            http.shutdown()
        }
    }

    static func start(
        cluster: MockKafkaCluster, storePath: String, directory: URL, group: String,
        webhooks: (any WebhookTransport)? = nil, webhookURLs: String = "", storeURL: String? = nil,
        logger: Logger? = nil
    ) async throws -> Running {
        let tokens = directory.appendingPathComponent("tokens")
        try EntitlementAPIHarness.tokensFile.write(to: tokens, atomically: true, encoding: .utf8)
        var sources = ConfigurationSources(table: EntitlementsConfiguration.table)
        try sources.addFlags([
            "brokers": cluster.bootstrapServers, "entitlements_group_id": group,
            "entitlements_store_url": storeURL ?? "sqlite:" + storePath, "catalog_file": "/unused",
            "entitlements_tokens_file": tokens.path, "entitlements_port": "0", "entitlements_host": "127.0.0.1",
            "kafka_properties": "fetch.wait.max.ms=10;fetch.error.backoff.ms=10",
            "entitlements_webhook_urls": webhookURLs,
        ])
        if !webhookURLs.isEmpty { sources.addEnvironment(["VERIFY_ENTITLEMENTS_WEBHOOK_SECRET": "hook-secret"]) }
        let configuration = try EntitlementsConfiguration(sources)
        let logger =
            logger
            ?? {
                var logger = Logger(label: "entitlements-service-test")
                logger.logLevel = .critical
                return logger
            }()
        let service = try EntitlementsService(
            configuration: configuration, catalog: F.catalog,
            tokens: try AccessTokens(contents: EntitlementAPIHarness.tokensFile), logger: logger,
            consumerProperties: ["session.timeout.ms": "6000", "topic.metadata.refresh.interval.ms": "1000"],
            webhookTransport: webhooks)
        let task = Task { try await service.run(handlingSignals: false) }
        guard let port = await service.waitUntilListening() else {
            task.cancel()
            throw EntitlementTestFailure("the service did not listen")
        }
        return Running(service: service, task: task, port: port, http: try CurlHTTPEngine())
    }

    static func publish(_ verdicts: [Verdict], to cluster: MockKafkaCluster) async throws {
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers, lingerMilliseconds: 1)
        )
        for verdict in verdicts {
            _ = try await producer.sendConfirmed(
                KafkaProducerRecord(
                    topic: Topics.verdicts, key: Array(verdict.accountID.utf8), value: MessageCodec().encode(verdict)))
        }
        await producer.shutdown(timeout: .seconds(5))
    }

    static func directory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "entitlements-service-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    static func entitlement(_ json: [String: Any], _ id: String) -> [String: Any]? {
        (json["entitlements"] as? [[String: Any]])?.first { $0["id"] as? String == id }
    }

    @Test(
        "verdicts on the topic become entitlements in the API; events reach entitlement-events; restart re-applies nothing"
    )
    func endToEnd() async throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        try cluster.createTopic(Topics.verdicts, partitions: 4)
        try cluster.createTopic("entitlement-events", partitions: 4)
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = directory.appendingPathComponent("e.sqlite").path
        let group = KafkaTest.uniqueGroup("entitlements")
        let now = Date()
        let grant = Verdict(
            verdictID: Verdict.legacyVerdictID(jobID: "j1"), jobID: "j1", accountID: "acct-e2e", outcome: .granted,
            decidedBy: .apple, environment: "Production",
            transactions: [
                .init(
                    transactionID: "t1", originalTransactionID: "t1", productID: "pro.monthly",
                    purchaseDate: now.addingTimeInterval(-60), expiresDate: now.addingTimeInterval(30 * Self.day))
            ], decidedAt: now)
        let coins = Verdict(
            verdictID: Verdict.legacyVerdictID(jobID: "j2"), jobID: "j2", accountID: "acct-e2e", outcome: .granted,
            decidedBy: .signature,
            transactions: [.init(transactionID: "c1", productID: "coins.100", purchaseDate: now)], decidedAt: now)
        try await Self.publish([grant, coins, grant], to: cluster)

        let first = try await Self.start(cluster: cluster, storePath: store, directory: directory, group: group)
        let json = try await first.waitFor("acct-e2e") { json in
            Self.entitlement(json, "premium")?["active"] as? Bool == true
                && (json["consumables"] as? [[String: Any]])?.first?["count"] as? Int == 1
        }
        #expect(json["as_of"] is String)
        #expect(try await first.get("/readyz").status == 200)
        await first.stop()

        // A refund published while the service is down is applied after the restart; nothing is applied twice.
        let refund = Verdict(
            verdictID: Verdict.legacyVerdictID(jobID: "n1"), jobID: "n1", accountID: "acct-e2e", outcome: .rejected,
            reason: .revoked, decidedBy: .apple,
            transactions: [
                .init(
                    transactionID: "t1", originalTransactionID: "t1", productID: "pro.monthly",
                    purchaseDate: now.addingTimeInterval(-60), expiresDate: now.addingTimeInterval(30 * Self.day),
                    revokedAt: now.addingTimeInterval(1))
            ], decidedAt: now.addingTimeInterval(2))
        try await Self.publish([refund, coins], to: cluster)
        let second = try await Self.start(cluster: cluster, storePath: store, directory: directory, group: group)
        let after = try await second.waitFor("acct-e2e") {
            Self.entitlement($0, "premium")?["active"] as? Bool == false
        }
        #expect((after["consumables"] as? [[String: Any]])?.first?["count"] as? Int == 1)
        let history =
            try await second.get("/v1/accounts/acct-e2e/history?limit=200").json["entries"] as? [[String: Any]]
        #expect(history?.filter { $0["kind"] as? String == "verdict" }.count == 3)
        await second.stop()

        // The lifecycle events went out once each, keyed by account, with their event ids.
        let consumer = try KafkaTest.consumer(cluster.bootstrapServers, group: KafkaTest.uniqueGroup("events"))
        try consumer.subscribe(topics: ["entitlement-events"])
        let messages = try await KafkaTest.collect(consumer.events, messages: 2)
        await consumer.close()
        let kinds = messages.compactMap { message -> String? in
            guard let value = message.value,
                let object = try? JSONSerialization.jsonObject(with: Data(value)) as? [String: Any]
            else { return nil }
            #expect(message.key == Array("acct-e2e".utf8))
            #expect(object["schema"] as? String == "entitlement-event/v1")
            return object["type"] as? String
        }
        #expect(kinds == ["initial_purchase", "refund"])
    }

    /// Records the webhook calls, failing the first `failures` of them.
    final class RecordingTransport: WebhookTransport, Sendable {
        struct Call: Sendable {
            var url: String
            var body: [UInt8]
            var headers: [String: String]
        }
        let calls = Mutex<[Call]>([])
        let failures: Int
        init(failures: Int) { self.failures = failures }

        func post(
            url: String, body: [UInt8], headers: [(name: String, value: String)], timeout: Duration
        ) async throws -> Int {
            let count = calls.withLock { calls in
                calls.append(
                    Call(url: url, body: body, headers: Dictionary(headers.map { ($0.name, $0.value) }) { a, _ in a }))
                return calls.count
            }
            return count <= failures ? 503 : 204
        }
    }

    @Test(
        "each event is POSTed to the webhook HMAC-signed, retried after a failure, and a dead webhook holds nothing up")
    func webhooks() async throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        try cluster.createTopic(Topics.verdicts, partitions: 2)
        try cluster.createTopic("entitlement-events", partitions: 2)
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let transport = RecordingTransport(failures: 1)
        let now = Date()
        let grant = Verdict(
            verdictID: Verdict.legacyVerdictID(jobID: "w1"), jobID: "w1", accountID: "acct-hook", outcome: .granted,
            decidedBy: .signature,
            transactions: [.init(transactionID: "w-t1", productID: "no.ads", purchaseDate: now)], decidedAt: now)
        try await Self.publish([grant], to: cluster)
        let running = try await Self.start(
            cluster: cluster, storePath: directory.appendingPathComponent("e.sqlite").path, directory: directory,
            group: KafkaTest.uniqueGroup("hooks"), webhooks: transport, webhookURLs: "https://hooks.example/h")
        _ = try await running.waitFor("acct-hook") { Self.entitlement($0, "no.ads")?["active"] as? Bool == true }
        // The first attempt fails (503); the retry comes after the first backoff (1 s).
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(30)
        while transport.calls.withLock({ $0.count }) < 2, clock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        await running.stop()
        let calls = transport.calls.withLock { $0 }
        #expect(calls.count == 2)
        guard let call = calls.last else { return }
        #expect(call.url == "https://hooks.example/h")
        let signature = try #require(call.headers["X-Verify-Signature"])
        let parts = Dictionary(
            uniqueKeysWithValues: signature.split(separator: ",").map { part -> (String, String) in
                let pieces = part.split(separator: "=", maxSplits: 1)
                return (String(pieces[0]), String(pieces[1]))
            })
        let expected = WebhookSender.signature(
            key: SymmetricKey(data: Array("hook-secret".utf8)), timestamp: parts["t"] ?? "", body: call.body)
        #expect(parts["v1"] == expected)
        let event = try JSONSerialization.jsonObject(with: Data(call.body)) as? [String: Any]
        #expect(event?["type"] as? String == "initial_purchase")
        #expect(call.headers["X-Verify-Event-Id"] == event?["event_id"] as? String)
    }
}
