import ArgumentParser
import Foundation
import Traffic

/// `verify-worker bench rtdn`: a burst of Google Play Real-time developer notifications through the gateway and
/// workers.
package struct BenchRtdnArguments: HarnessArguments {
    package static let commandConfiguration = CommandConfiguration(
        commandName: "rtdn",
        abstract: "A burst of N Google Play RTDN pushes POSTed to the gateway, decided by the workers (JSON).",
        discussion: """
            In one process over a mock cluster: the Play simulator (0 ms latency), a SQLite ledger, the gateway with \
            its Google Play route checking the pushes' OIDC tokens against the simulator's JWK set, and W workers. \
            Play purchases are granted through google_play jobs first; the simulator's lifecycle events then make \
            the pushes (ten per subscription, two per one-time product), which the bench POSTs in one burst. \
            Reported: accept rate, decided per second (and per worker, re-reads included), undecided, duplicated, \
            outcomes, latency, and the purchase reads the simulator counted. Figures: docs/BENCHMARKS.md, \
            "Google Play notifications".
            """)

    @Option(help: "Notifications in the burst (ten per subscription, two per one-time product, granted first).")
    package var notifications = 10_000

    @OptionGroup
    var burst: BurstFlags

    @Option(
        help: """
            Each worker's google_play_minute_quota (default lifted, so the figure is the path's; Google's 3,000 a \
            minute per bucket bounds a worker to 50 reads/s per bucket).
            """)
    package var googlePlayMinuteQuota = 1_000_000

    @Option(
        name: .customLong("window-bytes"),
        help: "Most push bytes posted and not yet decided; 0: no bound (the mock keeps ~5 MB per partition).")
    package var windowBytes = 3 << 20

    package init() {}

    /// The burst these flags ask for.
    var options: NotificationBurst.Options {
        var options = burst.options(notifications: notifications, windowBytes: windowBytes)
        options.minuteQuota = googlePlayMinuteQuota
        return options
    }

    package func validate() throws {
        try options.validate()
        guard (1...10_000_000).contains(googlePlayMinuteQuota) else {
            throw ValidationError("--google-play-minute-quota must be 1 to 10000000")
        }
    }

    package func run() async throws {
        try printJSON(
            try await RTDNBurstBenchmark.run(options, progress: NotificationBurst.printProgress), snakeCaseKeys: true)
    }
}
