import Foundation
import Kafka
import Logging
import Operations
import Testing
import Traffic

/// `verify-worker gateway` refuses to start without a way to authenticate frontends, and says why in one line.
@Suite("Gateway: configuration of the command", .timeLimit(.minutes(2)))
struct GatewayCommandConfigurationTests {
    /// The command line of a gateway on free loopback ports (nothing listens at the brokers: a gateway that
    /// starts by mistake is still found out by its exit status).
    static func arguments(_ more: [String]) -> [String] {
        [
            "gateway", "--host", "127.0.0.1", "--port", "0", "--metrics-host", "127.0.0.1", "--metrics-port", "0",
            "--brokers", "127.0.0.1:1",
        ] + more
    }

    static func expectOneLine(_ outcome: CommandProcess.Outcome, naming key: String) {
        #expect(outcome.status == 2, "exit \(outcome.status): \(outcome.stderr)")
        let lines = outcome.stderr.split(separator: "\n")
        #expect(lines.count == 1, "stderr:\n\(outcome.stderr)")
        #expect(lines.first?.contains(key) == true, "stderr:\n\(outcome.stderr)")
        #expect(lines.first?.hasPrefix("verify-worker gateway: ") == true, "stderr:\n\(outcome.stderr)")
    }

    @Test(
        "no tokens file, an unreadable, empty or weak one, or a bad switch: exit 2 with one line naming the key",
        arguments: [
            ([], "gateway_tokens_file"),
            (["--tokens-file", "/nonexistent/tokens"], "gateway_tokens_file"),
            (["--tokens-file", "EMPTY"], "gateway_tokens_file"),
            (["--tokens-file", "WEAK"], "gateway_tokens_file"),
            (["--auth", "maybe"], "gateway_auth"),
            (["--auth", "disabled", "--trust-anchors", "/nonexistent/root.pem"], "trust_anchors"),
            (["--auth", "disabled", "--publish-timeout-ms", "0"], "gateway_publish_timeout_ms"),
            (["--auth", "disabled", "--kafka-properties", "no.such.property=1"], "kafka_properties"),
            (["--auth", "disabled", "--kafka-properties", "socket.timeout.ms=x"], "kafka_properties"),
        ])
    func refusedAtStart(more: [String], key: String) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "gateway-gateway-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let empty = directory.appendingPathComponent("empty")
        try Data("# none yet\n".utf8).write(to: empty)
        let weak = directory.appendingPathComponent("weak")
        try Data("secret123\n".utf8).write(to: weak)
        let resolved = more.map { $0 == "EMPTY" ? empty.path : $0 == "WEAK" ? weak.path : $0 }
        let outcome = try await CommandProcess.run(Self.arguments(resolved))
        Self.expectOneLine(outcome, naming: key)
        #expect(!outcome.stderr.contains("secret123"), "a token reached the output")
        // The form of every command's configuration error (`verify-worker run: configuration: <key>: …`).
        #expect(outcome.stderr.hasPrefix("verify-worker gateway: configuration: \(key): "), "\(outcome.stderr)")
        #expect(!outcome.stderr.contains("KafkaError") && !outcome.stderr.contains(".swift:"), "\(outcome.stderr)")
    }

    @Test("an HTTP or metrics port already in use: exit 2 with one line naming it")
    func portInUse() async throws {
        var logger = Logger(label: "gateway-test")
        logger.logLevel = .critical
        let server = OperationsServer(
            configuration: .init(host: "127.0.0.1", port: 0), registry: MetricsBootstrap.registry(), logger: logger,
            readiness: { .ready })
        let task = Task { try await server.run() }
        defer { task.cancel() }
        let taken = try #require(await server.waitUntilListening())
        let files = try GatewayTestFiles.shared.get()
        // A reachable cluster, so that the only problem reported is the port.
        let cluster = try MockKafkaCluster(brokers: 1)
        let common = ["--tokens-file", files.tokens.path, "--log-format", "json"]
        func withPort(_ flag: String) -> [String] {
            var arguments = Self.arguments(common)
            arguments[arguments.firstIndex(of: flag)! + 1] = String(taken)
            arguments[arguments.firstIndex(of: "--brokers")! + 1] = cluster.bootstrapServers
            return arguments
        }
        Self.expectOneLine(try await CommandProcess.run(withPort("--port")), naming: "port")

        let metrics = withPort("--metrics-port")
        Self.expectOneLine(try await CommandProcess.run(metrics), naming: "metrics_port")
    }

    @Test("Kafka TLS verification switched off through kafka_properties: accepted, with one warning line naming it")
    func tlsVerificationOffWarnsOnce() async throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        try cluster.createTopic("receipt-jobs", partitions: 1)
        let files = try GatewayTestFiles.shared.get()
        let child = try RunningCommandProcess.start(
            Self.arguments([
                "--tokens-file", files.tokens.path, "--log-format", "json", "--kafka-properties",
                "enable.ssl.certificate.verification=false;ssl.endpoint.identification.algorithm=none",
            ]).map { $0 == "127.0.0.1:1" ? cluster.bootstrapServers : $0 }, readsStderr: true)
        defer { child.kill() }
        var warnings: [String] = []
        var listening = false
        while !listening, let line = await child.nextLine() {
            if line.contains("TLS verification") { warnings.append(line) }
            listening = line.contains("gateway listening")
        }
        #expect(listening)
        #expect(warnings.count == 1, "\(warnings)")
        #expect(warnings.first?.contains("enable.ssl.certificate.verification=false") == true)
        #expect(warnings.first?.contains("ssl.endpoint.identification.algorithm=none") == true)
        #expect(await child.terminate() == .exited(0))
    }

    @Test("--auth disabled starts without tokens and warns once")
    func disabledWarnsOnce() async throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        try cluster.createTopic("receipt-jobs", partitions: 1)
        let child = try RunningCommandProcess.start(
            Self.arguments(["--auth", "disabled", "--log-format", "json"]).map {
                $0 == "127.0.0.1:1" ? cluster.bootstrapServers : $0
            }, readsStderr: true)
        defer { child.kill() }
        var warnings = 0
        var listening = false
        while !listening, let line = await child.nextLine() {
            if line.contains("bearer tokens disabled") { warnings += 1 }
            listening = line.contains("gateway listening")
        }
        #expect(listening)
        #expect(warnings == 1)
        #expect(await child.terminate() == .exited(0))
    }
}
