import ArgumentParser
import Foundation
import Gateway
import Kafka
import Logging
import Observability
import Operations
import Worker

/// `verify-worker gateway`: the HTTP entry point that publishes frontends' jobs and Apple's notifications to Kafka.
struct GatewayCommand: ConfiguredCommand {
    static let configuration = CommandConfiguration(
        commandName: "gateway",
        abstract: "Runs the HTTP gateway: POST /v1/receipts and POST /apple/notifications, published to receipt-jobs.",
        discussion: """
            Answers 202 {"job_id"} (receipts) or 200 (notifications) only after Kafka acknowledged the job; \
            4xx {"error","message"} for bad input (401 no accepted bearer token, 403 untrusted notification \
            signature, 405 another method, 413 too large for the body limit or a Kafka record, 415 not JSON), 500 \
            when Kafka refuses the job for good, and 503 when Kafka does not acknowledge in time. \
            POST /v1/receipts needs Authorization: Bearer <token>, a token of --tokens-file; \
            --auth disabled turns that off for development. /healthz, /readyz and /metrics are on the metrics \
            port. SIGTERM stops accepting, finishes requests in flight, flushes and exits 0. A bad setting exits 2 \
            with one line naming it.

            \(GatewayConfiguration.table.flagsHelp())
            """
    )

    @Argument(parsing: .captureForPassthrough, help: "Configuration flags (listed below).")
    var options: [String] = []

    func start() async throws {
        let configuration = try load(GatewayConfiguration.self)
        let logger: Logger
        let gateway: ReceiptGateway
        do {
            logger = try GatewayLogging.bootstrap(
                label: "verify-worker.gateway", level: configuration.logLevel, format: configuration.logFormat)
            KafkaTLSVerification.warnIfSwitchedOff(configuration.kafkaProperties, logger: logger)
            gateway = try ReceiptGateway(configuration: configuration, logger: logger)
        } catch {
            throw CommandFailure.configuration(command: "gateway", error)
        }
        let topic = configuration.jobsTopic
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                do {
                    try await gateway.run(handlingSignals: true)
                } catch let error as ConfigurationError {
                    // A port that cannot be bound is a setting to fix: one line, exit 2.
                    throw CommandFailure.configuration(command: "gateway", error)
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
}

/// Environment lookups of the gateway's tools, with one clear line naming the key when a value is bad.
struct GatewayEnvironment {
    let values = ProcessInfo.processInfo.environment

    subscript(key: String) -> String? {
        guard let value = values[key]?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        return value
    }

    /// `kafka_properties` as the long-running commands read it: the `--kafka-properties` flag, else
    /// `VERIFY_KAFKA_PROPERTIES`.
    func kafkaProperties(_ flag: String?) throws(ConfigurationError) -> [String: String] {
        try ConfigurationReader.properties(flag ?? self["VERIFY_KAFKA_PROPERTIES"] ?? "", key: "kafka_properties")
    }

    func int(_ flag: Int?, _ key: String) throws -> Int? {
        if let flag { return flag }
        guard let text = self[key] else { return nil }
        guard let value = Int(text) else { throw ValidationError("\(key) must be an integer") }
        return value
    }
}

/// Logging for the gateway and its tools: JSON lines on stderr (VERIFY_LOG_FORMAT=json, the default) or text.
enum GatewayLogging {
    static func bootstrap(label: String, level: String?, format: String?) throws -> Logger {
        let levelText = level ?? "info"
        guard let logLevel = Logger.Level(rawValue: levelText) else {
            throw ValidationError("log level must be trace, debug, info, notice, warning, error or critical")
        }
        switch format ?? "json" {
        case "json": LogOutput.install(level: logLevel, json: true)
        case "text": LogOutput.install(level: logLevel, json: false)
        default: throw ValidationError("log format must be json or text")
        }
        var logger = Logger(label: label)
        logger.logLevel = logLevel
        return logger
    }

    /// The logger of a tool whose standard output is its data (`tail`, `submit`): warnings and worse, on standard
    /// error.
    static func toolLogger(label: String) -> Logger {
        var logger = Logger(label: label) { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = .warning
        return logger
    }
}
