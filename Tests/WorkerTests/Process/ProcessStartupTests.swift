import Foundation
import Kafka
import Logging
import Observability
import Operations
import Testing
import Traffic
import Worker

/// `verify-worker run` at start and when its dependencies are gone: nothing is silent. A taken metrics port stops
/// it with one line, an unreachable ledger keeps it out of its group, and brokers that are all down, or a ledger
/// that goes away, make it not ready until they answer again. Serialized like the other process suites: each test starts its own children.
@Suite("Process: start-up and readiness", .serialized)
struct ProcessStartupTests {
    @Test("a metrics port already in use: exit 2 with one line naming metrics_port", .timeLimit(.minutes(2)))
    func metricsPortInUse() async throws {
        var logger = Logger(label: "process-test")
        logger.logLevel = .critical
        let holder = OperationsServer(
            configuration: .init(host: "127.0.0.1", port: 0), registry: MetricsBootstrap.registry(), logger: logger,
            readiness: { .ready })
        let task = Task { try await holder.run() }
        defer { task.cancel() }
        let taken = try #require(await holder.waitUntilListening())
        // A reachable cluster: the port must be the only problem.
        let cluster = try MockKafkaCluster(brokers: 1)

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "verify-process-port-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let catalog = directory.appendingPathComponent("catalog.json")
        try JSONEncoder().encode(ProcessTest.catalog).write(to: catalog)
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("VERIFY_") }
        environment["VERIFY_BROKERS"] = cluster.bootstrapServers
        environment["VERIFY_CATALOG_FILE"] = catalog.path
        environment["VERIFY_LEDGER_URL"] = "sqlite:" + directory.appendingPathComponent("ledger.sqlite").path
        environment["VERIFY_METRICS_HOST"] = "127.0.0.1"
        environment["VERIFY_METRICS_PORT"] = String(taken)

        let child = try ProcessTestChild(
            name: "run", arguments: ["run"], environment: environment,
            stderrFile: directory.appendingPathComponent("stderr.log"))
        defer { child.signal(SIGKILL) }
        let status = try await child.exitStatus(within: .seconds(30))
        #expect(status == 2, "stderr:\n\(child.standardError)")
        let lines = child.standardError.split(separator: "\n")
        #expect(lines.count == 1, "stderr:\n\(child.standardError)")
        #expect(lines.first?.contains("metrics_port") == true, "stderr:\n\(child.standardError)")
    }

    @Test(
        "an unreachable ledger at start: not ready, takes no partition from a healthy worker, SIGTERM exits 0 at once",
        .timeLimit(.minutes(2)))
    func ledgerUnreachableAtStart() async throws {
        try await ProcessTestStack.withStack { stack, _ in
            // Nothing listens on port 1: every connection attempt is refused.
            let stranded = try stack.startWorker(
                "stranded-worker", overrides: ["VERIFY_LEDGER_URL": "postgres://verify@127.0.0.1:1/verify"])
            try await ProcessTest.eventually("/readyz 503 ledger_unreachable", within: .seconds(30)) {
                guard stranded.child.isRunning else {
                    throw ProcessTestFailure("the worker exited:\n\(stranded.child.logTail())")
                }
                guard let ready = await ProcessTest.get(stranded.url("readyz")) else { return false }
                return ready.status == 503 && ready.body.contains("ledger_unreachable")
                    && ready.body.contains("not_in_group")
            }

            // A healthy worker joins the same group afterwards: had the stranded one joined, range assignment
            // would give it half of the partitions.
            let healthy = try stack.startWorker("healthy-worker")
            try await healthy.waitUntilReady()
            try await ProcessTest.eventually("the healthy worker holds every partition", within: .seconds(30)) {
                guard let metrics = await ProcessTest.get(healthy.url("metrics")) else { return false }
                return PrometheusTextSample(metrics.body).sum(of: MetricNames.assignedPartitions)
                    == Double(stack.partitions)
            }
            let stillOut = try #require(await ProcessTest.get(stranded.url("readyz")))
            #expect(stillOut.body.contains("not_in_group"), "\(stillOut.body)")
            #expect(
                stranded.child.standardError.components(separatedBy: "ledger: not reachable").count - 1 <= 2,
                "the ledger failure is logged once in a while, not on every retry:\n\(stranded.child.logTail())")

            let signalled = ContinuousClock.now
            stranded.child.signal(SIGTERM)
            let status = try await stranded.child.exitStatus(within: .seconds(30))
            let took = signalled.duration(to: .now)
            #expect(status == 0, "exit status \(status):\n\(stranded.child.logTail())")
            #expect(took < .seconds(10), "took \(took) to exit")
            healthy.child.signal(SIGTERM)
            #expect(try await healthy.child.exitStatus(within: .seconds(30)) == 0)
        }
    }

    @Test("every broker down: /readyz 503 brokers_down; a broker back: ready again", .timeLimit(.minutes(2)))
    func brokersDown() async throws {
        try await ProcessTestStack.withStack { stack, _ in
            let worker = try stack.startWorker("broker-watch-worker")
            try await worker.waitUntilReady()
            #expect(try await stack.broker.control("down -1").hasPrefix("ok"))
            try await ProcessTest.eventually("/readyz 503 brokers_down", within: .seconds(40)) {
                guard let ready = await ProcessTest.get(worker.url("readyz")) else { return false }
                return ready.status == 503 && ready.body.contains("brokers_down")
            }
            #expect(try await stack.broker.control("up -1").hasPrefix("ok"))
            try await ProcessTest.eventually("/readyz without brokers_down", within: .seconds(40)) {
                guard let ready = await ProcessTest.get(worker.url("readyz")) else { return false }
                return !ready.body.contains("brokers_down")
            }
            try await worker.waitUntilReady(within: .seconds(40))
            worker.child.signal(SIGTERM)
            #expect(try await worker.child.exitStatus(within: .seconds(40)) == 0)
        }
    }

    /// An unready worker gets no traffic from a readiness probe's load balancer, and a worker's jobs come from Kafka,
    /// not from it: only its own look at the ledger may make it ready again.
    @Test(
        "the ledger away while running: /readyz 503 ledger_unreachable; back: ready again with no job sent",
        .timeLimit(.minutes(5)))
    func ledgerBackWithoutTraffic() async throws {
        try await LedgerTestSupport.withPrivatePostgres { url, control in
            try await ProcessTestStack.withStack { stack, _ in
                let worker = try stack.startWorker("ledger-outage-worker", overrides: ["VERIFY_LEDGER_URL": url])
                try await worker.waitUntilReady(within: .seconds(60))
                try await LedgerTestSupport.shell("\(control) pause")
                do {
                    try await ProcessTest.eventually("/readyz 503 ledger_unreachable", within: .seconds(60)) {
                        guard worker.child.isRunning else {
                            throw ProcessTestFailure("the worker exited:\n\(worker.child.logTail())")
                        }
                        guard let ready = await ProcessTest.get(worker.url("readyz")) else { return false }
                        return ready.status == 503 && ready.body.contains("ledger_unreachable")
                    }
                } catch {
                    _ = try? await LedgerTestSupport.shell("\(control) resume")
                    throw error
                }
                try await LedgerTestSupport.shell("\(control) resume")
                try await worker.waitUntilReady(within: .seconds(60))
                worker.child.signal(SIGTERM)
                #expect(try await worker.child.exitStatus(within: .seconds(40)) == 0)
            }
        }
    }
}
