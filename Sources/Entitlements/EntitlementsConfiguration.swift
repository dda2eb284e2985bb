import Foundation
import Operations

/// Everything `verify-worker entitlements` is configured with, read through the same kind of key table as `run`
/// (flags, `VERIFY_…` variables, a config file; ``keys`` yields `--help` and docs/CONFIGURATION.md's section).
public struct EntitlementsConfiguration: Sendable {
    public var brokers: String
    public var groupID: String
    public var verdictsTopic: String
    public var eventsTopic: String
    public var kafkaProperties: [String: String]
    public var storeURL: String
    public var catalogFile: String
    public var tokensFile: String
    public var port: Int
    public var host: String
    public var batchSize: Int
    public var rejectionsPerAccount: Int
    public var maximumMessageBytes: Int
    public var rateLimit: Double
    public var rateBurst: Int
    public var webhookURLs: [String]
    public var webhookSecret: String?
    public var webhookMaximumAttempts: Int
    public var expirySweepInterval: Duration
    public var drainTimeout: Duration
    public var logLevel: String
    public var logFormat: String

    public static let keys: [ConfigurationKey] = [
        .brokers,
        .init(
            "entitlements_group_id", default: "verify-entitlements",
            "Consumer group of the entitlement services (its own, apart from the workers')."),
        .init("verdicts_topic", default: "receipt-verdicts", "Topic the verdicts are read from."),
        .init(
            "entitlements_events_topic", default: "entitlement-events",
            "Topic lifecycle events are published to (key = account id); empty to publish none."),
        .kafkaProperties,
        .init(
            "entitlements_store_url", default: "sqlite:verify-entitlements.sqlite",
            "Where the entitlements live: postgres://user@host:port/db (a cluster; sslmode and sslrootcert as for "
                + "ledger_url) or sqlite:PATH (one machine)."),
        .init(
            "catalog_file", required: true,
            "JSON catalog of products with their types and, optionally, the entitlements each grants."),
        .init(
            "entitlements_tokens_file", required: true,
            "File of API tokens, one per line (optionally `label:token`); the API and the console need one."),
        .init("entitlements_port", default: "8090", "Port of the API, the console, /healthz, /readyz and /metrics."),
        .init("entitlements_host", default: "0.0.0.0", "Address the port binds to."),
        .init(
            "entitlements_batch_size", default: "2000",
            "Most verdicts projected in one database transaction (fewer commits: 2000 gave ~25 % more than 500)."),
        .init(
            "entitlements_rejections_per_account", default: "20",
            "Rejected verdicts (and ignored messages) each account's history keeps, the newest; older ones are dropped "
                + "(0: none kept, and an account with only rejections stays unknown)."),
        .init("max_message_bytes", default: "1048576", "Largest verdict read; larger ones are ignored (and counted)."),
        .init("entitlements_rate_limit", default: "200", "API requests per second per token."),
        .init("entitlements_rate_burst", default: "400", "API requests a token may send at once after a pause."),
        .init(
            "entitlements_webhook_urls", default: "",
            "Comma-separated URLs each lifecycle event is POSTed to (HMAC-signed; empty: no webhooks)."),
        .init(
            "entitlements_webhook_secret", secret: true,
            "HMAC-SHA256 key of the webhooks' X-Verify-Signature (required with webhook URLs)."),
        .init(
            "entitlements_webhook_max_attempts", default: "12",
            "Attempts per event and URL before a webhook delivery is given up (backoff doubles from 1 s to 10 min)."),
        .init(
            "entitlements_expiry_sweep_s", default: "30",
            "How often expirations no verdict reports are looked for and published (0: never)."),
        .init("drain_timeout_s", default: "25", "On SIGTERM, how long the batch in hand may take before exit."),
        .init("log_level", default: "info", "trace, debug, info, notice, warning, error or critical."),
        .init("log_format", default: "json", "json (one object per line) or text."),
        EnvironmentVariables.ignoreKey,
    ]

    public static let table = ConfigurationTable(command: "verify-worker entitlements", keys: keys)

    /// Builds the configuration from merged sources, validating every value; the first problem is thrown as one
    /// line naming the key.
    public init(
        _ sources: ConfigurationSources,
        readFile: @escaping (String) throws -> String = { try String(contentsOfFile: $0, encoding: .utf8) }
    ) throws(ConfigurationError) {
        let reader = ConfigurationReader(sources: sources, readFile: readFile)
        brokers = try reader.string("brokers")
        groupID = try reader.string("entitlements_group_id")
        verdictsTopic = try reader.string("verdicts_topic")
        eventsTopic = reader.raw("entitlements_events_topic") ?? ""
        kafkaProperties = try reader.properties("kafka_properties")
        storeURL = try reader.string("entitlements_store_url")
        guard storeURL.hasPrefix("postgres://") || storeURL.hasPrefix("postgresql://") || storeURL.hasPrefix("sqlite:")
        else {
            throw ConfigurationError(key: "entitlements_store_url", problem: "must start with postgres:// or sqlite:")
        }
        guard let catalogFile = reader.given("catalog_file"), !catalogFile.isEmpty else {
            throw ConfigurationError(
                key: "catalog_file", problem: "required (set VERIFY_CATALOG_FILE or --catalog-file)")
        }
        self.catalogFile = catalogFile
        guard let tokensFile = reader.given("entitlements_tokens_file"), !tokensFile.isEmpty else {
            throw ConfigurationError(
                key: "entitlements_tokens_file",
                problem: "required (set VERIFY_ENTITLEMENTS_TOKENS_FILE or --entitlements-tokens-file)")
        }
        self.tokensFile = tokensFile
        port = try reader.int("entitlements_port", in: 0...65535)
        host = try reader.string("entitlements_host")
        batchSize = try reader.int("entitlements_batch_size", in: 1...10_000)
        rejectionsPerAccount = try reader.int("entitlements_rejections_per_account", in: 0...10_000)
        maximumMessageBytes = try reader.int("max_message_bytes", in: 1024...(64 << 20))
        rateLimit = try reader.double("entitlements_rate_limit", in: 0.1...1_000_000)
        rateBurst = try reader.int("entitlements_rate_burst", in: 1...1_000_000)
        webhookURLs = reader.list("entitlements_webhook_urls")
        for url in webhookURLs where !ConfigurationReader.isHTTPURL(url) {
            throw ConfigurationError(key: "entitlements_webhook_urls", problem: "expected http(s) URLs")
        }
        webhookSecret = try reader.secret("entitlements_webhook_secret")
        if !webhookURLs.isEmpty, webhookSecret == nil {
            throw ConfigurationError(key: "entitlements_webhook_secret", problem: "required when webhook URLs are set")
        }
        webhookMaximumAttempts = try reader.int("entitlements_webhook_max_attempts", in: 1...1000)
        expirySweepInterval = .seconds(try reader.int("entitlements_expiry_sweep_s", in: 0...86_400))
        drainTimeout = .seconds(try reader.int("drain_timeout_s", in: 1...3600))
        logLevel = try reader.oneOf("log_level", ["trace", "debug", "info", "notice", "warning", "error", "critical"])
        logFormat = try reader.oneOf("log_format", ["json", "text"])
    }
}

/// Loaded as every long-running command's configuration is
/// (``TableConfiguration/load(arguments:environment:readFile:)``: file, environment, flags). The entitlement service
/// names no host.
extension EntitlementsConfiguration: TableConfiguration {
    public init(
        _ sources: ConfigurationSources, hostName: String, readFile: @escaping (String) throws -> String
    ) throws(ConfigurationError) {
        try self.init(sources, readFile: readFile)
    }
}
