import AppleClients
import CodedErrors
import Decision
import Foundation
import Kafka
import Ledger
import Logging
import Messages
import Observability
import Operations
import RateLimiter
import Receipts
import ServiceLifecycle
import StoreHTTP
import Synchronization
import UnixSignals

/// `verify-worker run`: builds every part from a ``WorkerConfiguration`` as a `Service` and runs them in one
/// `ServiceGroup` until told to stop.
///
/// Parts, in start order (the group stops them in reverse): the producer, the HTTP engine to Apple, the operations
/// port (`/healthz`, `/readyz`, `/metrics`), the ledger (its connection pool) and its probe, the call gate's
/// cluster-wide throttle exchange on the control topic, the broker watch, and the ``WorkerLoop``. Stopping
/// (SIGTERM, SIGINT, or a fatal fault) drains the worker first and flushes the producer last (``WorkerService``, ``ProducerService``).
public struct WorkerRuntime: Sendable {
    /// Why the runtime stopped.
    public enum Exit: Sendable, Equatable {
        /// Asked to stop; drained.
        case drained
        /// A fault the worker cannot work around (exit non-zero so the orchestrator restarts it).
        case fatal(String)
    }

    public let configuration: WorkerConfiguration
    let logger: Logger
    /// Whether to serve the operations port (the command does; in-process tests may not).
    let serveOperations: Bool

    public init(configuration: WorkerConfiguration, logger: Logger, serveOperations: Bool = true) {
        self.configuration = configuration
        self.logger = logger
        self.serveOperations = serveOperations
        // Before any part creates a metric: swift-metrics binds each metric to the factory in force at creation.
        if serveOperations { _ = MetricsBootstrap.registry() }
    }

    /// Runs until `stop` returns (or a fatal fault), then drains. Throws for a configuration the parts refuse at
    /// start (an unreadable catalog, a bad key); never for a fault while running.
    ///
    /// - Parameters:
    ///   - health: the worker's state as `/readyz` sees it (given by callers that watch it, like the demo).
    ///   - started: called once every setting has been accepted and the operations port listens, before the worker
    ///     waits for its ledger and joins its group; a configuration error is thrown before it, never after.
    public func run(
        health: WorkerHealth = WorkerHealth(), started: @escaping @Sendable () -> Void = {},
        until stop: @escaping @Sendable () async -> Void
    ) async throws -> Exit {
        let group = try serviceGroup(health: health, started: started)
        let stopper = Task {
            await stop()
            await group.triggerGracefulShutdown()
        }
        defer { stopper.cancel() }
        return try await run(group)
    }

    /// Runs until SIGTERM or SIGINT (the group's graceful-shutdown signals) or a fatal fault, then drains.
    /// `stopping` runs first when the group begins to stop (the command arms its last-resort deadline there).
    public func runHandlingSignals(
        started: @escaping @Sendable () -> Void = {}, stopping: @escaping @Sendable () -> Void = {}
    ) async throws -> Exit {
        let group = try serviceGroup(
            health: WorkerHealth(), started: started, signals: [.sigterm, .sigint],
            last: [
                BackgroundService(name: "shutdown-deadline", work: { try await gracefulShutdown() }, cleanUp: stopping)
            ])
        return try await run(group)
    }

    private func run(_ group: ServiceGroup) async throws -> Exit {
        let exit: Exit
        do {
            try await group.run()
            exit = .drained
        } catch let fault as WorkerService.Fault {
            exit = .fatal(fault.reason)
        }
        logger.notice("worker: stopped", metadata: [LogKeys.exitStatus: "\(exit)"])
        return exit
    }

    /// Every part of the worker as a service, in start order; the group stops them in reverse: the pipeline (drain
    /// and commit), the watchers, the throttle exchange, the ledger, the operations port, and the producer (flush and
    /// close) last.
    public func serviceGroup(
        health: WorkerHealth, started: @escaping @Sendable () -> Void, signals: [UnixSignal] = [],
        last: [any Service] = []
    ) throws -> ServiceGroup {
        let (catalog, trust) = try configuration.loadDecisionInputs()
        let refundPolicy = try loadRefundPolicy(catalog: catalog)
        // Metrics objects bind to the factory bootstrapped when they are created (the worker's counters and the
        // gate's gauges are created below, once): bootstrap before any part exists, or they stay silent.
        let registry = serveOperations ? MetricsBootstrap.registry() : nil
        let ledger = try LedgerFactory.make(url: configuration.ledgerURL, logger: logger) {
            ConfigurationError(key: "ledger_url", problem: $0)
        }
        let engine = try configuration.storeHTTPEngine()
        let consumerConfiguration = consumerConfiguration()
        let (producer, exchange) = try makeKafkaClients(consumerConfiguration)
        let gate = AppleCallGate(
            configuration: gateConfiguration(), clock: ContinuousClock(), publish: exchange.publish)
        let decisionConfiguration = JobProcessor.Configuration(
            catalog: catalog, allowSandbox: configuration.allowSandbox,
            jobDeadline: configuration.jobDeadline, ledgerRetryOverdue: configuration.ledgerRetryOverdue,
            appAppleID: configuration.appleAppAppleID,
            proofEnvironments: configuration.allowSandbox ? [.production, .sandbox] : [.production],
            allowXcode: configuration.allowXcode)
        let analyzer = ReceiptAnalyzer(
            trust: trust,
            policy: AnalysisPolicy(
                allowXcode: configuration.allowXcode, maximumDecodedSize: configuration.maximumReceiptBytes),
            isWorthVerifying: decisionConfiguration.proofPolicy.isWorthVerifying(bundleID:))
        let credentials = try AppCredentials.load(catalog: catalog, configuration: configuration)
        let apps = AppleAppClients(
            credentials: credentials, transport: engine,
            verifyReceipt: VerifyReceiptConfiguration(
                productionURL: configuration.verifyReceiptProductionURL,
                sandboxURL: configuration.verifyReceiptSandboxURL, requestTimeout: configuration.appleRequestTimeout),
            serverAPI: AppStoreServerAPIConfiguration(
                productionBaseURL: configuration.serverAPIProductionURL,
                sandboxBaseURL: configuration.serverAPISandboxURL, requestTimeout: configuration.appleRequestTimeout),
            analyzer: analyzer, logger: logger)
        let appleCaller = AppleCaller(gate: gate, retryPolicy: RetryPolicy(maximumAttempts: 50), logger: logger)
        let googlePlay = try makeGooglePlay(catalog: catalog, transport: engine, health: health, ledger: ledger)
        let consumptionLookup = makeConsumptionLookup(transport: engine)
        let followUps = try makeFollowUps(
            serverAPIs: apps.apps.compactMap(\.serverAPI), caller: appleCaller, ledger: ledger, catalog: catalog,
            refundPolicy: refundPolicy, consumptionLookup: consumptionLookup)
        let processor = JobProcessor(
            analyzer: analyzer, ledger: ledger,
            apple: appleCaller,
            verifyReceipt: apps.apps[0].verifyReceipt, serverAPI: apps.apps[0].serverAPI,
            configuration: decisionConfiguration,
            health: health, logger: logger,
            coalescing: AppleCoalescingConfiguration(
                enabled: configuration.coalesceAppleCalls, leaseDuration: configuration.verificationLease,
                holder: AppleCoalescingConfiguration.uniqueHolder(prefix: configuration.workerID)),
            apps: apps, googlePlay: googlePlay.store)
        let fatal = OneShot<String>()
        let listening = OneShot<Bool>()
        let migrated = OneShot<Void>()
        let logger = self.logger
        let configuration = self.configuration

        var services: [any Service] = [
            ProducerService(
                producer: producer, outputTopics: [configuration.verdictsTopic, configuration.deadLetterTopic],
                after: listening, logger: logger),
            // The HTTP engine outlives every part that calls Apple.
            BackgroundService(
                name: "apple-http", work: { try await gracefulShutdown() }, cleanUp: { engine.shutdown() }),
        ]
        if let registry {
            services.append(
                OperationsService(
                    host: configuration.metricsHost, port: configuration.metricsPort, registry: registry,
                    logger: logger, listening: listening,
                    declaredMetrics: MetricNames.names(of: [.worker, .appleCallGate])
                ) {
                    let reasons = health.notReadyReasons
                    return Readiness(isReady: reasons.isEmpty, reasons: reasons)
                })
        } else {
            listening.resolve(true)
        }
        services += [
            BackgroundService(name: "ledger", work: { try await ledger.run() }),
            BackgroundService(
                name: "ledger-probe", work: { try await self.probeLedger(ledger, health: health, migrated: migrated) },
                after: listening),
            BackgroundService(
                name: "throttle-exchange", work: { try await exchange.run { gate.ingest(signalJSON: $0) } },
                after: listening),
            BackgroundService(
                name: "throttle-publisher", work: { try await gate.runSignalPublisher() }, cleanUp: { gate.shutDown() },
                after: listening),
            BackgroundService(
                name: "broker-watch",
                work: { await producer.watchBrokers(logger: logger) { allDown in health.brokers(allDown: allDown) } },
                after: listening),
        ]
        // Google Play's purchases are acknowledged (or consumed) after their grant: Google refunds one left three days.
        let playFollowUps: GooglePlayFollowUps? =
            catalog.playApps.isEmpty
            ? nil
            : GooglePlayFollowUps.make(
                ledger: ledger, catalog: catalog, calls: googlePlay.clients,
                holder: AppleCoalescingConfiguration.uniqueHolder(prefix: configuration.workerID),
                answersRefundReviews: configuration.googlePlayRefundReviewAnswers, refundPolicy: refundPolicy,
                claimLease: configuration.followUpClaimLease, sweepInterval: configuration.followUpSweepInterval,
                logger: logger, consumptionLookup: consumptionLookup)
        if configuration.googlePlayRefundReviewAnswers, catalog.playApps.isEmpty {
            throw ConfigurationError(
                key: "google_play_refund_review_answers", problem: "needs play_apps in the catalog")
        }
        let afterDelivery = VerdictFollowUps.afterDelivery(appStore: followUps, googlePlay: playFollowUps)
        let followsUp = VerdictFollowUps.followsUp(appStore: followUps, googlePlay: playFollowUps)
        if let playFollowUps {
            // Before the pipeline in the list, so stopped after its drain: the last grants' calls are recorded.
            services.append(
                BackgroundService(
                    name: "google-play-follow-ups", work: { await playFollowUps.run() }, after: listening))
        }
        if let followUps {
            // Before the pipeline in the list, so stopped after its drain: the last verdicts' calls are queued.
            services.append(
                BackgroundService(name: "apple-follow-ups", work: { await followUps.run() }, after: listening))
        }
        services += [
            WorkerService(
                makeWorker: {
                    try WorkerLoop(
                        consumerConfiguration: consumerConfiguration, producer: producer, decider: processor,
                        configuration: WorkerLoop.Configuration(
                            topics: WorkerTopics(
                                jobs: configuration.jobsTopic, verdicts: configuration.verdictsTopic,
                                deadLetters: configuration.deadLetterTopic),
                            maximumInFlight: configuration.maximumInFlight,
                            maximumMessageBytes: configuration.maximumMessageBytes,
                            maximumProduceBytes: configuration.maximumProduceBytes,
                            deliveryTimeout: configuration.deliveryTimeout),
                        health: health, logger: logger, onFatal: { fatal.resolve($0) },
                        afterDelivery: afterDelivery, followsUp: followsUp)
                },
                listening: listening, migrated: migrated, fatal: fatal, started: started,
                drainTimeout: configuration.drainTimeout, logger: logger)
        ]
        services += last
        return ServiceGroup.command(services, signals: signals, logger: logger)
    }

    /// The producer and the throttle exchange's consumer. A property librdkafka refuses is a setting to fix,
    /// thrown as a ``ConfigurationError`` like every other one.
    private func makeKafkaClients(
        _ consumerConfiguration: KafkaConsumerConfiguration
    ) throws -> (KafkaProducer, ThrottleSignalExchange) {
        let producer: KafkaProducer
        do {
            producer = try KafkaProducer(
                configuration: KafkaProducerConfiguration(
                    bootstrapServers: configuration.brokers, maximumInFlightMessages: configuration.maximumInFlight,
                    clientID: configuration.workerID, messageMaxBytes: configuration.maximumProduceBytes,
                    properties: configuration.kafkaProperties),
                logger: logger)
        } catch {
            throw ConfigurationError(key: "kafka_properties", problem: error.message)
        }
        do {
            let exchange = try ThrottleSignalExchange(
                producer: producer, consumerConfiguration: consumerConfiguration, topic: configuration.controlTopic,
                workerID: configuration.workerID, logger: logger)
            return (producer, exchange)
        } catch {
            throw ConfigurationError(key: "kafka_properties", problem: error.message)
        }
    }

    /// The consumers' settings (jobs and control topic): `kafka_prefetch_kbytes` bounds librdkafka's prefetch queue,
    /// `kafka_properties` (applied after) may override anything.
    public func consumerConfiguration() -> KafkaConsumerConfiguration {
        var properties = ["queued.max.messages.kbytes": String(configuration.kafkaPrefetchKilobytes)]
        properties.merge(configuration.kafkaProperties) { _, override in override }
        return KafkaConsumerConfiguration(
            bootstrapServers: configuration.brokers, groupID: configuration.groupID,
            revokeDeadline: configuration.drainTimeout, clientID: configuration.workerID, properties: properties)
    }

    /// Migrates once reachable, then checks the ledger every few seconds for `/readyz`.
    ///
    /// Until the first migration succeeds the worker does not join its group (see `run`): a worker whose ledger is
    /// unreachable would otherwise take partitions from healthy workers and only fail their jobs. It retries with
    /// backoff (0.5 s doubling to 15 s) and logs the first failure, then at most every 30 s.
    private func probeLedger(_ ledger: any Ledger, health: WorkerHealth, migrated signal: OneShot<Void>) async throws {
        var migrated = false
        var failures = 0
        var backoff: Duration = .milliseconds(500)
        var lastLog: ContinuousClock.Instant?
        let clock = ContinuousClock()
        while !Task.isCancelled {
            do {
                if !migrated {
                    try await ledger.migrate()
                    migrated = true
                    signal.resolve(())
                } else {
                    _ = try await ledger.schemaVersions()
                }
                health.ledgerSucceeded()
                if failures > 0 {
                    logger.notice("ledger: reachable again", metadata: [LogKeys.failedAttempts: "\(failures)"])
                }
                failures = 0
                backoff = .milliseconds(500)
            } catch let error as LedgerError where !error.isRetryable {
                health.ledgerFailed()
                health.fail("ledger: \(error.code.rawValue)")
                logger.critical("ledger: unusable", metadata: [LogKeys.error: "\(error)"])
            } catch is CancellationError {
                return
            } catch {
                failures += 1
                health.ledgerFailed()
                let now = clock.now
                if lastLog.map({ $0.duration(to: now) >= .seconds(30) }) ?? true {
                    lastLog = now
                    logger.warning(
                        migrated
                            ? "ledger: not reachable"
                            : "ledger: not reachable; the worker joins its group once it answers",
                        metadata: [LogKeys.error: "\(error)", LogKeys.failedAttempts: "\(failures)"])
                }
            }
            let pause = failures == 0 ? Duration.seconds(5) : backoff
            if failures > 0 { backoff = min(backoff * 2, .seconds(15)) }
            try await Task.sleep(for: pause)
        }
    }

    func gateConfiguration() -> AppleCallGateConfiguration {
        let verifyRate = configuration.verifyReceiptRatePerSecond
        var limits = EndpointRateLimit.appleDefaults(
            environment: .production,
            verifyReceiptRateLimit: EndpointRateLimit(ratePerSecond: verifyRate, burst: max(1, Int(verifyRate / 10))))
        let apiLimit = EndpointRateLimit(
            ratePerSecond: configuration.serverAPIRatePerSecond,
            burst: max(1, Int(configuration.serverAPIRatePerSecond / 10)))
        let lookups: Set<StoreEndpoint> = [.transactionInfo, .transactionHistory, .subscriptionStatuses]
        for endpoint in lookups { limits[endpoint] = apiLimit }
        // The other endpoints keep Apple's ratio to the lookups' 50/s (Set App Account Token 20, refunds 10…).
        let scale = configuration.serverAPIRatePerSecond / 50
        for endpoint in EndpointRateLimit.appStoreServerAPIEndpoints where !lookups.contains(endpoint) {
            guard let apple = EndpointRateLimit.appStoreServerAPI(endpoint, environment: .production) else { continue }
            let rate = apple.ratePerSecond * scale
            limits[endpoint] = EndpointRateLimit(ratePerSecond: rate, burst: max(1, Int(rate / 10)))
        }
        return AppleCallGateConfiguration(
            label: "apple", workerID: configuration.workerID, rateLimits: limits,
            concurrency: AIMDConfiguration(
                minimum: configuration.appleMinimumConcurrency, maximum: configuration.appleMaximumConcurrency,
                start: max(configuration.appleMinimumConcurrency, min(64, configuration.appleMaximumConcurrency))),
            retryBudgetRatio: configuration.retryBudgetRatio, retryBudgetMinimumPerSecond: 2,
            maximumQueuedWaiters: max(10_000, configuration.maximumInFlight))
    }

    /// The refund policy of `refund_policy_file` (nil when none is set), read and checked at start: a fault stops the
    /// worker with one line naming the file, the rule and the field (``RefundPolicyError``).
    func loadRefundPolicy(catalog: Catalog) throws(ConfigurationError) -> RefundPolicy? {
        guard let path = configuration.refundPolicyFile else { return nil }
        do {
            return try RefundPolicy.load(path: path, catalog: catalog)
        } catch {
            throw ConfigurationError(key: "refund_policy_file", problem: error.description)
        }
    }

    /// The operator's consumption lookup (``ConsumptionLookup``) on the worker's HTTP engine, when
    /// `consumption_lookup_url` is set.
    func makeConsumptionLookup(transport: any HTTPTransport) -> ConsumptionLookup? {
        guard let url = configuration.consumptionLookupURL else { return nil }
        return ConsumptionLookup(
            transport: transport,
            configuration: ConsumptionLookupConfiguration(
                url: url, token: configuration.consumptionLookupToken?.value,
                timeout: configuration.consumptionLookupTimeout),
            logger: logger)
    }

    /// The calls after a durable verdict (``AppleFollowUps``), when switched on. The configuration already refused
    /// them without a Server API key, unless the catalog lists apps: then no app with a key is refused here.
    func makeFollowUps(
        serverAPIs: [AppStoreServerAPIClient], caller: AppleCaller, ledger: any Ledger, catalog: Catalog,
        refundPolicy: RefundPolicy? = nil, consumptionLookup: ConsumptionLookup? = nil
    ) throws -> AppleFollowUps? {
        guard
            configuration.finishTransactions || configuration.consumptionAnswers
                || configuration.setAppAccountTokens
        else { return nil }
        // With several apps, each app's client in turn (the call records name no app).
        guard let serverAPI = serverAPIs.first else {
            throw ConfigurationError(
                key: configuration.finishTransactions ? "finish_transactions" : "consumption_answers",
                problem: "needs the App Store Server API key")
        }
        return AppleFollowUps(
            client: serverAPI, caller: caller, store: ledger, ledger: ledger,
            configuration: AppleFollowUpsConfiguration(
                finishTransactions: configuration.finishTransactions,
                consumptionAnswers: configuration.consumptionAnswers,
                customerConsented: configuration.consumptionCustomerConsented,
                setAppAccountTokens: configuration.setAppAccountTokens, catalog: catalog, refundPolicy: refundPolicy,
                holder: AppleCoalescingConfiguration.uniqueHolder(prefix: configuration.workerID),
                claimLease: configuration.followUpClaimLease, sweepInterval: configuration.followUpSweepInterval,
                consumptionLookup: consumptionLookup),
            logger: logger, otherApps: Array(serverAPIs.dropFirst()))
    }
}
