import ArgumentParser
import Foundation
import Logging
import Observability
import Operations
import Pipeline

/// `verify-worker reconcile`: recovers the App Store Server Notifications Apple failed to deliver (docs/OPERATIONS.md,
/// "Reconciler"). Any number of replicas; one sweeps at a time.
struct ReconcileCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reconcile",
        abstract:
            "Sweep Apple's notification history for failed deliveries and publish each as the gateway's job (until SIGTERM).",
        discussion: ReconcileConfiguration.flagsHelp())

    @Argument(parsing: .captureForPassthrough, help: "Configuration flags (listed below).")
    var options: [String] = []

    func run() async throws {
        if options.contains("--help") || options.contains("-h") {
            print(Self.helpMessage())
            return
        }
        let configuration: ReconcileConfiguration
        do {
            configuration = try ReconcileConfiguration.load(
                arguments: options, environment: ProcessInfo.processInfo.environment)
        } catch {
            FileHandle.standardError.write(Data("verify-worker reconcile: \(error)\n".utf8))
            throw ExitCode(2)
        }
        let logger = RunCommand.bootstrapLogging(configuration.worker)
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
            FileHandle.standardError.write(Data("verify-worker reconcile: \(error)\n".utf8))
            throw ExitCode(2)
        }
    }
}
