import AppleClients
import AppleSimulator
import Crypto
import Demo
import Foundation
import Ledger
import Logging
import Messages
import RateLimiter
import Receipts
import Reconciler
import StoreHTTP
import Synchronization
import Traffic

/// `verify-worker bench reconcile`: one sweep of `verify-worker reconcile` over a simulator whose
/// history holds `notifications` failed deliveries (every attempt dropped), through the real App Store Server API
/// client, a real SQLite ledger (lease and checkpoint) and a counting sink in place of Kafka. Reports the history
/// requests Apple saw against the pages (the target: no more calls than pages) and the request rate against the
/// budget (`requestsPerSecond`).
public enum ReconcileBenchmark {
    public struct Result: Sendable, Codable {
        public var notifications: Int
        public var recovered: Int
        public var pages: Int
        /// History requests the simulator answered (its own count).
        public var historyRequests: Int
        public var budgetRequestsPerSecond: Double
        /// Requests over the sweep's wall time, first request to last answer.
        public var achievedRequestsPerSecond: Double
        public var sweepSeconds: Double
        /// Seconds to mint the purchases and let every first attempt fail (setup, not the sweep).
        public var setupSeconds: Double
        public var result: String
    }

    /// A sink that only counts (the benchmark measures the sweep, not Kafka).
    final class CountingSink: RecoveredJobSink {
        let count = Atomic(0)
        func publish(_ job: ReceiptJob) async throws { count.add(1, ordering: .relaxed) }
    }

    public static func run(notifications: Int, requestsPerSecond: Double) async throws -> Result {
        var configuration = AppleSimulatorConfiguration()
        configuration.logger.logLevel = .critical
        // Nothing listens at port 9, and every attempt is dropped before sending: first attempts fail at once, and
        // their retries are an hour away (production schedule).
        configuration.notificationURL = "http://127.0.0.1:9/apple"
        let simulator = try AppleSimulator(configuration: configuration)
        var faults = FaultPlan()
        faults.notificationDropRatio = 1
        simulator.setFaults(faults)
        var quiet = Logger(label: "bench.reconcile")
        quiet.logLevel = .error
        return try await HarnessServices.run([SimulatorService(simulator)], logger: quiet) {
            let port = try await simulator.waitUntilReady()
            let files = try DemoFiles(simulator: simulator)
            defer { files.remove() }

            let clock = ContinuousClock()
            let setupStart = clock.now
            for _ in 0..<notifications {
                _ = try simulator.mint(
                    MintRequest(
                        bundleId: DemoApp.bundleID, productId: "com.example.verifyworker.coins100",
                        format: .signedTransaction,
                        environment: .production))
            }
            while simulator.stats.snapshot().notifications.failed < notifications {
                try await Task.sleep(for: .milliseconds(50))
            }
            let setup = clock.now - setupStart

            var trust = TrustStore.apple
            for anchor in files.anchors {
                trust = trust.adding(anchors: try TrustStore.loadCertificates(contentsOf: anchor))
            }
            let engine = try CurlHTTPEngine()
            defer { engine.shutdown() }
            let key = AppStoreConnectKey(
                keyID: "BENCHKEY", issuerID: "bench", bundleID: DemoApp.bundleID, privateKey: P256.Signing.PrivateKey())
            var logger = Logger(label: "bench.reconcile")
            logger.logLevel = .error
            let client = AppStoreServerAPIClient(
                transport: engine,
                configuration: AppStoreServerAPIConfiguration(
                    productionBaseURL: "http://127.0.0.1:\(port)", sandboxBaseURL: "http://127.0.0.1:\(port)/sandbox"),
                signer: AppStoreTokenSigner(key: key),
                verifier: ReceiptsPayloadVerifier(analyzer: ReceiptAnalyzer(trust: trust), bundleID: DemoApp.bundleID),
                logger: logger)
            let sink = CountingSink()
            var settings = ReconcilerConfiguration()
            settings.requestsPerSecond = requestsPerSecond
            settings.leaseDuration = .seconds(600)
            let reconcilerSettings = settings
            let reconcilerLogger = logger
            return try await LedgerFactory.withLedger(
                url: "sqlite:" + files.ledger.path, configuration: LedgerConfiguration()
            ) { ledger in
                let reconciler = NotificationReconciler(
                    configuration: reconcilerSettings, store: ledger, source: client, sink: sink,
                    clock: ContinuousClock(), holder: "bench", logger: reconcilerLogger)
                let before = simulator.stats.snapshot().requests["inApps/v1/notifications/history"] ?? 0
                let started = clock.now
                let outcome = await reconciler.sweep()
                let elapsed = clock.now - started
                let requests = (simulator.stats.snapshot().requests["inApps/v1/notifications/history"] ?? 0) - before
                var pages = 0
                var text = "\(outcome)"
                if case .completed(_, let swept, _) = outcome {
                    pages = swept
                    text = "completed"
                }
                let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
                return Result(
                    notifications: notifications, recovered: sink.count.load(ordering: .relaxed), pages: pages,
                    historyRequests: requests, budgetRequestsPerSecond: requestsPerSecond,
                    achievedRequestsPerSecond: seconds > 0 ? Double(requests) / seconds : 0, sweepSeconds: seconds,
                    setupSeconds: Double(setup.components.seconds)
                        + Double(setup.components.attoseconds) * 1e-18,
                    result: text)
            }
        }
    }
}

/// A benchmark that could not run as set up.
struct BenchmarkFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
