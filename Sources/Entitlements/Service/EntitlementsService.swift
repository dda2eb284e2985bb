import CodedErrors
import Foundation
import Kafka
import Logging
import Messages
import Observability
import Operations
import ServiceLifecycle
import Synchronization
import UnixSignals

/// `verify-worker entitlements` assembled from its configuration: the store, the projection's consumer loop, the
/// event publisher, the webhook sender and the HTTP port (API, console, probes), each a `Service` of one
/// `ServiceGroup`, listed in shutdown order reversed (the API stops first, the store last).
public final class EntitlementsService: Sendable {
    public let configuration: EntitlementsConfiguration
    public let store: any EntitlementStore
    public let api: EntitlementAPI
    public let projector: VerdictProjector
    private let publisher: EventPublisher?
    private let webhooks: WebhookSender?
    public let sweeper: ExpirationSweeper?
    private let logger: Logger
    private let migrated = OneShot<Bool>()
    private let group = Mutex<ServiceGroup?>(nil)
    private let stopRequested = Atomic<Bool>(false)

    /// Reads the catalog and the tokens file the configuration names. Throws ``ConfigurationError`` naming the key.
    public static func loadFiles(
        _ configuration: EntitlementsConfiguration,
        readFile: (String) throws -> String = { try String(contentsOfFile: $0, encoding: .utf8) }
    ) throws(ConfigurationError) -> (catalog: Catalog, tokens: AccessTokens) {
        let catalogText = try ConfigurationFile.read(configuration.catalogFile, key: "catalog_file", with: readFile)
        let catalog: Catalog
        do {
            catalog = try Catalog.load(json: Data(catalogText.utf8), for: .entitlements)
        } catch {
            throw ConfigurationError(key: "catalog_file", problem: error.description)
        }
        let tokensText = try ConfigurationFile.read(
            configuration.tokensFile, key: "entitlements_tokens_file", with: readFile)
        do {
            return (catalog, try AccessTokens(contents: tokensText))
        } catch {
            throw ConfigurationError(key: "entitlements_tokens_file", problem: error.description)
        }
    }

    /// - Parameters:
    ///   - consumerProperties: extra librdkafka properties for the consumer (tests shorten timeouts), applied
    ///     after `kafka_properties`.
    ///   - webhookTransport: how webhooks are POSTed (the command passes the project's curl engine).
    public init(
        configuration: EntitlementsConfiguration, catalog: Catalog, tokens: AccessTokens, logger: Logger,
        store: (any EntitlementStore)? = nil, consumerProperties: [String: String] = [:],
        webhookTransport: (any WebhookTransport)? = nil, now: @escaping @Sendable () -> Date = { Date() },
        onBatchWritten: (@Sendable (_ recordMilliseconds: [Int64], _ writtenAt: Date) -> Void)? = nil
    ) throws {
        self.configuration = configuration
        self.logger = logger
        let store = try store ?? EntitlementStoreFactory.make(url: configuration.storeURL, logger: logger)
        self.store = store
        var publisher: EventPublisher?
        if !configuration.eventsTopic.isEmpty {
            let producer = try KafkaProducer(
                configuration: KafkaProducerConfiguration(
                    bootstrapServers: configuration.brokers, clientID: "verify-entitlements",
                    properties: configuration.kafkaProperties),
                logger: logger)
            publisher = EventPublisher(
                producer: producer, topic: configuration.eventsTopic, store: store, logger: logger, now: now)
        }
        self.publisher = publisher
        let eventPublisher = publisher
        if !configuration.webhookURLs.isEmpty, let secret = configuration.webhookSecret, let webhookTransport {
            webhooks = WebhookSender(
                store: store, transport: webhookTransport, secret: secret,
                maximumAttempts: configuration.webhookMaximumAttempts, logger: logger, now: now)
        } else {
            webhooks = nil
        }
        let webhookSender = webhooks
        var properties = configuration.kafkaProperties
        properties.merge(consumerProperties) { _, new in new }
        var projectorConfiguration = VerdictProjector.Configuration(
            topic: configuration.verdictsTopic, batchSize: configuration.batchSize,
            drainTimeout: configuration.drainTimeout, webhookURLs: webhooks == nil ? [] : configuration.webhookURLs)
        projectorConfiguration.onBatchWritten = onBatchWritten
        projectorConfiguration.rejectionsPerAccount = configuration.rejectionsPerAccount
        projector = try VerdictProjector(
            configuration: projectorConfiguration,
            consumerConfiguration: KafkaConsumerConfiguration(
                bootstrapServers: configuration.brokers, groupID: configuration.groupID,
                clientID: "verify-entitlements", properties: properties),
            store: store, catalog: catalog,
            reader: VerdictReader(maximumMessageBytes: configuration.maximumMessageBytes),
            logger: logger, now: now,
            onEvents: {
                eventPublisher?.poke()
                webhookSender?.poke()
            })
        sweeper =
            configuration.expirySweepInterval == .zero
            ? nil
            : ExpirationSweeper(
                store: store, catalog: catalog, interval: configuration.expirySweepInterval,
                webhookURLs: webhooks == nil ? [] : configuration.webhookURLs, logger: logger, now: now,
                onEvents: {
                    eventPublisher?.poke()
                    webhookSender?.poke()
                })
        let projector = self.projector
        let migrated = self.migrated
        api = EntitlementAPI(
            configuration: .init(
                host: configuration.host, port: configuration.port,
                limits: .init(perCaller: configuration.rateLimit, callerBurst: configuration.rateBurst)),
            store: store, catalog: catalog, tokens: tokens, logger: logger, now: now,
            readiness: {
                guard migrated.value == true else { return .notReady("store_not_migrated") }
                let health = projector.health
                return Readiness(isReady: health.ready, reasons: health.reasons)
            })
    }

    /// The service's parts in their group's order (a group stops them in reverse: the API first, then the
    /// projection, whose batch in hand finishes and is committed, the publishers, and the store last). The schema is
    /// migrated first, retried while the database is unreachable (the port answers meanwhile, not ready).
    /// `verify-worker entitlements` runs them in a group of their own (``run(handlingSignals:)``); the demo in its own
    /// group, next to its other parts.
    public var services: [any Service] {
        var services: [any Service] = [
            BackgroundService(name: "store", work: { [store] in try await store.run() }),
            MigrationService(store: store, logger: logger, done: migrated),
        ]
        // Every part that reads the tables starts once they exist: on a fresh store, a part started before the
        // migration would read a table that is not there yet.
        if let publisher { services.append(GatedService(gate: migrated, service: publisher)) }
        if let webhooks { services.append(GatedService(gate: migrated, service: webhooks)) }
        if let sweeper { services.append(GatedService(gate: migrated, service: sweeper)) }
        services.append(GatedService(gate: migrated, service: projector))
        services.append(api)
        return services
    }

    /// Runs every part until SIGTERM/SIGINT (with `handlingSignals`) or cancellation.
    public func run(handlingSignals: Bool = true) async throws {
        let group = ServiceGroup.command(
            services, signals: handlingSignals ? [.sigterm, .sigint] : [], logger: logger)
        self.group.withLock { $0 = group }
        if stopRequested.load(ordering: .acquiring) { await group.triggerGracefulShutdown() }
        try await group.run()
    }

    /// Stops as on SIGTERM: the API first, then the projection (its batch in hand finishes and is committed), the
    /// publishers (a last round), and the store.
    public func shutdown() async {
        stopRequested.store(true, ordering: .releasing)
        let group = self.group.withLock { $0 }
        await group?.triggerGracefulShutdown()
    }

    /// The API's bound port once it listens.
    public func waitUntilListening() async -> Int? { await api.waitUntilListening() }

    /// Waits until the schema is migrated (false if the service stopped first).
    public func waitUntilMigrated() async -> Bool { await migrated.wait() ?? false }
}

/// Migrates the schema once, retrying with backoff while the database is unreachable, then idles until shutdown.
struct MigrationService: Service {
    let store: any EntitlementStore
    let logger: Logger
    let done: OneShot<Bool>

    func run() async throws {
        try await cancelWhenGracefulShutdown { try await migrateUntilDone() }
        if done.value == true { try? await gracefulShutdown() }
    }

    private func migrateUntilDone() async throws {
        var delay: Duration = .milliseconds(200)
        while true {
            do {
                try await store.migrate()
                done.resolve(true)
                break
            } catch let error as EntitlementStoreError where error.isRetryable {
                logger.warning(
                    "entitlements: cannot migrate the store yet; retrying", metadata: [LogKeys.error: "\(error)"]
                )
                do {
                    try await Task.sleep(for: delay)
                } catch {
                    done.resolve(false)
                    return
                }
                delay = min(delay * 2, .seconds(5))
            } catch {
                done.resolve(false)
                throw error
            }
        }
    }
}
