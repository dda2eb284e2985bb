import ArgumentParser
import Foundation
import Kafka
import Logging
import Observability
import Operations
import Worker

/// `verify-worker run`: the worker. Consumes `receipt-jobs`, publishes `receipt-verdicts`, until SIGTERM.
struct RunCommand: ConfiguredCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run a worker: consume receipt jobs, decide them, publish verdicts (until SIGTERM).",
        discussion: WorkerConfiguration.flagsHelp())

    @Argument(parsing: .captureForPassthrough, help: "Configuration flags (listed below).")
    var options: [String] = []

    func start() async throws {
        // Before the first threads start: fewer malloc arenas keep resident memory near the live set.
        let arenas = MallocArenas.limit(environment: ProcessInfo.processInfo.environment)
        let configuration = try load(WorkerConfiguration.self)
        let logger = Self.bootstrapLogging(configuration)
        KafkaTLSVerification.warnIfSwitchedOff(configuration.kafkaProperties, logger: logger)
        let exit: WorkerRuntime.Exit
        do {
            // Logged once every setting is accepted: a configuration error is then the only line on stderr.
            let started: @Sendable () -> Void = {
                logger.notice(
                    "worker: starting",
                    metadata: [
                        LogKeys.workerID: "\(configuration.workerID)", LogKeys.groupID: "\(configuration.groupID)",
                        LogKeys.topic: "\(configuration.jobsTopic)",
                        LogKeys.mallocArenas: "\(arenas.map(String.init) ?? "environment")",
                    ])
            }
            // SIGTERM and SIGINT reach the worker's services through their group. When it begins to stop: drain,
            // then flush (10 s) and close the producer (5 s), each bounded; beyond that a Kafka client waiting for an
            // unreachable broker must not keep the process alive.
            exit = try await WorkerRuntime(configuration: configuration, logger: logger).runHandlingSignals(
                started: started,
                stopping: {
                    ShutdownDeadline.arm(after: configuration.drainTimeout + Self.shutdownGrace, logger: logger)
                })
        } catch let error as ConfigurationError {
            throw Self.configurationFailure(error)
        }
        if case .fatal = exit { throw ExitCode(1) }
    }

    /// How long after the drain timeout a stopping worker may take to close its clients before it exits anyway.
    static let shutdownGrace: Duration = .seconds(20)

    /// JSON lines (or text) on standard error at the configured level, for every logger of the process.
    static func bootstrapLogging(_ configuration: WorkerConfiguration) -> Logger {
        LogOutput.install(
            level: Logger.Level(rawValue: configuration.logLevel) ?? .info, json: configuration.logFormat == "json")
        var logger = Logger(label: "verify-worker")
        logger[metadataKey: LogKeys.workerID] = "\(configuration.workerID)"
        return logger
    }
}
