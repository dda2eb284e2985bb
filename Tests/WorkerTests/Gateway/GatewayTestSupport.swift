import AppleClients
import Foundation
import Gateway
import Kafka
import Logging
import Messages
import Testing

/// A gateway on free ports over a mock Kafka cluster, and a small HTTP client for it.
struct GatewayTestHarness {
    let cluster: MockKafkaCluster
    let gateway: ReceiptGateway
    let task: Task<Void, any Error>
    let port: Int
    let metricsPort: Int
    let http: CurlHTTPEngine
    static let topic = "receipt-jobs"

    /// Starts a cluster and a gateway, runs `body`, and stops both whatever happens.
    static func with<T>(
        _ configure: (inout GatewayConfiguration) -> Void = { _ in },
        _ body: (GatewayTestHarness) async throws -> T
    ) async throws -> T {
        let cluster = try MockKafkaCluster(brokers: 1)
        try cluster.createTopic(topic, partitions: 4)
        var configuration = GatewayConfiguration(
            host: "127.0.0.1", port: 0, brokers: cluster.bootstrapServers, jobsTopic: topic,
            publishTimeoutMilliseconds: 5_000, drainTimeoutSeconds: 2,
            operations: .init(host: "127.0.0.1", port: 0))
        configure(&configuration)
        var logger = Logger(label: "gateway-test")
        logger.logLevel = .critical
        let gateway = try ReceiptGateway(configuration: configuration, logger: logger)
        let task = Task { try await gateway.run(handlingSignals: false) }
        let http = try CurlHTTPEngine()
        guard let port = await gateway.waitUntilListening(),
            let metricsPort = await gateway.waitUntilOperationsListening()
        else {
            task.cancel()
            throw GatewayTestFailure("the gateway did not start listening")
        }
        let harness = GatewayTestHarness(
            cluster: cluster, gateway: gateway, task: task, port: port, metricsPort: metricsPort, http: http)
        do {
            let result = try await body(harness)
            await harness.stop()
            return result
        } catch {
            await harness.stop()
            throw error
        }
    }

    func stop() async {
        task.cancel()
        _ = await task.result
        http.shutdown()
    }

    struct Reply {
        var status: Int
        var body: [UInt8]
        var json: [String: Any] { ((try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]) ?? [:] }
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    func post(_ path: String, _ body: [UInt8], contentType: String? = "application/json") async throws -> Reply {
        var headers: [(name: String, value: String)] = []
        if let contentType { headers.append(("Content-Type", contentType)) }
        let response = try await http.execute(
            TransportRequest(
                method: .post, url: "http://127.0.0.1:\(port)/\(path)", headers: headers, body: body,
                timeout: .seconds(60)))
        return Reply(status: response.status, body: response.body)
    }

    func post(_ path: String, json object: [String: Any]) async throws -> Reply {
        try await post(path, Array(try JSONSerialization.data(withJSONObject: object)))
    }

    func operations(_ path: String) async throws -> Reply {
        let response = try await http.execute(
            TransportRequest(url: "http://127.0.0.1:\(metricsPort)/\(path)", timeout: .seconds(30)))
        return Reply(status: response.status, body: response.body)
    }

    /// Reads `count` messages of the jobs topic from the beginning.
    func consume(_ count: Int) async throws -> [KafkaConsumerMessage] {
        let consumer = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(
                bootstrapServers: cluster.bootstrapServers, groupID: "gateway-test-\(UUID().uuidString.prefix(8))",
                sessionTimeoutMilliseconds: 6_000))
        try consumer.subscribe(topics: [Self.topic])
        var messages: [KafkaConsumerMessage] = []
        for try await event in consumer.events {
            guard case .message(let message) = event else { continue }
            messages.append(message)
            if messages.count == count { break }
        }
        await consumer.close()
        return messages.sorted { ($0.partition, $0.offset) < ($1.partition, $1.offset) }
    }
}

/// Test inputs for the gateway.
enum GatewayTestData {
    /// A compact JWS whose payload is `payload` (the signature is junk: the gateway does not verify, the worker does).
    static func jws(payload: [String: Any]) throws -> String {
        let header = base64URL(Array(#"{"alg":"ES256","x5c":["AAAA"]}"#.utf8))
        let body = base64URL(Array(try JSONSerialization.data(withJSONObject: payload)))
        return "\(header).\(body).\(base64URL([1, 2, 3, 4]))"
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    static func notification(uuid: String) throws -> [String: Any] {
        [
            "signedPayload": try jws(payload: [
                "notificationType": "DID_RENEW", "notificationUUID": uuid,
                "data": ["bundleId": "com.example.app", "environment": "Sandbox"],
            ])
        ]
    }
}

struct GatewayTestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
