import AppleSimulator
import Foundation
import Gateway
import Kafka
import Logging
import Messages
import Operations
import Testing
import Traffic

/// Runs the built `verify-worker` as a child process and collects its output.
enum CommandProcess {
    struct Outcome {
        var status: Int32
        var stdout: String
        var stderr: String
        var lines: [String] { stdout.split(separator: "\n").map(String.init) }
        var jsonLines: [[String: Any]] {
            lines.compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] }
        }
    }

    static func run(
        _ arguments: [String], stdin: String? = nil, environment extra: [String: String] = [:]
    ) async throws -> Outcome {
        var environment = ProcessInfo.processInfo.environment
        environment["VERIFY_BROKERS"] = nil
        environment["VERIFY_KAFKA_PROPERTIES"] = nil
        environment.merge(extra) { _, given in given }
        let done = try await TestChild.runVerifyWorker(
            arguments, environment: environment, input: Array((stdin ?? "").utf8))
        return Outcome(status: done.exit.status, stdout: done.output, stderr: done.errors)
    }
}

@Suite("Gateway commands: submit, tail, healthcheck", .timeLimit(.minutes(2)))
struct GatewayCommandTests {
    @Test("submit produces JSON lines keyed by account, reports a bad line by number, and tail reads them back")
    func submitAndTail() async throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        try cluster.createTopic("receipt-jobs", partitions: 3)
        let input = [
            #"{"schema":"receipt-job/v1","job_id":"j1","account_id":"acct-1","receipt":"AAAA"}"#,
            #"{"receipt":"AAAA"}"#,
            "",
            #"{"job_id":"j3","account_id":"acct-1","signed_transaction":"a.b.c"}"#,
        ].joined(separator: "\n")
        let submitted = try await CommandProcess.run(
            ["submit", "--brokers", cluster.bootstrapServers, "--topic", "receipt-jobs", "-"], stdin: input)
        #expect(submitted.status == 1, "one line failed: \(submitted.stderr)")
        let results = submitted.jsonLines
        #expect(results.count == 3, "\(submitted.stdout)")
        let bad = try #require(results.first { $0["error"] != nil })
        #expect(bad["line"] as? Int == 2)
        #expect(bad["error"] as? String == "missing_field")
        let good = results.filter { $0["offset"] != nil }
        #expect(Set(good.compactMap { $0["job_id"] as? String }) == ["j1", "j3"])
        #expect(Set(good.compactMap { $0["partition"] as? Int }).count == 1, "one account, one partition")
        #expect(submitted.stderr.contains(#""failed":1"#))

        let tailed = try await CommandProcess.run([
            "tail", "--brokers", cluster.bootstrapServers, "--topic", "receipt-jobs", "--from-beginning", "--count",
            "2",
        ])
        #expect(tailed.status == 0, "\(tailed.stderr)")
        let jobs = try tailed.lines.map { try MessageCodec().decodeJob(Array($0.utf8)) }
        #expect(jobs.map(\.jobID) == ["j1", "j3"], "one account's jobs arrive in input order")
        #expect(jobs.allSatisfy { $0.submittedAt != nil }, "submit stamps submitted_at (verify_job_duration_seconds)")
    }

    @Test("submit and tail take kafka_properties (--kafka-properties or VERIFY_KAFKA_PROPERTIES) as the services do")
    func kafkaProperties() async throws {
        // A property librdkafka refuses, or a pair that is not name=value: exit 2, one line naming the key.
        func expectRefused(_ outcome: CommandProcess.Outcome, _ command: String) {
            #expect(outcome.status == 2, "exit \(outcome.status): \(outcome.stderr)")
            let lines = outcome.stderr.split(separator: "\n")
            #expect(lines.count == 1, "stderr:\n\(outcome.stderr)")
            #expect(
                lines.first?.hasPrefix("verify-worker \(command): configuration: kafka_properties: ") == true,
                "stderr:\n\(outcome.stderr)")
            #expect(!outcome.stderr.contains("KafkaError"), "\(outcome.stderr)")
        }
        let nowhere = ["--brokers", "127.0.0.1:1", "--topic", "receipt-jobs"]
        let job = #"{"job_id":"j1","account_id":"acct-1","receipt":"AAAA"}"#
        expectRefused(
            try await CommandProcess.run(
                ["submit"] + nowhere + ["-"], stdin: job,
                environment: ["VERIFY_KAFKA_PROPERTIES": "no.such.property=1"]),
            "submit")
        expectRefused(
            try await CommandProcess.run(
                ["submit", "--kafka-properties", "no-equals-sign"] + nowhere + ["-"], stdin: job),
            "submit")
        expectRefused(
            try await CommandProcess.run(
                ["tail", "--kafka-properties", "no.such.property=1", "--count", "1"] + nowhere),
            "tail")
        expectRefused(
            try await CommandProcess.run(
                ["tail", "--count", "1"] + nowhere, environment: ["VERIFY_KAFKA_PROPERTIES": "socket.timeout.ms=x"]),
            "tail")

        // Accepted properties reach the client; switching TLS verification off is accepted with one warning line.
        let cluster = try MockKafkaCluster(brokers: 1)
        try cluster.createTopic("receipt-jobs", partitions: 1)
        let submitted = try await CommandProcess.run(
            ["submit", "--brokers", cluster.bootstrapServers, "--topic", "receipt-jobs", "-"], stdin: job,
            environment: [
                "VERIFY_KAFKA_PROPERTIES": "client.id=gateway-props;enable.ssl.certificate.verification=false"
            ])
        #expect(submitted.status == 0, "\(submitted.stderr)")
        #expect(submitted.jsonLines.first?["job_id"] as? String == "j1", "\(submitted.stdout)")
        let submitWarnings = submitted.stderr.split(separator: "\n").filter { $0.contains("TLS verification") }
        #expect(submitWarnings.count == 1, "\(submitted.stderr)")
        #expect(submitWarnings.first?.contains("enable.ssl.certificate.verification=false") == true)

        let tailed = try await CommandProcess.run([
            "tail", "--brokers", cluster.bootstrapServers, "--topic", "receipt-jobs", "--from-beginning", "--count",
            "1", "--kafka-properties", "ssl.endpoint.identification.algorithm=none",
        ])
        #expect(tailed.status == 0, "\(tailed.stderr)")
        #expect(try tailed.lines.map { try MessageCodec().decodeJob(Array($0.utf8)).jobID } == ["j1"])
        let tailWarnings = tailed.stderr.split(separator: "\n").filter { $0.contains("TLS verification") }
        #expect(tailWarnings.count == 1, "\(tailed.stderr)")
        #expect(tailWarnings.first?.contains("ssl.endpoint.identification.algorithm=none") == true)
    }

    @Test("the properties that switch Kafka TLS verification off are recognised, and only those")
    func tlsVerificationSwitchedOff() {
        #expect(
            KafkaTLSVerification.switchedOff(in: [
                "enable.ssl.certificate.verification": "false", "ssl.endpoint.identification.algorithm": "NONE",
                "security.protocol": "SSL",
            ]) == ["enable.ssl.certificate.verification=false", "ssl.endpoint.identification.algorithm=NONE"])
        #expect(KafkaTLSVerification.switchedOff(in: ["enable.ssl.certificate.verification": "0"]).count == 1)
        #expect(
            KafkaTLSVerification.switchedOff(in: [
                "enable.ssl.certificate.verification": "true", "ssl.endpoint.identification.algorithm": "https",
                "security.protocol": "SASL_SSL",
            ]).isEmpty)
    }

    @Test("submit --generate seed-mix mints at a simulator over HTTP and labels each job's category")
    func submitGenerated() async throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        try cluster.createTopic("receipt-jobs", partitions: 2)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let catalog = directory.appendingPathComponent("catalog.json")
        try Data(
            #"{"bundle_ids":["com.example.edge"],"products":[{"id":"com.example.edge.gems","type":"consumable"}]}"#
                .utf8
        ).write(to: catalog)
        try await AppleSimHarness.with { simulator in
            let outcome = try await CommandProcess.run([
                "submit", "--generate", "seed-mix", "--count", "40", "--rate", "2000", "--simulator",
                simulator.base.absoluteString, "--catalog-file", catalog.path, "--brokers", cluster.bootstrapServers,
                "--mix", "other_app=0.5,genuine=0.3,cracker=0.2",
            ])
            #expect(outcome.status == 0, "\(outcome.stderr)")
            let results = outcome.jsonLines
            #expect(results.count == 40)
            let categories = Set(results.compactMap { $0["category"] as? String })
            #expect(categories.isSubset(of: ["other_app", "genuine", "cracker", "repeat", "forged"]))
            #expect(categories.contains("genuine"))
            #expect(simulator.simulator.stats.snapshot().requests["sim/mint", default: 0] > 0)
        }
    }

    @Test("healthcheck exits 0 on 200, 1 on 503 or no server, and refuses other hosts")
    func healthcheck() async throws {
        var logger = Logger(label: "gateway-test")
        logger.logLevel = .critical
        let server = OperationsServer(
            configuration: .init(host: "127.0.0.1", port: 0), registry: MetricsBootstrap.registry(), logger: logger,
            readiness: { .notReady("warming_up") })
        let task = Task { try await server.run() }
        defer { task.cancel() }
        let port = try #require(await server.waitUntilListening())

        // A generous limit: under a full parallel test run this process's threads are busy, and the probe must
        // not fail for that (the limit bounds the wait, it is not a guessed delay).
        let healthy = try await CommandProcess.run([
            "healthcheck", "--url", "http://127.0.0.1:\(port)/healthz", "--timeout-ms", "30000",
        ])
        #expect(healthy.status == 0, "\(healthy.stderr)")
        #expect(healthy.stderr.hasPrefix("healthy"))
        let notReady = try await CommandProcess.run([
            "healthcheck", "--url", "http://127.0.0.1:\(port)/readyz", "--timeout-ms", "30000",
        ])
        #expect(notReady.status == 1)
        #expect(notReady.stderr.contains("503"))
        #expect(notReady.stderr.split(separator: "\n").count == 1, "one line on stderr")

        task.cancel()
        _ = await task.result
        let gone = try await CommandProcess.run([
            "healthcheck", "--url", "http://127.0.0.1:\(port)/healthz", "--timeout-ms", "500",
        ])
        #expect(gone.status == 1)
        let remote = try await CommandProcess.run(["healthcheck", "--url", "http://example.com/healthz"])
        #expect(remote.status != 0)
    }
}

@Suite("Gateway: seed traffic through a minting protocol")
struct GatewaySeedTrafficTests {
    @Test("in-process and protocol minting draw the same categories for the same seed")
    func sameSequence() async throws {
        var configuration = AppleSimulatorConfiguration()
        configuration.pki = try AppleSimHarness.sharedPKI.get()
        let simulator = try AppleSimulator(configuration: configuration)
        var direct = SeedTrafficGenerator(simulator: simulator, bundleID: "com.example.app", productIDs: ["p1", "p2"])
        var viaProtocol = SeedTrafficGenerator(
            minter: GatewayCountingMinter(simulator: simulator), bundleID: "com.example.app", productIDs: ["p1", "p2"])
        for _ in 0..<60 {
            let a = try direct.next()
            let b = try await viaProtocol.nextJob()
            #expect(a.category == b.category)
            #expect(a.format == b.format)
        }
    }
}

/// A minter that is not the simulator type itself, so the generator takes the protocol path.
struct GatewayCountingMinter: ReceiptMinting {
    let simulator: AppleSimulator
    func mintTrafficReceipt(_ request: MintRequest) async throws -> TrafficReceipt {
        try await simulator.mintTrafficReceipt(request)
    }
}
