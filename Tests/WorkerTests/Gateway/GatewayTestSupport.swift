import AppleClients
import Foundation
import Gateway
import Kafka
import Logging
import Messages
import Operations
import StoreHTTP
import SwiftASN1
import Testing

@testable import AppleSimulator

/// A gateway on free ports over a mock Kafka cluster, and a small HTTP client for it.
struct GatewayTestHarness {
    let cluster: MockKafkaCluster
    let gateway: ReceiptGateway
    let task: Task<Void, any Error>
    let port: Int
    let metricsPort: Int
    let http: CurlHTTPEngine
    static let topic = "receipt-jobs"
    /// The bearer token the harness's tokens file accepts; `post` sends it unless told otherwise.
    static let token = "gateway-test-token-0123456789"

    /// Starts a cluster and a gateway, runs `body`, and stops both whatever happens.
    static func with<T>(
        _ configure: (inout GatewayConfiguration) -> Void = { _ in },
        _ body: (GatewayTestHarness) async throws -> T
    ) async throws -> T {
        let cluster = try MockKafkaCluster(brokers: 1)
        try cluster.createTopic(topic, partitions: 4)
        let files = try GatewayTestFiles.shared.get()
        var configuration = GatewayConfiguration(
            host: "127.0.0.1", port: 0, brokers: cluster.bootstrapServers, jobsTopic: topic,
            publishTimeoutMilliseconds: 5_000, drainTimeoutSeconds: 2,
            operations: .init(host: "127.0.0.1", port: 0), tokensFile: files.tokens.path,
            trustAnchorFiles: [files.simulatorRoot.path])
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

    /// Polls `condition` until it holds; fails after `limit` naming `what` (the wait ends as soon as it holds).
    static func eventually(
        _ what: String, within limit: Duration, _ condition: () async throws -> Bool
    ) async throws {
        let deadline = ContinuousClock.now.advanced(by: limit)
        while true {
            if try await condition() { return }
            guard ContinuousClock.now < deadline else { throw GatewayTestFailure("timed out waiting for \(what)") }
            try await Task.sleep(for: .milliseconds(50))
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
        var headers: [(name: String, value: String)] = []
        func header(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name.lowercased() }?.value
        }
        var json: [String: Any] { ((try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]) ?? [:] }
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    func post(
        _ path: String, _ body: [UInt8], contentType: String? = "application/json",
        authorization: String? = "Bearer \(GatewayTestHarness.token)"
    ) async throws -> Reply {
        var headers: [(name: String, value: String)] = []
        if let contentType { headers.append(("Content-Type", contentType)) }
        if let authorization { headers.append(("Authorization", authorization)) }
        let response = try await http.execute(
            TransportRequest(
                method: .post, url: "http://127.0.0.1:\(port)/\(path)", headers: headers, body: body,
                timeout: .seconds(60)))
        return Reply(status: response.status, body: response.body, headers: response.headers)
    }

    func post(
        _ path: String, json object: [String: Any], authorization: String? = "Bearer \(GatewayTestHarness.token)"
    ) async throws -> Reply {
        try await post(path, Array(try JSONSerialization.data(withJSONObject: object)), authorization: authorization)
    }

    /// Messages on the jobs topic now (the sum of every partition's high watermark: the topic starts empty).
    func messageCount() async throws -> Int64 {
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers))
        var total: Int64 = 0
        do {
            for partition in 0..<4 {
                total += try await producer.watermarks(topic: Self.topic, partition: Int32(partition)).high
            }
        } catch {
            await producer.shutdown(timeout: .seconds(1))
            throw error
        }
        await producer.shutdown(timeout: .seconds(1))
        return total
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

/// The files every harness gateway reads: a tokens file and the simulator's JWS root as a trust anchor.
enum GatewayTestFiles {
    static let shared = Result { () throws -> (tokens: URL, simulatorRoot: URL) in
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "gateway-test-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let tokens = directory.appendingPathComponent("tokens")
        try Data("# gateway tests\n\n\(GatewayTestHarness.token)\n".utf8).write(to: tokens)
        let root = directory.appendingPathComponent("sim-ec-root.pem")
        let pki = try AppleSimHarness.sharedPKI.get()
        try Data(try pki.ecRoot.serializeAsPEM().pemString.utf8).write(to: root)
        return (tokens, root)
    }
}

/// Test inputs for the gateway.
enum GatewayTestData {
    /// A PKI the gateway does not trust (generated once: RSA keys are slow in debug builds).
    static let foreignPKI = Result { try SimulatorPKI.generate() }

    /// An App Store Server Notification V2 payload.
    struct NotificationPayload: Encodable {
        struct Data: Encodable {
            var bundleId = "com.example.app"
            var environment = "Sandbox"
        }
        var notificationType = "DID_RENEW"
        var notificationUUID: String
        var signedDate = Int64(Date().timeIntervalSince1970 * 1000)
        var data = Data()
    }

    /// A notification body signed by `pki` (by default the simulator's, which the harness trusts).
    static func signedNotification(uuid: String, pki: SimulatorPKI? = nil) throws -> [String: Any] {
        let signer = try pki ?? AppleSimHarness.sharedPKI.get()
        return ["signedPayload": try SimulatedJWS.sign(NotificationPayload(notificationUUID: uuid), pki: signer)]
    }

    /// A compact JWS whose payload is `payload` and whose signature and `x5c` are junk.
    static func jws(payload: [String: Any]) throws -> String {
        let header = base64URL(Array(#"{"alg":"ES256","x5c":["AAAA"]}"#.utf8))
        let body = base64URL(Array(try JSONSerialization.data(withJSONObject: payload)))
        return "\(header).\(body).\(base64URL([1, 2, 3, 4]))"
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    /// An unsigned notification: the shape is right, the signature junk.
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
