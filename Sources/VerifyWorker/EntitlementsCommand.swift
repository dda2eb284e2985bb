import AppleClients
import ArgumentParser
import CodedErrors
import Entitlements
import Foundation
import Kafka
import Logging
import Messages
import Observability
import Operations
import StoreHTTP
import Worker

/// `verify-worker entitlements`: the reference entitlement service (projection, API, console). Wiring only; the
/// service is `Entitlements.EntitlementsService`.
struct EntitlementsCommand: ConfiguredCommand {
    static let configuration = CommandConfiguration(
        commandName: "entitlements",
        abstract: "Run the entitlement service: verdicts into per-account entitlements, an API and a support console.",
        discussion: EntitlementsConfiguration.table.flagsHelp())

    @Argument(parsing: .captureForPassthrough, help: "Configuration flags (listed below).")
    var options: [String] = []

    func start() async throws {
        let configuration = try load(EntitlementsConfiguration.self)
        let files: (catalog: Catalog, tokens: AccessTokens)
        do {
            files = try EntitlementsService.loadFiles(configuration)
        } catch {
            throw Self.configurationFailure(error)
        }
        let logger = Self.bootstrapLogging(configuration)
        KafkaTLSVerification.warnIfSwitchedOff(configuration.kafkaProperties, logger: logger)
        let engine = configuration.webhookURLs.isEmpty ? nil : try CurlHTTPEngine()
        defer { engine?.shutdown() }
        let service: EntitlementsService
        do {
            service = try EntitlementsService(
                configuration: configuration, catalog: files.catalog, tokens: files.tokens, logger: logger,
                webhookTransport: engine.map(CurlWebhookTransport.init))
        } catch let error as EntitlementStoreError {
            // Making the store only reads its URL (and opens a SQLite file): what fails is the setting.
            throw Self.configurationFailure(ConfigurationError(key: "entitlements_store_url", problem: error.message))
        } catch {
            throw Self.configurationFailure(error)
        }
        logger.notice(
            "entitlements: starting",
            metadata: [
                LogKeys.groupID: "\(configuration.groupID)", LogKeys.topic: "\(configuration.verdictsTopic)",
                LogKeys.tokenCount: "\(files.tokens.count)",
                LogKeys.productCount: "\(files.catalog.products.count)",
            ])
        try await service.run(handlingSignals: true)
    }

    static func bootstrapLogging(_ configuration: EntitlementsConfiguration) -> Logger {
        LogOutput.install(
            level: Logger.Level(rawValue: configuration.logLevel) ?? .info, json: configuration.logFormat == "json")
        return Logger(label: "verify-worker.entitlements")
    }
}

/// Webhooks over the project's libcurl engine.
struct CurlWebhookTransport: WebhookTransport {
    let engine: CurlHTTPEngine

    func post(
        url: String, body: [UInt8], headers: [(name: String, value: String)], timeout: Duration
    ) async throws -> Int {
        try await engine.execute(
            TransportRequest(method: .post, url: url, headers: headers, body: body, timeout: timeout)
        ).status
    }
}
