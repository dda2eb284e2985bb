import AppleClients
import Foundation
import Kafka
import Messages
import Observability
import StoreHTTP
import Testing
import Traffic

/// A child `verify-worker` whose output lines arrive as they are written.
enum RunningCommandProcess {
    /// Starts `verify-worker arguments`; its lines are stdout's, or with `readsStderr` stdout's and stderr's together
    /// (the services log on stderr).
    static func start(_ arguments: [String], readsStderr: Bool = false) throws -> TestChild {
        try TestChild.verifyWorker(arguments, mergesStderr: readsStderr)
    }
}

@Suite("Gateway commands: signals", .timeLimit(.minutes(2)))
struct GatewaySignalTests {
    @Test("verify-worker gateway serves, then exits 0 on SIGTERM after flushing")
    func gatewayGracefulShutdown() async throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        try cluster.createTopic("receipt-jobs", partitions: 2)
        let files = try GatewayTestFiles.shared.get()
        let child = try RunningCommandProcess.start(
            [
                "gateway", "--host", "127.0.0.1", "--port", "0", "--metrics-host", "127.0.0.1", "--metrics-port", "0",
                "--brokers", cluster.bootstrapServers, "--log-format", "json", "--tokens-file", files.tokens.path,
                "--trust-anchors", files.simulatorRoot.path,
            ], readsStderr: true)
        defer { child.kill() }
        let listening = await child.firstLine { $0.contains("gateway listening") }
        let line = try #require(listening, "the gateway never logged that it listens")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        let port = try #require(Int("\(object[LogKeys.httpPort] ?? "")"))
        let metricsPort = try #require(Int("\(object[LogKeys.metricsPort] ?? "")"))

        let http = try CurlHTTPEngine()
        defer { http.shutdown() }
        let accepted = try await http.execute(
            TransportRequest(
                method: .post, url: "http://127.0.0.1:\(port)/v1/receipts",
                headers: [
                    ("Content-Type", "application/json"), ("Authorization", "Bearer \(GatewayTestHarness.token)"),
                ],
                body: Array(#"{"job_id":"sigterm-1","account_id":"a","receipt":"AAAA"}"#.utf8), timeout: .seconds(20)))
        #expect(accepted.status == 202)
        let ready = try await http.execute(
            TransportRequest(url: "http://127.0.0.1:\(metricsPort)/readyz", timeout: .seconds(10)))
        #expect(ready.status == 200)

        #expect(await child.terminate() == .exited(0))
    }

    @Test("verify-worker tail prints each message as one line and exits 0 on SIGTERM")
    func tailUntilSignalled() async throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        try cluster.createTopic("receipt-verdicts", partitions: 1)
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers, lingerMilliseconds: 1)
        )
        _ = try await producer.send(
            KafkaProducerRecord(topic: "receipt-verdicts", key: Array("a".utf8), value: Array(#"{"n":1}"#.utf8)))
        _ = try await producer.send(
            KafkaProducerRecord(topic: "receipt-verdicts", key: Array("a".utf8), value: Array("not json\nat all".utf8)))
        await producer.shutdown()

        let child = try RunningCommandProcess.start(["tail", "--brokers", cluster.bootstrapServers, "--from-beginning"])
        defer { child.kill() }
        var lines: [String] = []
        while lines.count < 2, let line = await child.nextLine() { lines.append(line) }
        #expect(lines.first == #"{"n":1}"#)
        let wrapped = try #require(
            try JSONSerialization.jsonObject(with: Data((lines.last ?? "").utf8)) as? [String: Any])
        #expect(wrapped["offset"] as? Int == 1)
        #expect(wrapped["value_base64"] as? String == Data("not json\nat all".utf8).base64EncodedString())

        #expect(await child.terminate() == .exited(0))
    }
}
