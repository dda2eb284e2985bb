import AppleClients
import Crypto
import Foundation
import Kafka
import Ledger
import Logging
import Messages
import Observability
import Operations
import Prometheus
import RateLimiter
import Receipts
import StoreHTTP
import Testing
import Worker

/// `/metrics` says what each series is (`# HELP` from ``MetricNames``'s one table) and declares every family its
/// command records from the start, so that an alert on an absent series does not fire on an idle process.
@Suite("Observability: HELP and TYPE for every series, declared from the start", .timeLimit(.minutes(2)))
struct MetricsExpositionTests {
    /// The families of an exposition: name → (has a HELP line, its TYPE, its samples).
    static func families(_ text: String) -> [String: (help: Bool, type: String?, samples: [String])] {
        var found: [String: (help: Bool, type: String?, samples: [String])] = [:]
        for line in text.split(separator: "\n").map(String.init) {
            let parts = line.split(separator: " ", maxSplits: 3).map(String.init)
            if line.hasPrefix("# HELP "), parts.count >= 3 {
                found[parts[2], default: (false, nil, [])].help = true
            } else if line.hasPrefix("# TYPE "), parts.count >= 4 {
                found[parts[2], default: (false, nil, [])].type = parts[3]
            } else if !line.hasPrefix("#"), let name = line.split(whereSeparator: { $0 == "{" || $0 == " " }).first {
                var family = String(name)
                for suffix in ["_bucket", "_sum", "_count"] where MetricNames.description(of: family) == nil {
                    if family.hasSuffix(suffix) { family = String(family.dropLast(suffix.count)) }
                }
                found[family, default: (false, nil, [])].samples.append(line)
            }
        }
        return found
    }

    static func expectDeclared(_ text: String, names: [String], command: String) {
        let families = Self.families(text)
        #expect(!names.isEmpty)
        for name in names {
            let description = MetricNames.description(of: name)
            let family = families[name]
            #expect(family?.help == true, "\(command): no # HELP for \(name)")
            #expect(family?.type == description?.kind.rawValue, "\(command): # TYPE of \(name)")
            if description?.kind == .counter, description?.labels.isEmpty == true {
                #expect(family?.samples.isEmpty == false, "\(command): no sample of the label-free counter \(name)")
            }
        }
        // Every family of the text, declared or recorded, has its help line.
        for (name, family) in families where MetricNames.description(of: name) != nil {
            #expect(family.help, "\(command): no # HELP for \(name)")
        }
    }

    @Test("every metric name has one line of the table, with a help text and a part")
    func tableCoversEveryName() throws {
        let source = try String(
            contentsOf: TestEnvironment.packageRoot.appendingPathComponent("Sources/Observability/MetricNames.swift"),
            encoding: .utf8)
        let declaration = try NSRegularExpression(pattern: #"static let \w+ = "(verify_[a-z_]+)""#)
        let names = declaration.matches(in: source, range: NSRange(source.startIndex..., in: source)).map {
            String(source[Range($0.range(at: 1), in: source)!])
        }
        #expect(names.count >= 40)
        for name in names {
            let description = MetricNames.description(of: name)
            #expect(description != nil, "\(name) has no line in MetricNames.descriptions")
            #expect(description?.help.isEmpty == false, "\(name) has no help text")
        }
        #expect(MetricNames.descriptions.count == Set(MetricNames.descriptions.map(\.name)).count)
    }

    @Test("the text: HELP before each TYPE, absent families declared, a label-free counter at 0")
    func rendering() {
        let registry = PrometheusCollectorRegistry()
        // No help text of its own: the exposition adds the one MetricNames gives.
        registry.makeCounter(
            descriptor: MetricNameDescriptor(metricName: MetricNames.gatewayPublished, unitName: "", helpText: ""),
            labels: [("route", "receipts")]
        ).increment()
        let text = String(
            decoding: MetricsExposition.render(
                registry,
                declaring: [MetricNames.gatewayPublished, MetricNames.gatewayErrors, MetricNames.jobsConsumed]
            ), as: UTF8.self)
        let lines = text.split(separator: "\n").map(String.init)
        let published = MetricNames.gatewayPublished
        let help = lines.firstIndex { $0.hasPrefix("# HELP \(published) ") }
        let type = lines.firstIndex { $0 == "# TYPE \(published) counter" }
        #expect(help != nil && type != nil && help! + 1 == type!, "\(text)")
        #expect(lines.contains(#"\#(published){route="receipts"} 1"#), "\(text)")
        #expect(lines.contains("# TYPE \(MetricNames.gatewayErrors) counter"), "\(text)")
        #expect(!lines.contains { $0.hasPrefix(MetricNames.gatewayErrors + " ") }, "a labelled family gets no sample")
        #expect(lines.contains("\(MetricNames.jobsConsumed) 0"), "\(text)")
        #expect(text.hasSuffix("\n") && !text.hasSuffix("\n\n"))
    }

    @Test("an idle gateway's /metrics declares every gateway metric with HELP and TYPE (real HTTP)")
    func idleGateway() async throws {
        try await GatewayTestHarness.with { harness in
            let reply = try await harness.operations("metrics")
            #expect(reply.status == 200)
            Self.expectDeclared(
                String(decoding: reply.body, as: UTF8.self), names: MetricNames.names(of: [.gateway]),
                command: "gateway")
        }
    }

    @Test("an idle entitlement service's /metrics declares every entitlement metric with HELP and TYPE (real HTTP)")
    func idleEntitlementService() async throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        try cluster.createTopic(Topics.verdicts, partitions: 2)
        let directory = try EntitlementServiceTests.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let running = try await EntitlementServiceTests.start(
            cluster: cluster, storePath: directory.appendingPathComponent("idle.sqlite").path, directory: directory,
            group: KafkaTest.uniqueGroup("idle-metrics"))
        let response = try await running.http.execute(
            TransportRequest(url: "http://127.0.0.1:\(running.port)/metrics", timeout: .seconds(30)))
        await running.stop()
        #expect(response.status == 200)
        Self.expectDeclared(
            String(decoding: response.body, as: UTF8.self), names: MetricNames.names(of: [.entitlements]),
            command: "entitlements")
    }

    @Test("the worker's operations port declares the pipeline's and the call gates' metrics")
    func workerDeclares() {
        let names = MetricNames.names(of: [.worker, .appleCallGate])
        let text = String(
            decoding: MetricsExposition.render(PrometheusCollectorRegistry(), declaring: names), as: UTF8.self)
        Self.expectDeclared(text, names: names, command: "run")
    }
}

/// `verify_apple_calls_total{status}` says what Apple answered: a refusal is not `ok`.
@Suite("Observability: Apple's refusals in verify_apple_calls_total", .timeLimit(.minutes(2)))
struct AppleCallStatusLabelTests {
    /// The value of `verify_apple_calls_total{endpoint, status}` in the process's registry (0 when absent).
    static func calls(endpoint: String, status: String) -> Double {
        let prefix = MetricNames.appleCalls + #"{endpoint="\#(endpoint)",status="\#(status)"} "#
        let line = MetricsBootstrap.registry().emitToString().split(separator: "\n").first { $0.hasPrefix(prefix) }
        return line.flatMap { Double($0.dropFirst(prefix.count)) } ?? 0
    }

    @Test("a Server API 401 (the worker's key refused) is counted as http_401, not ok")
    func serverAPIRefusal() async throws {
        _ = MetricsBootstrap.registry()
        let before = Self.calls(endpoint: StoreEndpoint.transactionInfo.name, status: AppleCaller.keyRefusedLabel)
        let refusing = SecuritySpyTransport { _ in TransportResponse(status: 401, headers: [], body: []) }
        let key = try AppStoreConnectKey(
            keyID: "KEY123", issuerID: "issuer-uuid", bundleID: "com.example.verifyworker",
            privateKeyPEM: P256.Signing.PrivateKey().pemRepresentation)
        let logger = Logger(label: "apple-status-test") { _ in SwiftLogNoOpLogHandler() }
        let serverAPI = AppStoreServerAPIClient(
            transport: refusing,
            configuration: AppStoreServerAPIConfiguration(
                productionBaseURL: "http://127.0.0.1:1", sandboxBaseURL: "http://127.0.0.1:1/sandbox"),
            signer: AppStoreTokenSigner(key: key), verifier: AppleClientsFakeVerifier(), logger: logger)
        let url = try LedgerTestSupport.freshURL(.sqlite)
        defer { LedgerTestSupport.removeFiles(of: url) }
        let engine = try CurlHTTPEngine()
        defer { engine.shutdown() }
        try await LedgerFactory.withLedger(url: url, configuration: LedgerTestSupport.patient) { ledger in
            let processor = JobProcessorTests.processor(
                ledger: ledger, engine: engine, serverAPI: serverAPI,
                configuration: JobProcessor.Configuration(
                    catalog: JobProcessorTests.catalog, allowSandbox: true, jobDeadline: .seconds(30)),
                logger: logger)
            let job = ReceiptJob(jobID: "job-401", accountID: "acct-401", proof: .transactionID("2000000000401401"))
            // The refused job waits for the setting (it is never decided on the worker's own mistake): stopped
            // once the call is counted.
            let task = Task { _ = try await processor.decide(job, recordedAt: Date()) }
            defer { task.cancel() }
            try await PipelineHarness.poll("the 401 counted", timeout: .seconds(30)) {
                Self.calls(endpoint: StoreEndpoint.transactionInfo.name, status: AppleCaller.keyRefusedLabel) > before
            }
            #expect(refusing.requested.count >= 1)
        }
    }
}
