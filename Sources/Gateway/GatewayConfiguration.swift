import Foundation
import Kafka
import Logging
import Messages
import Operations
import Receipts
import StoreHTTP

/// How `verify-worker gateway` runs. Each property is read through the gateway's key table
/// (``GatewayConfiguration/keys``): a flag, a `VERIFY_…` variable or a config-file line; flags win over the
/// environment, the environment over the file.
public struct GatewayConfiguration: Sendable {
    /// Interface the HTTP port binds to (`VERIFY_GATEWAY_HOST`). Default: `0.0.0.0`.
    public var host: String
    /// HTTP port of `POST /v1/receipts` and `POST /apple/notifications` (`VERIFY_GATEWAY_PORT`); 0 picks a free one.
    /// Default: 8080.
    public var port: Int
    /// Kafka bootstrap servers (`VERIFY_BROKERS`). Default: `localhost:9092`.
    public var brokers: String
    /// Topic the jobs are published to (`VERIFY_JOBS_TOPIC`). Default: `receipt-jobs`.
    public var jobsTopic: String
    /// Extra librdkafka properties, `name=value` separated by `;` (`VERIFY_KAFKA_PROPERTIES`). Default: empty.
    public var kafkaProperties: [String: String]
    /// The largest request body accepted; larger ones get 413 before any parsing (`VERIFY_MAX_MESSAGE_BYTES`,
    /// the worker's own limit, so nothing the gateway accepts is dead-lettered for its size). Default: 1 MiB.
    public var maximumBodyBytes: Int
    /// How long a request waits for Kafka's delivery report before it is answered 503
    /// (`VERIFY_GATEWAY_PUBLISH_TIMEOUT_MS`; also librdkafka's `message.timeout.ms`). Default: 10 000.
    public var publishTimeoutMilliseconds: Int
    /// The `account_id` of jobs made from App Store Server Notifications, which name no account (the worker finds
    /// the owner in its ledger). All notifications share this key, so one partition decides them in order
    /// (`VERIFY_GATEWAY_NOTIFICATION_ACCOUNT`). Default: `apple-notification`.
    public var notificationAccountID: String
    /// How long SIGTERM waits for in-flight deliveries before the producer is closed (`VERIFY_DRAIN_TIMEOUT_S`, as
    /// for every command; `VERIFY_GATEWAY_DRAIN_TIMEOUT_S` is its alias). Default: 25.
    public var drainTimeoutSeconds: Int
    /// The operations port: `/healthz`, `/readyz`, `/metrics` (`VERIFY_METRICS_HOST`, `VERIFY_METRICS_PORT`).
    /// Default: `0.0.0.0:9464`.
    public var operations: OperationsServerConfiguration
    /// Whether `POST /v1/receipts` requires a bearer token (`VERIFY_GATEWAY_AUTH`: `tokens` or `disabled`).
    /// Default: `tokens`.
    public var authentication: Authentication
    /// The file of accepted bearer tokens, one per line, optionally `label:token` (`VERIFY_GATEWAY_TOKENS_FILE`, the
    /// format of every tokens file; the gateway's former one is still read); required unless `authentication` is
    /// `disabled`. Default: none.
    public var tokensFile: String?
    /// Extra trust anchors for notifications' signatures, DER or PEM files (`VERIFY_TRUST_ANCHORS`, the worker's
    /// key: the gateway trusts exactly what the workers trust); Apple's roots are always in. Default: none.
    public var trustAnchorFiles: [String]
    /// The `aud` of the OIDC token of the Google Play Pub/Sub push subscription (`VERIFY_GATEWAY_PUBSUB_AUDIENCE`);
    /// with ``pubSubServiceAccount`` and a JWK set source it enables `POST /google-play/notifications`. Default: none.
    public var pubSubAudience: String?
    /// The email of the service account the push subscription authenticates as
    /// (`VERIFY_GATEWAY_PUBSUB_SERVICE_ACCOUNT`). Default: none.
    public var pubSubServiceAccount: String?
    /// The URL of the JWK set of Google's token keys (`VERIFY_GATEWAY_PUBSUB_JWKS_URL`, Google's is
    /// `https://www.googleapis.com/oauth2/v3/certs`); fetched over TLS, kept for its `max-age`. Default: none.
    public var pubSubJWKSURL: String?
    /// A file holding the JWK set instead of a URL (`VERIFY_GATEWAY_PUBSUB_JWKS_FILE`), read at start. Default: none.
    public var pubSubJWKSFile: String?
    /// The push subscription the envelope must name (`VERIFY_GATEWAY_PUBSUB_SUBSCRIPTION`,
    /// `projects/…/subscriptions/…`); any when unset. Default: none.
    public var pubSubSubscription: String?
    /// How far a token's `exp` may be passed and its `iat` lie ahead (`VERIFY_GATEWAY_PUBSUB_CLOCK_SKEW_S`). Default: 60.
    public var pubSubClockSkewSeconds: Int = 60
    /// The `account_id` of Google Play notification jobs (`VERIFY_GATEWAY_GOOGLE_PLAY_NOTIFICATION_ACCOUNT`). Default:
    /// `google-play-notification`.
    public var googlePlayNotificationAccountID: String = GooglePlayNotificationJob.defaultAccountID
    /// The Play apps' package names; a notification for another is acknowledged and discarded
    /// (`VERIFY_GATEWAY_GOOGLE_PLAY_PACKAGES`, comma-separated). Default: empty (every package is published).
    public var googlePlayPackages: [String] = []
    /// The command's log level (`VERIFY_LOG_LEVEL`: trace … critical). Default: `info`.
    public var logLevel = "info"
    /// The command's log format (`VERIFY_LOG_FORMAT`: json or text). Default: `json`.
    public var logFormat = "json"

    /// How frontends prove they may submit jobs.
    public enum Authentication: String, Sendable, CaseIterable {
        /// `Authorization: Bearer <token>` with a token of ``GatewayConfiguration/tokensFile``.
        case tokens
        /// Nobody is asked: for development only (the gateway logs a warning at start).
        case disabled
    }

    public init(
        host: String = "0.0.0.0", port: Int = 8080, brokers: String = "localhost:9092",
        jobsTopic: String = Topics.jobs, kafkaProperties: [String: String] = [:], maximumBodyBytes: Int = 1 << 20,
        publishTimeoutMilliseconds: Int = 10_000, notificationAccountID: String = "apple-notification",
        drainTimeoutSeconds: Int = 25, operations: OperationsServerConfiguration = OperationsServerConfiguration(),
        authentication: Authentication = .tokens, tokensFile: String? = nil, trustAnchorFiles: [String] = []
    ) {
        self.host = host
        self.port = port
        self.brokers = brokers
        self.jobsTopic = jobsTopic
        self.kafkaProperties = kafkaProperties
        self.maximumBodyBytes = maximumBodyBytes
        self.publishTimeoutMilliseconds = publishTimeoutMilliseconds
        self.notificationAccountID = notificationAccountID
        self.drainTimeoutSeconds = drainTimeoutSeconds
        self.operations = operations
        self.authentication = authentication
        self.tokensFile = tokensFile
        self.trustAnchorFiles = trustAnchorFiles
    }

    /// Every key of `verify-worker gateway`: its flag, `VERIFY_…` variable, config-file line, default and meaning.
    /// `--help` and the gateway's section of docs/CONFIGURATION.md are generated from it. The flags keep their
    /// short names (`--port`, `--auth`, …).
    public static let keys: [ConfigurationKey] = [
        .init("gateway_host", default: "0.0.0.0", flag: "host", "Interface the HTTP port binds to."),
        .init(
            "gateway_port", default: "8080", flag: "port",
            "HTTP port of POST /v1/receipts and POST /apple/notifications (0 picks a free one)."),
        .brokers,
        .init("jobs_topic", default: Topics.jobs, "Topic the jobs are published to."),
        .kafkaProperties,
        .init(
            "max_message_bytes", default: "1048576",
            "Largest request body; larger ones get 413 before any parsing (the worker's own limit)."),
        .init(
            "gateway_publish_timeout_ms", default: "10000", flag: "publish-timeout-ms",
            "How long a request waits for Kafka's delivery report before it is answered 503."),
        .init(
            "gateway_notification_account", default: "apple-notification", flag: "notification-account",
            "The account_id of jobs made from App Store Server Notifications "
                + "(their Kafka key: account/originalTransactionId)."),
        .init(
            "drain_timeout_s", default: "25", aliases: ["gateway_drain_timeout_s"],
            "On SIGTERM, how long requests in flight may take to be delivered before the producer closes."),
        .init(
            "gateway_tokens_file", flag: "tokens-file",
            "Bearer tokens of POST /v1/receipts, one per line (optionally `label:token`), as the entitlement API's "
                + "file; required unless gateway_auth is disabled."),
        .init(
            "gateway_auth", default: "tokens", flag: "auth",
            "tokens, or disabled (development only: anyone may submit jobs; a warning is logged)."),
        .init(
            "trust_anchors", default: "",
            "Extra trust anchors for notifications' signatures, DER or PEM files, comma-separated (Apple's roots are "
                + "always in)."),
        .init(
            "gateway_pubsub_audience", flag: "pubsub-audience",
            "The aud of the Google Play Pub/Sub push subscription's OIDC token; with gateway_pubsub_service_account "
                + "and a JWK set it enables POST /google-play/notifications (404 otherwise)."),
        .init(
            "gateway_pubsub_service_account", flag: "pubsub-service-account",
            "The email of the service account the push subscription authenticates as (email_verified must be true)."),
        .init(
            "gateway_pubsub_jwks_url", flag: "pubsub-jwks-url",
            "URL of the JWK set of Google's token keys (https://www.googleapis.com/oauth2/v3/certs), fetched over "
                + "TLS, kept for its max-age, fetched again for an unknown kid at most once a minute."),
        .init(
            "gateway_pubsub_jwks_file", flag: "pubsub-jwks-file",
            "A file holding that JWK set instead of the URL, read at start."),
        .init(
            "gateway_pubsub_subscription", flag: "pubsub-subscription",
            "The push subscription (projects/…/subscriptions/…) the envelope must name; any when unset."),
        .init(
            "gateway_pubsub_clock_skew_s", default: "60", flag: "pubsub-clock-skew-s",
            "How far a push token's exp may be passed and its iat lie ahead, in seconds."),
        .init(
            "gateway_google_play_notification_account", default: GooglePlayNotificationJob.defaultAccountID,
            flag: "google-play-notification-account",
            "The account_id of Google Play notification jobs (their Kafka key: account/purchaseToken)."),
        .init(
            "gateway_google_play_packages", default: "", flag: "google-play-packages",
            "The Play apps' package names, comma-separated; a notification for another is acknowledged and "
                + "discarded (empty: every package is published)."),
        .init("metrics_host", default: "0.0.0.0", "Interface of the operations port."),
        .init("metrics_port", default: "9464", "Port of /healthz, /readyz and /metrics."),
        .logLevel,
        .logFormat,
        EnvironmentVariables.ignoreKey,
    ]

    public static let table = ConfigurationTable(command: "verify-worker gateway", keys: keys)

    /// Builds the configuration from merged sources; the first bad value is thrown naming its key.
    public init(_ sources: ConfigurationSources) throws(ConfigurationError) {
        let reader = ConfigurationReader(sources: sources)
        self.init()
        host = try reader.string("gateway_host")
        port = try reader.int("gateway_port", in: 0...65_535)
        brokers = try reader.string("brokers").trimmingCharacters(in: .whitespaces)
        guard !brokers.isEmpty else { throw ConfigurationError(key: "brokers", problem: "must not be empty") }
        jobsTopic = try reader.string("jobs_topic")
        kafkaProperties = try reader.properties("kafka_properties")
        maximumBodyBytes = try reader.int("max_message_bytes", in: 1...(64 << 20))
        publishTimeoutMilliseconds = try reader.int("gateway_publish_timeout_ms", in: 1...600_000)
        notificationAccountID = try reader.string("gateway_notification_account")
        drainTimeoutSeconds = try reader.int("drain_timeout_s", in: 0...3600)
        operations.host = try reader.string("metrics_host")
        operations.port = try reader.int("metrics_port", in: 0...65_535)
        let auth = try reader.oneOf("gateway_auth", Authentication.allCases.map(\.rawValue))
        authentication = Authentication(rawValue: auth) ?? .tokens
        tokensFile = reader.given("gateway_tokens_file").flatMap { $0.isEmpty ? nil : $0 }
        trustAnchorFiles = reader.list("trust_anchors")
        pubSubAudience = reader.given("gateway_pubsub_audience")
        pubSubServiceAccount = reader.given("gateway_pubsub_service_account")
        pubSubJWKSURL = reader.given("gateway_pubsub_jwks_url").flatMap { $0.isEmpty ? nil : $0 }
        pubSubJWKSFile = reader.given("gateway_pubsub_jwks_file").flatMap { $0.isEmpty ? nil : $0 }
        pubSubSubscription = reader.given("gateway_pubsub_subscription").flatMap { $0.isEmpty ? nil : $0 }
        pubSubClockSkewSeconds = try reader.int("gateway_pubsub_clock_skew_s", in: 0...3600)
        googlePlayNotificationAccountID = try reader.string("gateway_google_play_notification_account")
        googlePlayPackages = reader.list("gateway_google_play_packages")
        try validate()
        (logLevel, logFormat) = try Self.logSettings(sources)
    }

    /// The log level and format the sources give (validated), for the command's logging.
    public static func logSettings(
        _ sources: ConfigurationSources
    ) throws(ConfigurationError) -> (level: String, format: String) {
        let reader = ConfigurationReader(sources: sources)
        return (
            try reader.oneOf("log_level", ["trace", "debug", "info", "notice", "warning", "error", "critical"]),
            try reader.oneOf("log_format", ["json", "text"])
        )
    }

    /// Checks the values; the error names the key.
    public func validate() throws(ConfigurationError) {
        guard (0...65_535).contains(port) else { throw ConfigurationError(key: "port", problem: "must be 0...65535") }
        guard (0...65_535).contains(operations.port) else {
            throw ConfigurationError(key: "metrics_port", problem: "must be 0...65535")
        }
        guard !brokers.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw ConfigurationError(key: "brokers", problem: "must not be empty")
        }
        guard !jobsTopic.isEmpty else { throw ConfigurationError(key: "jobs_topic", problem: "must not be empty") }
        guard (1...(64 << 20)).contains(maximumBodyBytes) else {
            throw ConfigurationError(key: "max_message_bytes", problem: "must be 1...67108864")
        }
        guard (1...600_000).contains(publishTimeoutMilliseconds) else {
            throw ConfigurationError(key: "gateway_publish_timeout_ms", problem: "must be 1...600000")
        }
        guard !notificationAccountID.isEmpty, notificationAccountID.utf8.count <= ReceiptJob.maximumIdentifierLength
        else {
            throw ConfigurationError(key: "gateway_notification_account", problem: "must be 1 to 256 bytes")
        }
        guard (0...3600).contains(drainTimeoutSeconds) else {
            throw ConfigurationError(key: "drain_timeout_s", problem: "must be 0...3600")
        }
        try validatePubSub()
        if authentication == .tokens, (tokensFile ?? "").isEmpty {
            throw ConfigurationError(
                key: "gateway_tokens_file",
                problem: "required (set VERIFY_GATEWAY_TOKENS_FILE, or VERIFY_GATEWAY_AUTH=disabled for development)")
        }
    }

    /// Whether `POST /google-play/notifications` is served: an audience, a service account and a JWK set source.
    public var googlePlayNotificationsEnabled: Bool {
        pubSubAudience != nil && pubSubServiceAccount != nil && (pubSubJWKSURL != nil || pubSubJWKSFile != nil)
    }

    /// The Pub/Sub settings come all together or not at all; each wrong one is named.
    private func validatePubSub() throws(ConfigurationError) {
        guard (0...3600).contains(pubSubClockSkewSeconds) else {
            throw ConfigurationError(key: "gateway_pubsub_clock_skew_s", problem: "must be 0...3600")
        }
        let account = googlePlayNotificationAccountID
        guard !account.isEmpty, account.utf8.count <= ReceiptJob.maximumIdentifierLength else {
            throw ConfigurationError(key: "gateway_google_play_notification_account", problem: "must be 1 to 256 bytes")
        }
        let given = [pubSubAudience, pubSubServiceAccount, pubSubJWKSURL, pubSubJWKSFile, pubSubSubscription]
        guard given.contains(where: { $0 != nil }) else { return }
        guard let audience = pubSubAudience, !audience.isEmpty else {
            throw ConfigurationError(
                key: "gateway_pubsub_audience", problem: "required, not empty, with the other gateway_pubsub_ keys")
        }
        guard let serviceAccount = pubSubServiceAccount, !serviceAccount.isEmpty else {
            throw ConfigurationError(
                key: "gateway_pubsub_service_account",
                problem: "required, not empty, with the other gateway_pubsub_ keys")
        }
        switch (pubSubJWKSURL, pubSubJWKSFile) {
        case (nil, nil):
            throw ConfigurationError(
                key: "gateway_pubsub_jwks_url", problem: "required (or gateway_pubsub_jwks_file) with the audience")
        case (_?, _?):
            throw ConfigurationError(
                key: "gateway_pubsub_jwks_file", problem: "give the JWK set's URL or a file, not both")
        case (let url?, nil):
            let lowered = url.lowercased()
            guard lowered.hasPrefix("https://") || lowered.hasPrefix("http://"), URL(string: url)?.host != nil else {
                throw ConfigurationError(key: "gateway_pubsub_jwks_url", problem: "must be an http(s) URL")
            }
        case (nil, _?):
            break
        }
    }

    /// The key set of push tokens: the file's keys (read now), or the URL's, fetched through `transport`.
    public func loadPubSubKeySet(
        transport: (any HTTPTransport)?, now: @escaping @Sendable () -> Date = Date.init
    ) throws(ConfigurationError) -> PubSubKeySet? {
        guard googlePlayNotificationsEnabled else { return nil }
        if let file = pubSubJWKSFile {
            guard let bytes = FileManager.default.contents(atPath: file) else {
                throw ConfigurationError(key: "gateway_pubsub_jwks_file", problem: "cannot read \(file)")
            }
            do {
                return PubSubKeySet(source: .keys(try PubSubKeySet.parse(Array(bytes))), now: now)
            } catch {
                throw ConfigurationError(key: "gateway_pubsub_jwks_file", problem: "\(file): \(error)")
            }
        }
        guard let url = pubSubJWKSURL, let transport else {
            throw ConfigurationError(key: "gateway_pubsub_jwks_url", problem: "no HTTP client to fetch it")
        }
        return PubSubKeySet(
            source: .url(
                url,
                fetch: { url in
                    let response = try await transport.execute(
                        TransportRequest(url: url, headers: [("Accept", "application/json")], timeout: .seconds(10)))
                    return (response.status, response.header("Cache-Control"), response.body)
                }), now: now)
    }

    /// The producer: idempotent with `acks=all` (the Kafka layer's defaults), and a message timeout equal to the
    /// publish deadline so librdkafka gives up on a message when the request does.
    public var producerConfiguration: KafkaProducerConfiguration {
        // A broker request may not outlive the message it carries.
        var properties = ["request.timeout.ms": String(min(30_000, publishTimeoutMilliseconds))]
        properties.merge(kafkaProperties) { _, given in given }
        return KafkaProducerConfiguration(
            bootstrapServers: brokers, maximumInFlightMessages: 10_000, lingerMilliseconds: 1,
            messageTimeoutMilliseconds: publishTimeoutMilliseconds, clientID: "verify-worker-gateway",
            properties: properties)
    }

    /// The producer's `message.max.bytes` (its default, or what `kafka_properties` sets): the largest job record the
    /// gateway hands to Kafka.
    public var producerMessageMaxBytes: Int {
        let configuration = producerConfiguration
        return configuration.librdkafkaProperties["message.max.bytes"].flatMap { Int($0) }
            ?? configuration.messageMaxBytes
    }

    /// The accepted bearer tokens, read from ``tokensFile``; nil when authentication is disabled. `logger` says once
    /// when the file is in the gateway's former format.
    public func loadTokens(logger: Logger? = nil) throws(ConfigurationError) -> BearerTokens? {
        guard authentication == .tokens else { return nil }
        guard let tokensFile, !tokensFile.isEmpty else {
            throw ConfigurationError(key: "gateway_tokens_file", problem: "required")
        }
        return try BearerTokens.load(path: tokensFile, logger: logger)
    }

    /// Apple's roots plus the certificates of ``trustAnchorFiles`` (a PEM file may hold several).
    public func loadTrustStore() throws(ConfigurationError) -> TrustStore {
        do {
            return try TrustStore.apple(addingAnchorsFrom: trustAnchorFiles)
        } catch {
            throw ConfigurationError(key: "trust_anchors", problem: "cannot read a certificate from \(error.path)")
        }
    }
}

/// Loaded as every long-running command's configuration is
/// (``TableConfiguration/load(arguments:environment:readFile:)``: file, environment, flags). The gateway names no
/// host and reads no file beyond its configuration file here.
extension GatewayConfiguration: TableConfiguration {
    public init(
        _ sources: ConfigurationSources, hostName: String, readFile: @escaping (String) throws -> String
    ) throws(ConfigurationError) {
        try self.init(sources)
    }
}
