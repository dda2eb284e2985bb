import Foundation
import Kafka
import Messages
import Operations
import Receipts

/// How `verify-worker gateway` runs. Each property is also a flag and a `VERIFY_…` environment key
/// (see ``GatewayConfiguration/keys``); flags win over the environment.
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
    public var maxBodyBytes: Int
    /// How long a request waits for Kafka's delivery report before it is answered 503
    /// (`VERIFY_GATEWAY_PUBLISH_TIMEOUT_MS`; also librdkafka's `message.timeout.ms`). Default: 10 000.
    public var publishTimeoutMilliseconds: Int
    /// The `account_id` of jobs made from App Store Server Notifications, which name no account (the worker finds
    /// the owner in its ledger). All notifications share this key, so one partition decides them in order
    /// (`VERIFY_GATEWAY_NOTIFICATION_ACCOUNT`). Default: `apple-notification`.
    public var notificationAccountID: String
    /// How long SIGTERM waits for in-flight deliveries before the producer is closed
    /// (`VERIFY_GATEWAY_DRAIN_TIMEOUT_S`). Default: 25.
    public var drainTimeoutSeconds: Int
    /// The operations port: `/healthz`, `/readyz`, `/metrics` (`VERIFY_METRICS_HOST`, `VERIFY_METRICS_PORT`).
    /// Default: `0.0.0.0:9464`.
    public var operations: OperationsServerConfiguration
    /// Whether `POST /v1/receipts` requires a bearer token (`VERIFY_GATEWAY_AUTH`: `tokens` or `disabled`).
    /// Default: `tokens`.
    public var authentication: Authentication
    /// The file of accepted bearer tokens, one per line (`VERIFY_GATEWAY_TOKENS_FILE`); required unless
    /// `authentication` is `disabled`. Default: none.
    public var tokensFile: String?
    /// Extra trust anchors for notifications' signatures, DER or PEM files (`VERIFY_TRUST_ANCHORS`, the worker's
    /// key: the gateway trusts exactly what the workers trust); Apple's roots are always in. Default: none.
    public var trustAnchorFiles: [String]

    /// How frontends prove they may submit jobs.
    public enum Authentication: String, Sendable, CaseIterable {
        /// `Authorization: Bearer <token>` with a token of ``GatewayConfiguration/tokensFile``.
        case tokens
        /// Nobody is asked: for development only (the gateway logs a warning at start).
        case disabled
    }

    public init(
        host: String = "0.0.0.0", port: Int = 8080, brokers: String = "localhost:9092",
        jobsTopic: String = Topics.jobs, kafkaProperties: [String: String] = [:], maxBodyBytes: Int = 1 << 20,
        publishTimeoutMilliseconds: Int = 10_000, notificationAccountID: String = "apple-notification",
        drainTimeoutSeconds: Int = 25, operations: OperationsServerConfiguration = OperationsServerConfiguration(),
        authentication: Authentication = .tokens, tokensFile: String? = nil, trustAnchorFiles: [String] = []
    ) {
        self.host = host
        self.port = port
        self.brokers = brokers
        self.jobsTopic = jobsTopic
        self.kafkaProperties = kafkaProperties
        self.maxBodyBytes = maxBodyBytes
        self.publishTimeoutMilliseconds = publishTimeoutMilliseconds
        self.notificationAccountID = notificationAccountID
        self.drainTimeoutSeconds = drainTimeoutSeconds
        self.operations = operations
        self.authentication = authentication
        self.tokensFile = tokensFile
        self.trustAnchorFiles = trustAnchorFiles
    }

    /// The environment keys the gateway reads, with what they set (for `--help` and the docs).
    public static let keys: [(environment: String, meaning: String)] = [
        ("VERIFY_GATEWAY_HOST", "interface of the HTTP port (default 0.0.0.0)"),
        ("VERIFY_GATEWAY_PORT", "HTTP port (default 8080)"),
        ("VERIFY_BROKERS", "Kafka bootstrap servers (default localhost:9092)"),
        ("VERIFY_JOBS_TOPIC", "topic jobs are published to (default receipt-jobs)"),
        ("VERIFY_KAFKA_PROPERTIES", "extra librdkafka properties, name=value;name=value"),
        ("VERIFY_MAX_MESSAGE_BYTES", "largest request body, bytes (default 1048576)"),
        ("VERIFY_GATEWAY_PUBLISH_TIMEOUT_MS", "delivery deadline before a 503 (default 10000)"),
        ("VERIFY_GATEWAY_NOTIFICATION_ACCOUNT", "account_id of notification jobs (default apple-notification)"),
        ("VERIFY_GATEWAY_DRAIN_TIMEOUT_S", "SIGTERM flush deadline (default 25)"),
        (
            "VERIFY_GATEWAY_TOKENS_FILE",
            "bearer tokens of POST /v1/receipts, one per line (required unless auth disabled)"
        ),
        ("VERIFY_GATEWAY_AUTH", "tokens (default) or disabled (development only: anyone may submit jobs)"),
        ("VERIFY_TRUST_ANCHORS", "extra trust anchors for notifications, DER or PEM files, comma-separated"),
        ("VERIFY_METRICS_HOST", "interface of the operations port (default 0.0.0.0)"),
        ("VERIFY_METRICS_PORT", "operations port: /healthz /readyz /metrics (default 9464)"),
        ("VERIFY_LOG_LEVEL", "trace, debug, info, notice, warning, error or critical (default info)"),
        ("VERIFY_LOG_FORMAT", "json or text (default json)"),
    ]

    /// Checks the values; the error names the key.
    public func validate() throws(GatewayConfigurationError) {
        guard (0...65_535).contains(port) else { throw GatewayConfigurationError(key: "port", "must be 0...65535") }
        guard (0...65_535).contains(operations.port) else {
            throw GatewayConfigurationError(key: "metrics_port", "must be 0...65535")
        }
        guard !brokers.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw GatewayConfigurationError(key: "brokers", "must not be empty")
        }
        guard !jobsTopic.isEmpty else { throw GatewayConfigurationError(key: "jobs_topic", "must not be empty") }
        guard (1...(64 << 20)).contains(maxBodyBytes) else {
            throw GatewayConfigurationError(key: "max_message_bytes", "must be 1...67108864")
        }
        guard (1...600_000).contains(publishTimeoutMilliseconds) else {
            throw GatewayConfigurationError(key: "gateway_publish_timeout_ms", "must be 1...600000")
        }
        guard !notificationAccountID.isEmpty, notificationAccountID.utf8.count <= ReceiptJob.maximumIdentifierLength
        else {
            throw GatewayConfigurationError(key: "gateway_notification_account", "must be 1 to 256 bytes")
        }
        guard (0...3600).contains(drainTimeoutSeconds) else {
            throw GatewayConfigurationError(key: "gateway_drain_timeout_s", "must be 0...3600")
        }
        if authentication == .tokens, (tokensFile ?? "").isEmpty {
            throw GatewayConfigurationError(
                key: "gateway_tokens_file",
                "required (set VERIFY_GATEWAY_TOKENS_FILE, or VERIFY_GATEWAY_AUTH=disabled for development)")
        }
    }

    /// The producer: idempotent with `acks=all` (the Kafka layer's defaults), and a message timeout equal to the
    /// publish deadline so librdkafka gives up on a message when the request does.
    public var producerConfiguration: KafkaProducerConfiguration {
        // A broker request may not outlive the message it carries.
        var properties = ["request.timeout.ms": String(min(30_000, publishTimeoutMilliseconds))]
        properties.merge(kafkaProperties) { _, given in given }
        return KafkaProducerConfiguration(
            bootstrapServers: brokers, maxInFlightMessages: 10_000, lingerMilliseconds: 1,
            messageTimeoutMilliseconds: publishTimeoutMilliseconds, clientID: "verify-worker-gateway",
            properties: properties)
    }

    /// The accepted bearer tokens, read from ``tokensFile``; nil when authentication is disabled.
    public func loadTokens() throws(GatewayConfigurationError) -> BearerTokens? {
        guard authentication == .tokens else { return nil }
        guard let tokensFile, !tokensFile.isEmpty else {
            throw GatewayConfigurationError(key: "gateway_tokens_file", "required")
        }
        return try BearerTokens.load(path: tokensFile)
    }

    /// Apple's roots plus the certificates of ``trustAnchorFiles`` (a PEM file may hold several).
    public func loadTrustStore() throws(GatewayConfigurationError) -> TrustStore {
        var trust = TrustStore.apple
        for path in trustAnchorFiles {
            do {
                trust = trust.adding(anchors: try TrustStore.loadCertificates(contentsOf: URL(fileURLWithPath: path)))
            } catch {
                throw GatewayConfigurationError(key: "trust_anchors", "cannot read a certificate from \(path)")
            }
        }
        return trust
    }

    /// Parses `name=value;name=value` (the `VERIFY_KAFKA_PROPERTIES` format).
    public static func parseKafkaProperties(_ text: String) throws(GatewayConfigurationError) -> [String: String] {
        var result: [String: String] = [:]
        for pair in text.split(separator: ";") where !pair.trimmingCharacters(in: .whitespaces).isEmpty {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2 else {
                throw GatewayConfigurationError(key: "kafka_properties", "expected name=value;name=value")
            }
            result[parts[0].trimmingCharacters(in: .whitespaces)] = parts[1].trimmingCharacters(in: .whitespaces)
        }
        return result
    }
}

/// A configuration value the gateway cannot run with; the text names the key and the rule (never a secret).
public struct GatewayConfigurationError: Error, Sendable, CustomStringConvertible {
    public var key: String
    public var rule: String

    public init(key: String, _ rule: String) {
        self.key = key
        self.rule = rule
    }

    public var description: String { "configuration key \(key): \(rule)" }
}
