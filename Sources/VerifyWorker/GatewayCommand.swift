import ArgumentParser
import Foundation
import Gateway
import Logging
import Observability
import Operations
import Pipeline

/// `verify-worker gateway`: the HTTP edge that publishes frontends' jobs and Apple's notifications to Kafka.
struct GatewayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gateway",
        abstract: "Runs the HTTP gateway: POST /v1/receipts and POST /apple/notifications, published to receipt-jobs.",
        discussion: """
            Answers 202 {"job_id"} (receipts) or 200 (notifications) only after Kafka acknowledged the job; \
            4xx {"error","message"} for bad input (401 no accepted bearer token, 403 untrusted notification \
            signature, 413 too large, 415 not JSON) and 503 when Kafka does not acknowledge in time. \
            POST /v1/receipts needs Authorization: Bearer <token>, a token of --tokens-file; \
            --auth disabled turns that off for development. /healthz, /readyz and /metrics are on the metrics \
            port. SIGTERM stops accepting, finishes requests in flight, flushes and exits 0. A bad setting exits 2 \
            with one line naming it.

            Every flag can also come from the environment (flags win):
            \(GatewayConfiguration.keys.map { "  \($0.environment): \($0.meaning)" }.joined(separator: "\n"))
            """
    )

    @Option(help: "HTTP port (VERIFY_GATEWAY_PORT, default 8080; 0 picks a free one).")
    var port: Int?
    @Option(help: "Interface of the HTTP port (VERIFY_GATEWAY_HOST, default 0.0.0.0).")
    var host: String?
    @Option(help: "Kafka bootstrap servers (VERIFY_BROKERS, default localhost:9092).")
    var brokers: String?
    @Option(name: .customLong("jobs-topic"), help: "Topic jobs are published to (VERIFY_JOBS_TOPIC).")
    var jobsTopic: String?
    @Option(name: .customLong("metrics-port"), help: "Port of /healthz /readyz /metrics (VERIFY_METRICS_PORT, 9464).")
    var metricsPort: Int?
    @Option(name: .customLong("metrics-host"), help: "Interface of the metrics port (VERIFY_METRICS_HOST).")
    var metricsHost: String?
    @Option(name: .customLong("max-message-bytes"), help: "Largest request body (VERIFY_MAX_MESSAGE_BYTES).")
    var maxMessageBytes: Int?
    @Option(
        name: .customLong("publish-timeout-ms"),
        help: "Delivery deadline before a 503 (VERIFY_GATEWAY_PUBLISH_TIMEOUT_MS, default 10000).")
    var publishTimeoutMs: Int?
    @Option(
        name: .customLong("notification-account"),
        help: "account_id of notification jobs (VERIFY_GATEWAY_NOTIFICATION_ACCOUNT, default apple-notification).")
    var notificationAccount: String?
    @Option(name: .customLong("drain-timeout-s"), help: "SIGTERM flush deadline (VERIFY_GATEWAY_DRAIN_TIMEOUT_S).")
    var drainTimeoutS: Int?
    @Option(name: .customLong("kafka-properties"), help: "Extra librdkafka properties (VERIFY_KAFKA_PROPERTIES).")
    var kafkaProperties: String?
    @Option(
        name: .customLong("tokens-file"),
        help:
            "Bearer tokens of POST /v1/receipts, one per line (VERIFY_GATEWAY_TOKENS_FILE; required unless --auth disabled)."
    )
    var tokensFile: String?
    @Option(help: "tokens (default) or disabled: development only (VERIFY_GATEWAY_AUTH).")
    var auth: String?
    @Option(
        name: .customLong("trust-anchors"),
        help: "Extra trust anchors for notifications' signatures, DER or PEM files (VERIFY_TRUST_ANCHORS).")
    var trustAnchors: String?
    @Option(name: .customLong("log-level"), help: "Log level (VERIFY_LOG_LEVEL, default info).")
    var logLevel: String?
    @Option(name: .customLong("log-format"), help: "json or text (VERIFY_LOG_FORMAT, default json).")
    var logFormat: String?

    func run() async throws {
        let configuration: GatewayConfiguration
        let logger: Logger
        let gateway: ReceiptGateway
        do {
            configuration = try readConfiguration()
            logger = try EdgeLogging.bootstrap(
                label: "verify-worker.gateway", level: logLevel ?? EdgeEnvironment()["VERIFY_LOG_LEVEL"],
                format: logFormat ?? EdgeEnvironment()["VERIFY_LOG_FORMAT"])
            gateway = try ReceiptGateway(configuration: configuration, logger: logger)
        } catch {
            throw EdgeFailure.configuration(command: "gateway", error)
        }
        let topic = configuration.jobsTopic
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                do {
                    try await gateway.run(handlingSignals: true)
                } catch let error as GatewayConfigurationError {
                    // A port that cannot be bound is a setting to fix: one line, exit 2.
                    throw EdgeFailure.configuration(command: "gateway", error)
                }
            }
            group.addTask {
                guard let port = await gateway.waitUntilListening() else { return }
                let metrics = await gateway.waitUntilOperationsListening() ?? 0
                logger.info(
                    "gateway listening",
                    metadata: [
                        LogKeys.httpPort: "\(port)", LogKeys.metricsPort: "\(metrics)",
                        LogKeys.topic: "\(topic)",
                    ])
            }
            try await group.waitForAll()
        }
    }

    /// The configuration from flags and the environment (flags win), validated.
    func readConfiguration() throws -> GatewayConfiguration {
        let environment = EdgeEnvironment()
        var configuration = GatewayConfiguration()
        configuration.port = try environment.int(port, "VERIFY_GATEWAY_PORT") ?? configuration.port
        configuration.host = host ?? environment["VERIFY_GATEWAY_HOST"] ?? configuration.host
        configuration.brokers = brokers ?? environment["VERIFY_BROKERS"] ?? configuration.brokers
        configuration.jobsTopic = jobsTopic ?? environment["VERIFY_JOBS_TOPIC"] ?? configuration.jobsTopic
        configuration.operations.port =
            try environment.int(metricsPort, "VERIFY_METRICS_PORT") ?? configuration.operations.port
        configuration.operations.host =
            metricsHost ?? environment["VERIFY_METRICS_HOST"] ?? configuration.operations.host
        configuration.maxBodyBytes =
            try environment.int(maxMessageBytes, "VERIFY_MAX_MESSAGE_BYTES") ?? configuration.maxBodyBytes
        configuration.publishTimeoutMilliseconds =
            try environment.int(publishTimeoutMs, "VERIFY_GATEWAY_PUBLISH_TIMEOUT_MS")
            ?? configuration.publishTimeoutMilliseconds
        configuration.notificationAccountID =
            notificationAccount ?? environment["VERIFY_GATEWAY_NOTIFICATION_ACCOUNT"]
            ?? configuration.notificationAccountID
        configuration.drainTimeoutSeconds =
            try environment.int(drainTimeoutS, "VERIFY_GATEWAY_DRAIN_TIMEOUT_S") ?? configuration.drainTimeoutSeconds
        if let properties = kafkaProperties ?? environment["VERIFY_KAFKA_PROPERTIES"] {
            configuration.kafkaProperties = try GatewayConfiguration.parseKafkaProperties(properties)
        }
        configuration.tokensFile = tokensFile ?? environment["VERIFY_GATEWAY_TOKENS_FILE"]
        if let text = auth ?? environment["VERIFY_GATEWAY_AUTH"] {
            guard let value = GatewayConfiguration.Authentication(rawValue: text.lowercased()) else {
                throw GatewayConfigurationError(key: "gateway_auth", "expected tokens or disabled")
            }
            configuration.authentication = value
        }
        if let anchors = trustAnchors ?? environment["VERIFY_TRUST_ANCHORS"] {
            configuration.trustAnchorFiles = anchors.split(separator: ",")
                .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
        try configuration.validate()
        return configuration
    }
}

/// How the edge commands stop for a setting they cannot run with: one line on standard error naming it, exit 2
/// (as `verify-worker run`), instead of a usage text or an error dump.
enum EdgeFailure {
    static func configuration(command: String, _ error: any Error) -> ExitCode {
        let text: String
        switch error {
        case let error as ValidationError: text = error.message
        case let error as GatewayConfigurationError: text = error.description
        default: text = "\(error)"
        }
        let line = text.split(whereSeparator: \.isNewline).joined(separator: " ")
        FileHandle.standardError.write(Data("verify-worker \(command): \(line)\n".utf8))
        return ExitCode(2)
    }
}

/// Environment lookups of the edge commands, with one clear line naming the key when a value is bad.
struct EdgeEnvironment {
    let values = ProcessInfo.processInfo.environment

    subscript(key: String) -> String? {
        guard let value = values[key]?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        return value
    }

    func int(_ flag: Int?, _ key: String) throws -> Int? {
        if let flag { return flag }
        guard let text = self[key] else { return nil }
        guard let value = Int(text) else { throw ValidationError("\(key) must be an integer") }
        return value
    }
}

/// Logging for the long-running edge commands: JSON lines on stderr (VERIFY_LOG_FORMAT=json, the default) or text.
enum EdgeLogging {
    static func bootstrap(label: String, level: String?, format: String?) throws -> Logger {
        let levelText = level ?? "info"
        guard let logLevel = Logger.Level(rawValue: levelText) else {
            throw ValidationError("log level must be trace, debug, info, notice, warning, error or critical")
        }
        switch format ?? "json" {
        case "json":
            LoggingSystem.bootstrap { JSONLogHandler(label: $0, level: logLevel) }
        case "text":
            LoggingSystem.bootstrap { label in
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = logLevel
                return handler
            }
        default:
            throw ValidationError("log format must be json or text")
        }
        var logger = Logger(label: label)
        logger.logLevel = logLevel
        return logger
    }
}
