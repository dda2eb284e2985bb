import AppleSimulator
import Demo
import Foundation
import Kafka
import Logging
import Messages
import Observability
import Operations
import Testing
import Traffic

/// The reconciler with several apps: with two apps in the catalog, `verify-worker reconcile` sweeps each app's
/// notification history with that app's own Server API key. A REFUND of app B that Apple could not deliver is found
/// by B's sweep and published once, as the gateway's job; A's sweep, whose token Apple answers with A's history only,
/// publishes nothing. The simulator checks each token against its app's key and answers with that app's history, so
/// B's notification can only have come through a token signed with B's key.
@Suite("Several apps: reconcile end to end", .timeLimit(.minutes(2)))
struct SeveralAppsReconcileEndToEndTests {
    @Test("B's REFUND that never arrived is found by B's sweep with B's key and published once; A's adds nothing")
    func recoversRefundOfB() async throws {
        let files = try SeveralAppsFiles()
        defer { files.remove() }
        var simulatorConfiguration = AppleSimulatorConfiguration()
        simulatorConfiguration.pki = try AppleSimHarness.sharedPKI.get()
        simulatorConfiguration.logger.logLevel = .critical
        simulatorConfiguration.apps = files.simulatedApps
        let simulator = try AppleSimulator(configuration: simulatorConfiguration)
        let server = Task { try await simulator.run() }
        defer { server.cancel() }
        let base = "http://127.0.0.1:\(try await simulator.waitUntilReady())"
        let anchors = try DemoFiles(simulator: simulator)
        defer { anchors.remove() }

        // B's purchase is refunded; Apple's attempt fails, as nothing listens where it sends.
        let minted = try simulator.mint(
            MintRequest(
                bundleId: SeveralAppsFiles.appB, productId: SeveralAppsFiles.consumable, format: .signedTransaction,
                environment: .production))
        let dead = try FreeLocalPort.pick()
        try simulator.setNotificationTarget("http://127.0.0.1:\(dead)/apple/notifications")
        _ = try simulator.refund(transactionId: minted.transaction.transactionId)
        let uuid = try await ReconcileEndToEndTests.undeliveredNotification("REFUND", simulatorBase: base)

        // `verify-worker reconcile` as a child: one process, one reconcile runtime, as deployed (the metrics system
        // is process-wide, and Prometheus refuses one name both with and without the `app` label).
        let cluster = try KafkaTest.cluster(brokers: 1, topics: [Topics.jobs: 4])
        let ledger = try LedgerTestSupport.freshURL(.sqlite)
        defer { LedgerTestSupport.removeFiles(of: ledger) }
        let metricsPort = try FreeLocalPort.pick()
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("VERIFY_") }
        environment.merge([
            "VERIFY_BROKERS": cluster.bootstrapServers, "VERIFY_LEDGER_URL": ledger,
            "VERIFY_CATALOG_FILE": try files.writeCatalog(files.catalog()),
            "VERIFY_TRUST_ANCHORS": anchors.anchors.map(\.path).joined(separator: ","),
            "VERIFY_SERVER_API_PRODUCTION_URL": base, "VERIFY_SERVER_API_SANDBOX_URL": base + "/sandbox",
            "VERIFY_METRICS_HOST": "127.0.0.1", "VERIFY_METRICS_PORT": String(metricsPort),
            "VERIFY_RECONCILE_INTERVAL_S": "3600",
        ]) { _, new in new }
        let log = files.directory.appendingPathComponent("reconcile.log")
        let reconcile = try TestChild.verifyWorker(["reconcile"], environment: environment, logFile: log)
        defer { reconcile.kill() }

        let consumer = try KafkaTest.consumer(cluster.bootstrapServers, group: KafkaTest.uniqueGroup("apps-reconcile"))
        try consumer.subscribe(topics: [Topics.jobs])
        let messages = try await KafkaTest.collect(consumer.events, messages: 1)
        let job = try MessageCodec().decodeJob(try #require(messages.first?.value))
        #expect(job.jobID == NotificationJob.jobIDPrefix + uuid.lowercased())
        #expect(job.proof.fieldName == "notification")

        // Both sweeps finished (each app's checkpoint, labelled by its bundle id, moved), and A's added nothing.
        try await PipelineHarness.poll("a finished sweep of each app") {
            guard reconcile.isRunning else {
                throw KafkaTestFailure("reconcile exited: \((try? String(contentsOf: log, encoding: .utf8)) ?? "")")
            }
            guard let answer = await TestHTTP.get("http://127.0.0.1:\(metricsPort)/metrics") else { return false }
            let moved = PrometheusTextSample(answer.body).samples.filter {
                $0.series.hasPrefix(MetricNames.reconcileCheckpoint + "{") && $0.value > 0
            }
            return [SeveralAppsFiles.appA, SeveralAppsFiles.appB].allSatisfy { app in
                moved.contains { $0.series.contains("app=\"\(app)\"") }
            }
        }
        #expect(await reconcile.terminate()?.status == 0)
        let producer = try KafkaTest.producer(cluster)
        #expect(try await KafkaTest.storedCount(producer, topic: Topics.jobs, partitions: 4) == 1)
        await producer.shutdown()
        await consumer.close()
    }
}
