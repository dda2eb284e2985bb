import ArgumentParser
import Benchmarks
import Foundation

/// `verify-worker bench reconcile`: one reconciler sweep over a simulator's history of failed notifications.
struct BenchReconcileCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reconcile",
        abstract: "One sweep of verify-worker reconcile over N failed notifications in the simulator's history (JSON).")

    @Option(help: "Failed notifications in the simulator's history.")
    var notifications = 10_000

    @Option(name: .customLong("requests-per-second"), help: "The sweep's budget (default: 20% of Apple's 50/s).")
    var requestsPerSecond = 10.0

    func run() async throws {
        let result = try await ReconcileBenchmark.run(
            notifications: notifications, requestsPerSecond: requestsPerSecond)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        print(String(decoding: try encoder.encode(result), as: UTF8.self))
    }
}
