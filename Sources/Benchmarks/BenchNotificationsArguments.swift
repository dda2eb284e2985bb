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

    @OptionGroup
    var burst: BurstFlags

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

    /// The burst these flags ask for.
    var options: NotificationBurst.Options {
        var options = burst.options(notifications: notifications, windowBytes: windowBytes)
        options.drain = drain
        return options
    }

    package func validate() throws {
        try options.validate()
    }

    package func run() async throws {
        try printJSON(
            try await NotificationBurstBenchmark.run(options, progress: NotificationBurst.printProgress),
            snakeCaseKeys: true)
    }
}
