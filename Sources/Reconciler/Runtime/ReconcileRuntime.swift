import AppleClients
import Decision
import Foundation
import GooglePlay
import GooglePlayClients
import Kafka
import Ledger
import Logging
import Messages
import Observability
import Operations
import Receipts
import ServiceLifecycle
import StoreHTTP
import Synchronization
import UnixSignals
import Worker

/// `verify-worker reconcile`: builds the reconciler's parts as `Service`s and runs them in one `ServiceGroup`.
///
/// Parts, in start order (the group stops them in reverse): the producer of recovered jobs (flushed last), the HTTP
/// engine to Apple, the operations port, the ledger, and the ``NotificationReconciler`` (which migrates the ledger
/// first, then sweeps every interval and gives its lease up when stopped).
public struct ReconcileRuntime: Sendable {
    public let configuration: ReconcileConfiguration
    let logger: Logger

    public init(configuration: ReconcileConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        _ = MetricsBootstrap.registry()
    }

    /// Runs until SIGTERM or SIGINT. `stopping` runs when the group begins to stop.
    public func runHandlingSignals(
        started: @escaping @Sendable () -> Void = {}, stopping: @escaping @Sendable () -> Void = {}
    ) async throws {
        let group = try serviceGroup(
            started: started, signals: [.sigterm, .sigint],
            last: [
                BackgroundService(name: "shutdown-deadline", work: { try await gracefulShutdown() }, cleanUp: stopping)
            ])
        try await group.run()
        logger.notice("reconcile: stopped")
    }

    /// Every part as a service, in start order.
    public func serviceGroup(
        started: @escaping @Sendable () -> Void = {}, signals: [UnixSignal] = [], last: [any Service] = []
    ) throws -> ServiceGroup {
        let worker = configuration.worker
        let (catalog, trust) = try worker.loadDecisionInputs()
        let registry = MetricsBootstrap.registry()
        let ledger = try LedgerFactory.make(url: worker.ledgerURL, logger: logger) {
            ConfigurationError(key: "ledger_url", problem: $0)
        }
        let engine = try worker.storeHTTPEngine()
        let analyzer = ReceiptAnalyzer(
            trust: trust, policy: AnalysisPolicy(allowXcode: false, maximumDecodedSize: worker.maximumReceiptBytes),
            isWorthVerifying: ProofPolicy(catalog: catalog).isWorthVerifying(bundleID:))
        let credentials = try AppCredentials.load(catalog: catalog, configuration: worker)
        let apps = AppleAppClients(
            credentials: credentials, transport: engine, verifyReceipt: VerifyReceiptConfiguration(),
            serverAPI: AppStoreServerAPIConfiguration(
                productionBaseURL: worker.serverAPIProductionURL, sandboxBaseURL: worker.serverAPISandboxURL,
                requestTimeout: worker.appleRequestTimeout),
            analyzer: analyzer, logger: logger)
        // A catalog of Play apps only has no App Store history to read: its reconciler sweeps Google alone.
        let sweeps =
            Self.isPlayOnly(catalog) ? [] : try Self.sweeps(of: credentials, settings: configuration.reconciler)
        let producer: KafkaProducer
        do {
            producer = try KafkaProducer(
                configuration: KafkaProducerConfiguration(
                    bootstrapServers: worker.brokers, clientID: worker.workerID + "-reconcile",
                    messageMaxBytes: worker.maximumProduceBytes, properties: worker.kafkaProperties),
                logger: logger)
        } catch {
            throw ConfigurationError(key: "kafka_properties", problem: error.message)
        }
        // `apps` lists the credentials' apps in their order; a sweep's app has a key, so it has a client.
        let reconcilers = zip(sweeps, apps.apps).compactMap {
            settings, app -> NotificationReconciler<ContinuousClock>? in
            guard let client = app.serverAPI else { return nil }
            var appLogger = self.logger
            if let app = settings.app { appLogger[metadataKey: LogKeys.appBundleID] = "\(app)" }
            return NotificationReconciler(
                configuration: settings, store: ledger, source: client,
                sink: KafkaRecoveredJobSink(producer: producer, topic: worker.jobsTopic), clock: ContinuousClock(),
                holder: "\(worker.workerID)-\(ProcessInfo.processInfo.processIdentifier)", logger: appLogger,
                // Both ledgers keep re-reads; `reconcile_reread_interval_s=0` turns them off. With several apps each
                // app's reconciler re-reads its own app's subscriptions (each names its app) with its own key.
                rereadStore: configuration.rereadsEnabled ? ledger : nil,
                historySource: client)
        }
        let play = try googlePlay(
            catalog: catalog, ledger: ledger, transport: engine,
            sink: KafkaRecoveredJobSink(producer: producer, topic: worker.jobsTopic))
        let listening = OneShot<Bool>()
        let ledgerReady = ReadinessFlag()
        let logger = self.logger

        let services: [any Service] =
            [
                ProducerService(producer: producer, outputTopics: [worker.jobsTopic], after: listening, logger: logger),
                BackgroundService(
                    name: "apple-http", work: { try await gracefulShutdown() }, cleanUp: { engine.shutdown() }),
                OperationsService(
                    host: worker.metricsHost, port: worker.metricsPort, registry: registry, logger: logger,
                    listening: listening, declaredMetrics: MetricNames.names(of: [.reconciler])
                ) {
                    ledgerReady.isSet
                        ? Readiness(isReady: true, reasons: [])
                        : Readiness(isReady: false, reasons: ["ledger_unready"])
                },
                BackgroundService(name: "ledger", work: { try await ledger.run() }),
                BackgroundService(
                    name: "reconciler",
                    work: {
                        started()
                        try await Self.migrate(ledger, logger: logger)
                        ledgerReady.set()
                        await withDiscardingTaskGroup { group in
                            for reconciler in reconcilers { group.addTask { await reconciler.run() } }
                            if let play { group.addTask { await play.run() } }
                        }
                    },
                    after: listening),
            ] + last
        return ServiceGroup.command(services, signals: signals, logger: logger)
    }

    /// One sweep per app, in the catalog's order: each with its own Server API key (Apple keeps a notification history
    /// per app, and limits each app's requests on its own), lease and checkpoint row
    /// (`notification-history/<bundle id>`, its metrics labelled by app). A single app keeps today's row and labels.
    static func sweeps(
        of credentials: AppCredentials, settings: ReconcilerConfiguration
    ) throws -> [ReconcilerConfiguration] {
        let several = credentials.apps.count > 1
        return try credentials.apps.map { app in
            guard app.serverAPIKey != nil else {
                throw ConfigurationError(
                    key: several ? "catalog_file" : "server_api_key",
                    problem: "required by reconcile" + (several ? ": app \(app.bundleID) has no server_api" : ""))
            }
            var sweep = settings
            if several {
                sweep.name += "/" + app.bundleID
                sweep.app = app.bundleID
            }
            return sweep
        }
    }

    /// The Google Play half: each Play app's voided-purchases sweep (its client built as `run` builds it, with the
    /// reconciler's share of the quotas in its gate) and the re-reads, sharing one ``GooglePlayQuotaShare``; nil when
    /// the catalog has no Play app.
    func googlePlay(
        catalog: Catalog, ledger: any Ledger, transport: any HTTPTransport, sink: any RecoveredJobSink
    ) throws -> GooglePlayReconciler<ContinuousClock>? {
        guard !catalog.playApps.isEmpty else { return nil }
        let worker = configuration.worker
        let clients: GooglePlayAppClients
        do {
            clients = try GooglePlayAppClients.load(
                catalog: catalog,
                settings: GooglePlayAPISettings(
                    api: GooglePlayAPIConfiguration(
                        baseURL: worker.googlePlayAPIURL, tokenURL: worker.googlePlayTokenURL,
                        requestTimeout: worker.appleRequestTimeout),
                    dailyQuota: max(1, Int(configuration.googlePlayQuotaShare * Double(worker.googlePlayDailyQuota))),
                    minuteQuota: configuration.googlePlayCallsPerMinute, workerID: worker.workerID + "-reconcile"),
                transport: transport, logger: logger)
        } catch {
            throw ConfigurationError(key: "catalog_file", problem: error.description)
        }
        let clock = ContinuousClock()
        let quota = GooglePlayQuotaShare(callsPerMinute: configuration.googlePlayCallsPerMinute, clock: clock)
        let holder = "\(worker.workerID)-\(ProcessInfo.processInfo.processIdentifier)"
        let productType: @Sendable (String) async -> Int? = { token in
            guard let claims = try? await ledger.subscriptionClaims(originalTransactionID: token), !claims.isEmpty
            else { return nil }
            return claims.contains { $0.productType == .autoRenewable } ? 1 : 2
        }
        let sweeps = catalog.playApps.compactMap { app -> GooglePlayVoidedSweep<ContinuousClock>? in
            guard let client = clients.clients[app.packageName] else { return nil }
            return GooglePlayVoidedSweep(
                packageName: app.packageName, settings: configuration.googlePlay, store: ledger, source: client,
                sink: sink, quota: quota, clock: clock, holder: holder, logger: logger, productType: productType)
        }
        let rereads =
            configuration.rereadsEnabled
            ? GooglePlayRereads(
                packages: catalog.playApps.map(\.packageName), settings: configuration.googlePlay, store: ledger,
                sink: sink, quota: quota, clock: clock, holder: holder, logger: logger) : nil
        return GooglePlayReconciler(
            sweeps: sweeps, rereads: rereads, store: ledger, interval: configuration.reconciler.interval, clock: clock,
            logger: logger)
    }

    /// A catalog that sells on Google Play only: no App Store bundle id, at least one Play app.
    static func isPlayOnly(_ catalog: Catalog) -> Bool {
        catalog.bundleIDs.isEmpty && catalog.apps.isEmpty && !catalog.playApps.isEmpty
    }

    /// The ledger rows (lease and checkpoint) the sweeps of this configuration use, one per app.
    public func reconcilerNames() throws -> [String] {
        let (catalog, _) = try configuration.worker.loadDecisionInputs()
        let credentials = try AppCredentials.load(catalog: catalog, configuration: configuration.worker)
        guard !Self.isPlayOnly(catalog) else { return [] }
        return try Self.sweeps(of: credentials, settings: configuration.reconciler).map(\.name)
    }

    /// Migrates once the ledger answers (the reconciler's table may be newer than the workers'), retrying with
    /// backoff from 0.5 s to 15 s until cancelled.
    static func migrate(_ ledger: any Ledger, logger: Logger) async throws {
        var backoff: Duration = .milliseconds(500)
        var logged = false
        while true {
            do {
                try await ledger.migrate()
                return
            } catch {
                if !logged {
                    logger.warning("reconcile: ledger unreachable; retrying", metadata: [LogKeys.error: "\(error)"])
                    logged = true
                }
            }
            try await Task.sleep(for: backoff)
            backoff = min(backoff * 2, .seconds(15))
        }
    }
}

/// Set once, read by `/readyz`.
final class ReadinessFlag: Sendable {
    private let value = Mutex(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
}
