import ArgumentParser
import Foundation
import Traffic

/// `verify-worker bench notifications`: a burst of App Store Server Notifications V2 through the gateway and workers.
package struct BenchNotificationsArguments: HarnessArguments {
    package static let commandConfiguration = CommandConfiguration(
        commandName: "notifications",
        abstract: "A burst of N signed notifications POSTed to the gateway, decided by the workers (JSON).")

    @Option(help: "Notifications in the burst (ten per subscription granted first).")
    package var notifications = 10_000

    @Option(help: "Workers (one consumer group, in this process).")
    package var workers = 1

    @Option(name: .customLong("http-concurrency"), help: "POSTs in flight at the gateway.")
    package var httpConcurrency = 32

    @Option(help: "Partitions of every topic.")
    package var partitions = 4

    @Option(
        name: .customLong("window-bytes"),
        help: "Most notification bytes posted and not yet decided; 0: no bound (the mock keeps ~5 MB per partition).")
    package var windowBytes = 3 << 20

    @Flag(
        help:
            "Post every notification while no worker runs, then time the workers draining the full topic (needs about one partition per 2 MB of notifications)."
    )
    package var drain = false

    package init() {}

    package func validate() throws {
        guard notifications > 0, workers > 0, httpConcurrency > 0, partitions > 0, windowBytes >= 0 else {
            throw ValidationError("--notifications, --workers, --http-concurrency and --partitions must be above 0")
        }
    }

    package func run() async throws {
        var options = NotificationBurstBenchmark.Options()
        options.notifications = notifications
        options.workers = workers
        options.httpConcurrency = httpConcurrency
        options.partitions = partitions
        options.windowBytes = windowBytes
        options.drain = drain
        let result = try await NotificationBurstBenchmark.run(options) { line in
            FileHandle.standardError.write(Data((line + "\n").utf8))
        }
        try printJSON(result, snakeCaseKeys: true)
    }
}
