import ArgumentParser
import Foundation
import Traffic

/// `verify-worker bench reconcile`: one reconciler sweep over a simulator's history of failed notifications.
package struct BenchReconcileArguments: HarnessArguments {
    package static let commandConfiguration = CommandConfiguration(
        commandName: "reconcile",
        abstract: "One sweep of verify-worker reconcile over N failed notifications in the simulator's history (JSON).")

    @Option(help: "Failed notifications in the simulator's history.")
    package var notifications = 10_000

    @Option(name: .customLong("requests-per-second"), help: "The sweep's budget (default: 20% of Apple's 50/s).")
    package var requestsPerSecond = 10.0

    package init() {}

    package func run() async throws {
        let result = try await ReconcileBenchmark.run(
            notifications: notifications, requestsPerSecond: requestsPerSecond)
        try printJSON(result)
    }
}
