import AppleSimulator
import Crypto
import Foundation
import Kafka
import Logging
import Messages
import Operations
import Pipeline
import ServiceLifecycle
import SwiftASN1
import Synchronization
import Testing

/// Issue 16, items 3 and 7 together: with two apps in the catalog, `verify-worker reconcile` sweeps each app's
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
        simulatorConfiguration.apps = [
            SimulatedApp(
                bundleId: SeveralAppsFiles.appA, appAppleId: SeveralAppsFiles.appleIDA, sharedSecret: files.secretA,
                apiPublicKey: files.keyA.publicKey),
            SimulatedApp(
                bundleId: SeveralAppsFiles.appB, appAppleId: SeveralAppsFiles.appleIDB, sharedSecret: files.secretB,
                apiPublicKey: files.keyB.publicKey),
        ]
        let simulator = try AppleSimulator(configuration: simulatorConfiguration)
        let server = Task { try await simulator.run() }
        defer { server.cancel() }
        let base = "http://127.0.0.1:\(try await simulator.waitUntilReady())"
        try files.write("rsa-root.pem", simulator.pki.rsaRoot.serializeAsPEM().pemString)
        try files.write("ec-root.pem", simulator.pki.ecRoot.serializeAsPEM().pemString)

        // B's purchase is refunded; Apple's attempt fails, as nothing listens where it sends.
        let minted = try simulator.mint(
            MintRequest(
                bundleId: SeveralAppsFiles.appB, productId: SeveralAppsFiles.consumable, format: .signedTransaction,
                environment: .production))
        let dead = try FreeLocalPort.pick()
        try simulator.setNotificationTarget("http://127.0.0.1:\(dead)/apple/notifications")
        _ = try simulator.refund(transactionId: minted.transaction.transactionId)
        let failed = Mutex<String?>(nil)
        try await PipelineHarness.poll("the REFUND's failed first attempt") {
            guard let answer = await TestHTTP.get(base + "/sim/notifications"),
                let object = try? JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any],
                let list = object["notifications"] as? [[String: Any]]
            else { return false }
            let refund = list.first {
                $0["notification_type"] as? String == "REFUND" && ($0["attempts"] as? [Any])?.isEmpty == false
                    && $0["delivered"] as? Bool == false
            }
            failed.withLock { $0 = refund?["notification_uuid"] as? String }
            return failed.withLock { $0 } != nil
        }
        let uuid = try #require(failed.withLock { $0 })

        let cluster = try KafkaTest.cluster(brokers: 1, topics: [Topics.jobs: 4])
        let ledger = try LedgerTestSupport.freshURL(.sqlite)
        defer { LedgerTestSupport.removeFiles(of: ledger) }
        var sources = ConfigurationSources(table: ReconcileConfiguration.table)
        try sources.addFlags([
            "brokers": cluster.bootstrapServers, "ledger_url": ledger,
            "catalog_file": try files.writeCatalog(files.catalog()),
            "trust_anchors": files.path("rsa-root.pem") + "," + files.path("ec-root.pem"),
            "server_api_production_url": base, "server_api_sandbox_url": base + "/sandbox",
            "metrics_host": "127.0.0.1", "metrics_port": String(try FreeLocalPort.pick()),
            "reconcile_interval_s": "3600",
        ])
        var logger = Logger(label: "test.reconcile")
        logger.logLevel = .error
        let runtime = ReconcileRuntime(configuration: try ReconcileConfiguration(sources), logger: logger)
        let group = try runtime.serviceGroup()
        let running = Task { try await group.run() }

        let consumer = try KafkaTest.consumer(cluster.bootstrapServers, group: KafkaTest.uniqueGroup("apps-reconcile"))
        try consumer.subscribe(topics: [Topics.jobs])
        let messages = try await KafkaTest.collect(consumer.events, messages: 1)
        let job = try MessageCodec().decodeJob(try #require(messages.first?.value))
        #expect(job.jobID == NotificationJob.jobIDPrefix + uuid.lowercased())
        #expect(job.proof.fieldName == "notification")

        // Both sweeps ran (each app's history was asked for, each with its own key), and A's added nothing.
        try await PipelineHarness.poll("a history request of each app") {
            (simulator.stats.snapshot().requests["inApps/v1/notifications/history"] ?? 0) >= 2
        }
        await group.triggerGracefulShutdown()
        try await running.value
        let producer = try KafkaTest.producer(cluster)
        #expect(try await KafkaTest.storedCount(producer, topic: Topics.jobs, partitions: 4) == 1)
        await producer.shutdown()
        await consumer.close()
    }
}
