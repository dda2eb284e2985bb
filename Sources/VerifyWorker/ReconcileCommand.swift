import ArgumentParser
import Foundation
import Kafka
import Logging
import Observability
import Operations
import Reconciler
import Worker

/// `verify-worker reconcile`: recovers the App Store Server Notifications Apple failed to deliver (docs/OPERATIONS.md,
/// "Reconciler"). Any number of replicas; one sweeps at a time.
struct ReconcileCommand: ConfiguredCommand {
    static let configuration = CommandConfiguration(
        commandName: "reconcile",
        abstract:
            "Sweep Apple's notification history for failed deliveries and publish each as the gateway's job (until SIGTERM).",
        discussion: ReconcileConfiguration.flagsHelp())

    @Argument(parsing: .captureForPassthrough, help: "Configuration flags (listed below).")
    var options: [String] = []

    func start() async throws {
        let configuration = try load(ReconcileConfiguration.self)
        let logger = RunCommand.bootstrapLogging(configuration.worker)
        KafkaTLSVerification.warnIfSwitchedOff(configuration.worker.kafkaProperties, logger: logger)
        do {
            try await ReconcileRuntime(configuration: configuration, logger: logger).runHandlingSignals(
                started: {
                    logger.notice(
                        "reconcile: starting",
                        metadata: [
                            LogKeys.workerID: "\(configuration.worker.workerID)",
                            LogKeys.topic: "\(configuration.worker.jobsTopic)",
                        ])
                },
                stopping: { ShutdownDeadline.arm(after: RunCommand.shutdownGrace, logger: logger) })
        } catch let error as ConfigurationError {
            throw Self.configurationFailure(error)
        }
    }
}
