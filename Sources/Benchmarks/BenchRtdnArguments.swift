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

    @Option(help: "Workers (one consumer group, in this process).")
    package var workers = 1

    @Option(name: .customLong("http-concurrency"), help: "POSTs in flight at the gateway.")
    package var httpConcurrency = 32

    @Option(help: "Partitions of every topic.")
    package var partitions = 4

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

    package func validate() throws {
        guard notifications > 0, workers > 0, httpConcurrency > 0, partitions > 0, windowBytes >= 0 else {
            throw ValidationError("--notifications, --workers, --http-concurrency and --partitions must be above 0")
        }
        guard (1...10_000_000).contains(googlePlayMinuteQuota) else {
            throw ValidationError("--google-play-minute-quota must be 1 to 10000000")
        }
    }

    package func run() async throws {
        var options = RTDNBurstBenchmark.Options()
        options.notifications = notifications
        options.workers = workers
        options.httpConcurrency = httpConcurrency
        options.partitions = partitions
        options.minuteQuota = googlePlayMinuteQuota
        options.windowBytes = windowBytes
        let result = try await RTDNBurstBenchmark.run(options) { line in
            FileHandle.standardError.write(Data((line + "\n").utf8))
        }
        try printJSON(result, snakeCaseKeys: true)
    }
}
