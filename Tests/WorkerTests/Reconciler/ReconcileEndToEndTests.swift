import AppleSimulator
import Crypto
import Demo
import Foundation
import Kafka
import Logging
import Messages
import Operations
import Reconciler
import ServiceLifecycle
import Synchronization
import Testing
import Worker

/// `verify-worker reconcile`'s runtime against the Apple simulator, a mock cluster, the ledger and a worker:
/// a REFUND notification Apple could not deliver (nothing listens at the notification URL) is found in Get
/// Notification History, published as the gateway's job, and decided by the worker, so the grant is revoked; the
/// checkpoint moves; the lease is given up on stop. And a renewal Apple never notified is found by re-reading the
/// lapsed subscription's transaction history, published as a correction, and granted to the owner; a refund Apple
/// reversed without a notification is found by re-reading the refunded subscription, and the claim restored.
@Suite("Reconciler: a notification Apple failed to deliver, recovered end to end", .timeLimit(.minutes(2)))
struct ReconcileEndToEndTests {
    /// The uuid of the simulator's first `type` notification whose delivery was tried and failed, once it has one.
    static func undeliveredNotification(_ type: String, simulatorBase base: String) async throws -> String {
        let found = Mutex<String?>(nil)
        try await PipelineHarness.poll("the \(type)'s failed first attempt") {
            guard let answer = await TestHTTP.get(base + "/sim/notifications"),
                let object = try? JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any],
                let list = object["notifications"] as? [[String: Any]]
            else { return false }
            let failed = list.first {
                $0["notification_type"] as? String == type && ($0["attempts"] as? [Any])?.isEmpty == false
                    && $0["delivered"] as? Bool == false
            }
            found.withLock { $0 = failed?["notification_uuid"] as? String }
            return found.withLock { $0 } != nil
        }
        return try #require(found.withLock { $0 })
    }

    /// The worker's Server API settings (the simulator's endpoints) and the key they name, as flags and secrets.
    struct ServerAPI {
        var settings: [String: String]
        var secrets: [String: String]
    }

    /// Starts worker 0 with a Server API key of its own against the simulator; returns the settings it was given.
    static func startWorker(_ harness: PipelineHarness) throws -> ServerAPI {
        let serverAPI = ServerAPI(
            settings: [
                "server_api_production_url": "http://127.0.0.1:\(harness.port)",
                "server_api_sandbox_url": "http://127.0.0.1:\(harness.port)/sandbox",
                "server_api_key_id": "TESTKEY123", "server_api_issuer_id": "issuer-e2e",
            ],
            secrets: ["VERIFY_SERVER_API_KEY": P256.Signing.PrivateKey().pemRepresentation])
        try harness.startWorker(0, extra: serverAPI.settings, environment: serverAPI.secrets)
        return serverAPI
    }

    /// The demo's catalog sells no subscription: one is added before the worker reads it. Returns its product id.
    static func sellSubscription(_ harness: PipelineHarness) throws -> String {
        let subscription = "com.example.verifyworker.monthly"
        var products = Array(DemoApp.catalog.products.values)
        products.append(.init(id: subscription, type: .autoRenewable))
        try JSONEncoder().encode(Catalog(bundleIDs: [DemoApp.bundleID], products: products))
            .write(to: harness.files.catalog)
        return subscription
    }

    /// The reconciler with the worker's keys, its own port, and sweeps an hour apart (one at start), running.
    static func startReconciler(
        _ harness: PipelineHarness, serverAPI: ServerAPI
    ) throws -> (group: ServiceGroup, running: Task<Void, any Error>) {
        var settings = DemoRun.workerSettings(
            index: 9, bootstrap: harness.cluster.bootstrapServers, port: harness.port, files: harness.files,
            ledgerURL: harness.ledgerURL, jobDeadline: .seconds(30), extra: serverAPI.settings)
        settings["metrics_port"] = String(try FreeLocalPort.pick())
        settings["metrics_host"] = "127.0.0.1"
        settings["reconcile_interval_s"] = "3600"
        var sources = ConfigurationSources(table: ReconcileConfiguration.table)
        sources.addEnvironment(serverAPI.secrets)
        try sources.addFlags(settings)
        let configuration = try ReconcileConfiguration(sources)
        var logger = Logger(label: "test.reconcile")
        logger.logLevel = .error
        let group = try ReconcileRuntime(configuration: configuration, logger: logger).serviceGroup()
        return (group, Task { try await group.run() })
    }

    @Test("the REFUND that never arrived is found, published as the gateway's job and revokes the grant")
    func recoversDroppedRefund() async throws {
        try await PipelineHarness.with { harness in
            let serverAPI = try Self.startWorker(harness)
            try await harness.waitUntilAssigned()
            let (purchase, transactionID) = try harness.genuineJob(account: "acct-rec", format: .signedTransaction)
            try await harness.submit([purchase])
            try await harness.verdicts.waitForVerdicts(of: [purchase.jobID])
            #expect(harness.verdicts.byJob[purchase.jobID]?.first?.outcome == .granted)

            // Apple's attempts fail: nothing listens there (in production it would try again an hour later).
            let dead = try FreeLocalPort.pick()
            try harness.simulator.setNotificationTarget("http://127.0.0.1:\(dead)/apple/notifications")
            _ = try harness.simulator.refund(transactionId: transactionID)
            let uuid = try await Self.undeliveredNotification(
                "REFUND", simulatorBase: "http://127.0.0.1:\(harness.port)")
            let jobID = NotificationJob.jobIDPrefix + uuid.lowercased()
            #expect(harness.verdicts.byJob[jobID] == nil, "nothing delivered it before the sweep")

            let (group, running) = try Self.startReconciler(harness, serverAPI: serverAPI)

            try await harness.verdicts.waitForVerdicts(of: [jobID])
            let verdict = try #require(harness.verdicts.byJob[jobID]?.first)
            #expect(verdict.accountID == "acct-rec")
            #expect(verdict.outcome == .rejected)
            #expect(verdict.reason == .revoked)
            #expect(verdict.transactions.first?.transactionID == transactionID)
            // The sweep asked for failures only, and then stopped.
            let history = harness.simulator.stats.snapshot().requests["inApps/v1/notifications/history"] ?? 0
            #expect(history >= 1)

            await group.triggerGracefulShutdown()
            try await running.value
        }
    }

    @Test("a renewal Apple never notified is found by re-reading the subscription's history and granted to its owner")
    func rereadFindsRenewal() async throws {
        try await PipelineHarness.with { harness in
            let subscription = try Self.sellSubscription(harness)
            let serverAPI = try Self.startWorker(harness)
            try await harness.waitUntilAssigned()

            // A subscription whose period ended an hour ago: the ledger holds it, lapsed (billing retry, as far as
            // it knows).
            let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
            let minted = try harness.simulator.mint(
                MintRequest(
                    bundleId: DemoApp.bundleID, productId: subscription, format: .signedTransaction,
                    environment: .production, expiresDateMs: nowMs - 3_600_000,
                    purchaseDateMs: nowMs - 3_600_000 - 30 * 86_400_000))
            let original = minted.transaction.transactionId
            let purchase = ReceiptJob(
                jobID: "job-" + UUID().uuidString.lowercased(), accountID: "acct-reread",
                proof: .signedTransaction(minted.receipt), bundleID: DemoApp.bundleID, submittedAt: Date())
            try await harness.submit([purchase])
            try await harness.verdicts.waitForVerdicts(of: [purchase.jobID])
            #expect(harness.verdicts.byJob[purchase.jobID]?.first?.reason == .expired)

            // Apple renews it; no notification URL is set, so no notification is sent, and none is in Apple's
            // history of failures: only the re-read can find it.
            let renewal = try harness.simulator.renew(originalTransactionId: original)
            let expiresMs = try #require(renewal.expiresDateMs)
            let correction = "reconcile-\(renewal.transactionId)-\(expiresMs)-0"

            let (group, running) = try Self.startReconciler(harness, serverAPI: serverAPI)

            try await harness.verdicts.waitForVerdicts(of: [correction])
            let verdict = try #require(harness.verdicts.byJob[correction]?.first)
            #expect(verdict.accountID == "acct-reread")
            #expect(verdict.outcome == .granted)
            #expect(verdict.transactions.map(\.transactionID) == [renewal.transactionId])

            await group.triggerGracefulShutdown()
            try await running.value
        }
    }

    @Test("a refund Apple reversed without a notification is found by the re-read and the owner's claim restored")
    func rereadFindsReversedRefund() async throws {
        try await PipelineHarness.with { harness in
            let subscription = try Self.sellSubscription(harness)
            let serverAPI = try Self.startWorker(harness)
            try await harness.waitUntilAssigned()

            // A current period, granted.
            let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
            let minted = try harness.simulator.mint(
                MintRequest(
                    bundleId: DemoApp.bundleID, productId: subscription, format: .signedTransaction,
                    environment: .production, expiresDateMs: nowMs + 20 * 86_400_000,
                    purchaseDateMs: nowMs - 10 * 86_400_000))
            let id = minted.transaction.transactionId
            let purchase = ReceiptJob(
                jobID: "job-" + UUID().uuidString.lowercased(), accountID: "acct-reversal",
                proof: .signedTransaction(minted.receipt), bundleID: DemoApp.bundleID, submittedAt: Date())
            try await harness.submit([purchase])
            try await harness.verdicts.waitForVerdicts(of: [purchase.jobID])
            #expect(harness.verdicts.byJob[purchase.jobID]?.first?.outcome == .granted)

            // Apple refunds it (no notification URL is set: nothing is sent); the app's next check of the
            // transaction finds it refunded and the ledger revokes the claim.
            let refunded = try #require(try harness.simulator.refund(transactionId: id))
            let check = ReceiptJob(
                jobID: "job-" + UUID().uuidString.lowercased(), accountID: "acct-reversal",
                proof: .transactionID(id), bundleID: DemoApp.bundleID, submittedAt: Date())
            try await harness.submit([check])
            try await harness.verdicts.waitForVerdicts(of: [check.jobID])
            #expect(harness.verdicts.byJob[check.jobID]?.first?.reason == .revoked)

            // Apple reverses the refund; its REFUND_REVERSED is sent nowhere. Only the re-read can find it.
            _ = try harness.simulator.reverseRefund(transactionId: id)
            let revokedMs = try #require(refunded.revocationDateMs)
            let expiresMs = try #require(minted.transaction.expiresDateMs)
            let correction = CorrectionJob.reversalJobID(
                transactionID: id, expiresDate: Date(timeIntervalSince1970: Double(expiresMs) / 1000),
                reversedRevocation: Date(timeIntervalSince1970: Double(revokedMs) / 1000))

            let (group, running) = try Self.startReconciler(harness, serverAPI: serverAPI)

            try await harness.verdicts.waitForVerdicts(of: [correction])
            let verdict = try #require(harness.verdicts.byJob[correction]?.first)
            #expect(verdict.accountID == "acct-reversal")
            #expect(verdict.outcome == .alreadyGranted)
            #expect(verdict.transactions.map(\.transactionID) == [id])
            #expect(verdict.transactions.first?.revokedAt == nil)
            // Decided once: one verdict for the correction.
            #expect(harness.verdicts.byJob[correction]?.count == 1)

            await group.triggerGracefulShutdown()
            try await running.value
        }
    }
}
