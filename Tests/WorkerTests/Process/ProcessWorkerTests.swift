import AppleSimulator
import Foundation
import Kafka
import Messages
import Observability
import Testing
import Traffic
import Worker

/// `verify-worker run` as separate processes against a `dev-broker` process and an `apple-sim` process: the
/// operations port, SIGTERM, `kill -9`, rebalancing, and configuration errors. Serialized: each test starts its
/// own broker, simulator and workers, and the machine's cores are few.
@Suite("Process: verify-worker run", .serialized)
struct ProcessWorkerTests {
    /// Genuine purchases (some by Apple, some decided locally), replays of them, and junk decided locally.
    static let mix = TrafficMix(shares: [.genuine: 0.5, .repeated: 0.2, .otherApp: 0.2, .cracker: 0.1])

    @Test(
        "run serves /healthz, /readyz once assigned, and /metrics with job and verdict counters",
        .timeLimit(.minutes(2)))
    func operationsPort() async throws {
        try await ProcessTestStack.withStack { stack, verdicts in
            let worker = try stack.startWorker("ops-worker")
            try await ProcessTest.eventually("/healthz 200", within: .seconds(20)) {
                await ProcessTest.get(worker.url("healthz"))?.status == 200
            }
            try await worker.waitUntilReady()

            let jobs = try stack.jobs(30, mix: Self.mix)
            try await stack.produce(jobs)
            try await verdicts.waitForAll(jobs, within: .seconds(40)) { worker.child.logTail() }

            let metrics = try #require(await ProcessTest.get(worker.url("metrics")))
            #expect(metrics.status == 200)
            let sample = PrometheusTextSample(metrics.body)
            #expect(sample.sum(of: MetricNames.jobsConsumed) >= Double(jobs.count))
            #expect(sample.sum(of: MetricNames.verdicts) >= Double(jobs.count))
            #expect(sample.values(of: MetricNames.inFlight).count == 1, "no \(MetricNames.inFlight) gauge")

            worker.child.signal(SIGTERM)
            #expect(try await worker.child.exitStatus(within: .seconds(30)) == 0)
            verdicts.checkConsistency(jobs)
        }
    }

    @Test(
        "SIGTERM with Apple calls in flight exits 0 within the drain timeout; after a restart no job is lost",
        .timeLimit(.minutes(2)))
    func sigtermDrains() async throws {
        try await ProcessTestStack.withStack { stack, verdicts in
            // Slow Apple answers and a low Apple concurrency keep jobs waiting for Apple for seconds (a few dozen
            // Apple-bound jobs, 4 at a time, 1 s each), so some are in flight at SIGTERM. Watched through the
            // worker's own gauge: the verdict reader may see the first verdicts only after the run is over.
            try await stack.setAppleLatency(milliseconds: 1_000)
            let limits = ["VERIFY_APPLE_MAX_CONCURRENCY": "4", "VERIFY_APPLE_MIN_CONCURRENCY": "4"]

            let first = try stack.startWorker("drain-worker-1", overrides: limits)
            try await first.waitUntilReady()
            let jobs = try stack.jobs(120, mix: Self.mix)
            try await stack.produce(jobs)
            try await ProcessTest.eventually("jobs waiting for Apple before SIGTERM", within: .seconds(40)) {
                guard let metrics = await ProcessTest.get(first.url("metrics")) else { return false }
                return PrometheusTextSample(metrics.body).sum(of: MetricNames.inFlight) >= 4
            }
            #expect(verdicts.decided(jobs) < jobs.count, "the run ended before SIGTERM: nothing was in flight")

            let signalled = ContinuousClock.now
            first.child.signal(SIGTERM)
            // Drain (5 s) and the producer flush bound the exit; allow some slack for a loaded machine.
            let status = try await first.child.exitStatus(within: .seconds(20))
            #expect(status == 0, "exit status \(status):\n\(first.child.logTail())")
            let drained = signalled.duration(to: .now)
            #expect(drained < .seconds(15), "took \(drained) to exit")

            let second = try stack.startWorker("drain-worker-2", overrides: limits)
            try await second.waitUntilReady()
            try await verdicts.waitForAll(jobs, within: .seconds(60)) { second.child.logTail() }
            verdicts.checkConsistency(jobs)
            second.child.signal(SIGTERM)
            #expect(try await second.child.exitStatus(within: .seconds(30)) == 0)
        }
    }

    @Test(
        "SIGTERM while no broker is reachable: the worker still exits, by its shutdown deadline",
        .timeLimit(.minutes(2)))
    func sigtermWithoutBroker() async throws {
        try await ProcessTestStack.withStack { stack, _ in
            let worker = try stack.startWorker("lonely-worker", overrides: ["VERIFY_DRAIN_TIMEOUT_S": "2"])
            try await worker.waitUntilReady()
            stack.broker.terminateIfRunning()
            let signalled = ContinuousClock.now
            worker.child.signal(SIGTERM)
            // Drain (2 s) + the grace for closing the Kafka clients (20 s), and slack for a loaded machine.
            let status = try await worker.child.exitStatus(within: .seconds(60))
            let took = signalled.duration(to: .now)
            #expect(took < .seconds(45), "took \(took) to exit")
            // A clean close is possible when librdkafka gives up by itself; otherwise the deadline says so.
            if status != 0 {
                #expect(status == 1, "exit status \(status):\n\(worker.child.logTail())")
                #expect(worker.child.logTail(40).contains("shutdown deadline passed"), "\(worker.child.logTail())")
            }
        }
    }

    @Test(
        "kill -9 mid-run, then a restart: every job decided, repeats identical, no transaction granted twice",
        .timeLimit(.minutes(2)))
    func killNineLosesNothing() async throws {
        try await ProcessTestStack.withStack { stack, verdicts in
            // As for SIGTERM: jobs wait for Apple for seconds, watched through the worker's own gauge.
            try await stack.setAppleLatency(milliseconds: 1_000)
            let limits = ["VERIFY_APPLE_MAX_CONCURRENCY": "4", "VERIFY_APPLE_MIN_CONCURRENCY": "4"]

            let victim = try stack.startWorker("kill-worker-1", overrides: limits)
            try await victim.waitUntilReady()
            let jobs = try stack.jobs(200, mix: Self.mix)
            try await stack.produce(jobs)
            // Killed once jobs wait for Apple *and* some later job is done but not committable behind them (more
            // offsets uncommitted than jobs held): the restart must then read a decided job again.
            try await ProcessTest.eventually("jobs waiting for Apple, done jobs behind them", within: .seconds(40)) {
                guard let metrics = await ProcessTest.get(victim.url("metrics")) else { return false }
                let sample = PrometheusTextSample(metrics.body)
                let held = sample.sum(of: MetricNames.inFlight)
                return held >= 4 && sample.sum(of: MetricNames.commitLag) > held
            }
            victim.child.signal(SIGKILL)
            #expect(try await victim.child.exitStatus(within: .seconds(10)) == 128 + SIGKILL)
            let decidedBeforeKill = verdicts.decided(jobs)
            #expect(decidedBeforeKill < jobs.count, "the run ended before the kill")

            let survivor = try stack.startWorker("kill-worker-2", overrides: limits)
            try await survivor.waitUntilReady()
            try await verdicts.waitForAll(jobs, within: .seconds(60)) { survivor.child.logTail() }
            verdicts.checkConsistency(jobs)
            // The jobs done behind one waiting for Apple were not committed at the kill: the restart reads them
            // again, so the identical-verdict check above had repeats to compare.
            let repeated = verdicts.all.values.filter { $0.count > 1 }.count
            #expect(repeated > 0, "no job was redelivered after kill -9")
            survivor.child.signal(SIGTERM)
            #expect(try await survivor.child.exitStatus(within: .seconds(30)) == 0)
        }
    }

    @Test("two workers in one group, a third joins and leaves under load: nothing lost", .timeLimit(.minutes(2)))
    func rebalanceUnderLoad() async throws {
        try await ProcessTestStack.withStack(partitions: 6) { stack, verdicts in
            // Long enough that the run is still going once the third worker is ready (a group join takes seconds).
            try await stack.setAppleLatency(milliseconds: 600)
            let limits = ["VERIFY_APPLE_MAX_CONCURRENCY": "2", "VERIFY_APPLE_MIN_CONCURRENCY": "2"]

            let workers = try ["group-worker-1", "group-worker-2"].map { try stack.startWorker($0, overrides: limits) }
            for worker in workers { try await worker.waitUntilReady() }
            let jobs = try stack.jobs(400, mix: Self.mix)
            try await stack.produce(jobs)
            try await ProcessTest.eventually("some verdicts before the join", within: .seconds(40)) {
                verdicts.decided(jobs) >= 20
            }

            let joiner = try stack.startWorker("group-worker-3", overrides: limits)
            try await joiner.waitUntilReady()
            let decidedAtJoin = verdicts.decided(jobs)
            #expect(decidedAtJoin < jobs.count, "the run ended before the third worker joined")
            try await ProcessTest.eventually("progress with three workers", within: .seconds(30)) {
                verdicts.decided(jobs) > decidedAtJoin || verdicts.decided(jobs) == jobs.count
            }
            joiner.child.signal(SIGTERM)
            #expect(try await joiner.child.exitStatus(within: .seconds(20)) == 0)

            try await verdicts.waitForAll(jobs, within: .seconds(60)) {
                workers.map { "\($0.child.name):\n\($0.child.logTail())" }.joined(separator: "\n")
            }
            verdicts.checkConsistency(jobs)
            for worker in workers { worker.child.signal(SIGTERM) }
            for worker in workers { #expect(try await worker.child.exitStatus(within: .seconds(30)) == 0) }
        }
    }

    @Test(
        "a bad configuration exits non-zero with one line naming the key",
        .timeLimit(.minutes(2)),
        arguments: [
            ("max_in_flight", ["VERIFY_MAX_IN_FLIGHT": "abc"]),
            ("catalog_file", ["VERIFY_CATALOG_FILE": ""]),
            ("catalog_file", ["VERIFY_CATALOG_FILE": "/nonexistent/catalog.json"]),
            ("ledger_url", ["VERIFY_LEDGER_URL": "mysql://nowhere"]),
            ("ledger_url", ["VERIFY_LEDGER_URL": "postgres://verify@127.0.0.1:1/ledger?sslmode=verify"]),
            (
                "ledger_url",
                [
                    "VERIFY_LEDGER_URL":
                        "postgres://verify@127.0.0.1:1/ledger?sslmode=verify-full&sslrootcert=/nonexistent"
                ]
            ),
            ("ledger_url", ["VERIFY_LEDGER_URL": "sqlite:/nonexistent/folder/ledger.sqlite"]),
            ("catalog_file", ["VERIFY_CATALOG_FILE": "NO_PRODUCTS"]),
            ("catalog_file", ["VERIFY_CATALOG_FILE": "BAD_PRODUCT_TYPE"]),
            (
                "verify_receipt_production_url",
                ["VERIFY_VERIFY_RECEIPT_PRODUCTION_URL": "http://buy.itunes.apple.com/verifyReceipt"]
            ),
            (
                "server_api_sandbox_url",
                ["VERIFY_SERVER_API_SANDBOX_URL": "http://api.storekit-sandbox.itunes.apple.com"]
            ),
            ("kafka_properties", ["VERIFY_KAFKA_PROPERTIES": "no.such.property=1"]),
        ])
    func badConfiguration(key: String, overrides: [String: String]) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "verify-process-config-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let catalog = directory.appendingPathComponent("catalog.json")
        try JSONEncoder().encode(ProcessTest.catalog).write(to: catalog)
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("VERIFY_") }
        // Nothing listens there: a configuration accepted by mistake would hang instead of exiting.
        environment["VERIFY_BROKERS"] = "127.0.0.1:1"
        environment["VERIFY_CATALOG_FILE"] = catalog.path
        environment["VERIFY_LEDGER_URL"] = "sqlite:" + directory.appendingPathComponent("ledger.sqlite").path
        environment["VERIFY_METRICS_PORT"] = "0"
        environment.merge(overrides) { _, new in new }
        if overrides["VERIFY_CATALOG_FILE"] == "" { environment["VERIFY_CATALOG_FILE"] = nil }
        let catalogs = [
            "NO_PRODUCTS": #"{"bundle_ids":["com.example.processtest"],"products":[]}"#,
            "BAD_PRODUCT_TYPE": #"{"bundle_ids":["com.example.processtest"],"products":[{"id":"p","type":"gem"}]}"#,
        ]
        if let name = overrides["VERIFY_CATALOG_FILE"], let json = catalogs[name] {
            let file = directory.appendingPathComponent("\(name).json")
            try Data(json.utf8).write(to: file)
            environment["VERIFY_CATALOG_FILE"] = file.path
        }

        let child = try ProcessTestChild(
            name: "run", arguments: ["run"], environment: environment,
            stderrFile: directory.appendingPathComponent("stderr.log"))
        let status = try await child.exitStatus(within: .seconds(30))
        #expect(status == 2)
        // The error is the only line: no JSON start line before it, no Foundation error dump after it.
        let lines = child.standardError.split(separator: "\n")
        #expect(lines.count == 1, "stderr:\n\(child.standardError)")
        #expect(
            lines.first?.hasPrefix("verify-worker run: configuration: \(key): ") == true,
            "stderr:\n\(child.standardError)")
    }
}
