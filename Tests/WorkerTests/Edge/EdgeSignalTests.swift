import AppleClients
import Foundation
import Kafka
import Messages
import Observability
import Testing

/// A child `verify-worker` whose output lines arrive as they are written.
final class EdgeRunningProcess: Sendable {
    let process: Process
    let stdout: AsyncStream<String>
    let stderr: AsyncStream<String>
    private let exited: @Sendable () async -> Void

    init(_ arguments: [String]) throws {
        let process = try TestEnvironment.verifyWorkerProcess(arguments)
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        self.exited = EdgeBlocking.exitSignal(of: process)
        self.stdout = TestLines.stream(of: output.fileHandleForReading)
        self.stderr = TestLines.stream(of: errors.fileHandleForReading)
        try process.run()
        self.process = process
    }

    /// The first line of `stream` that satisfies `predicate`, or nil if the stream ends first.
    static func first(_ stream: AsyncStream<String>, where predicate: (String) -> Bool) async -> String? {
        for await line in stream where predicate(line) { return line }
        return nil
    }

    /// Sends SIGTERM and returns the exit status (the process must exit by itself, not by the signal).
    func terminate() async -> (reason: Process.TerminationReason, status: Int32) {
        process.terminate()
        await exited()
        return (process.terminationReason, process.terminationStatus)
    }

    func kill() {
        if process.isRunning { process.terminate() }
    }
}

@Suite("Edge commands: signals", .timeLimit(.minutes(1)))
struct EdgeSignalTests {
    @Test("verify-worker gateway serves, then exits 0 on SIGTERM after flushing")
    func gatewayGracefulShutdown() async throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        try cluster.createTopic("receipt-jobs", partitions: 2)
        let files = try GatewayTestFiles.shared.get()
        let child = try EdgeRunningProcess([
            "gateway", "--host", "127.0.0.1", "--port", "0", "--metrics-host", "127.0.0.1", "--metrics-port", "0",
            "--brokers", cluster.bootstrapServers, "--log-format", "json", "--tokens-file", files.tokens.path,
            "--trust-anchors", files.simulatorRoot.path,
        ])
        defer { child.kill() }
        let listening = await EdgeRunningProcess.first(child.stderr) { $0.contains("gateway listening") }
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

        let exit = await child.terminate()
        #expect(exit.reason == .exit)
        #expect(exit.status == 0)
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

        let child = try EdgeRunningProcess(["tail", "--brokers", cluster.bootstrapServers, "--from-beginning"])
        defer { child.kill() }
        var lines: [String] = []
        for await line in child.stdout {
            lines.append(line)
            if lines.count == 2 { break }
        }
        #expect(lines.first == #"{"n":1}"#)
        let wrapped = try #require(
            try JSONSerialization.jsonObject(with: Data((lines.last ?? "").utf8)) as? [String: Any])
        #expect(wrapped["offset"] as? Int == 1)
        #expect(wrapped["value_base64"] as? String == Data("not json\nat all".utf8).base64EncodedString())

        let exit = await child.terminate()
        #expect(exit.reason == .exit)
        #expect(exit.status == 0)
    }
}
