import ArgumentParser
import Demo
import Foundation
import Traffic

/// `verify-worker bench play`: the Google Play path's throughput and Google calls per purchase, beside the App
/// Store path in the same run.
package struct BenchPlayArguments: HarnessArguments {
    package static let commandConfiguration = CommandConfiguration(
        commandName: "play",
        abstract: "Measures the Google Play path (jobs/s, Google calls per purchase) and prints JSON.",
        discussion: """
            Four runs of the demo's pipeline (mock Kafka cluster, W in-process workers, a SQLite ledger), each on \
            --jobs jobs submitted in one burst: (1) Google Play, junk-heavy (the demo's Android mix: other apps' \
            purchases, forged signatures, replays, 20% genuine), (2) Google Play, genuine purchases only, both \
            against the Play simulator; then the App Store path on (3) seed 000's mix and (4) genuine purchases only, \
            against the Apple simulator, for ratios taken within one run. Reported per run: jobs/s, verdicts, and \
            for Play the Google calls per genuine purchase (target: 1 read, 1 acknowledge or consume) and per junk \
            job (target: 0), and whether every grant was acknowledged. Figures: docs/BENCHMARKS.md, "Google Play".
            """
    )

    @Option(help: "Jobs per run.")
    package var jobs = 4_000

    @Option(help: "Worker tasks (consumers in one group).")
    package var workers = 2

    @Option(help: "Partitions of every topic.")
    package var partitions = 8

    @Option(
        help: """
            Each worker's google_play_minute_quota (default: Google's 3,000 a minute per bucket, which bounds a \
            worker's reads to 50/s per bucket); raise it to measure the path rather than the quota.
            """)
    package var googlePlayMinuteQuota: Int?

    @Flag(inversion: .prefixedNo, help: "Also run the App Store path, for ratios.")
    package var appStore = true

    package init() {}

    package func validate() throws {
        guard jobs > 0, workers > 0, partitions > 0 else { throw ValidationError("counts must be positive") }
        if let googlePlayMinuteQuota, !(1...10_000_000).contains(googlePlayMinuteQuota) {
            throw ValidationError("--google-play-minute-quota must be 1 to 10000000")
        }
    }

    package func run() async throws {
        let bench = PlayBenchmark(
            jobs: jobs, workers: workers, partitions: partitions, minuteQuota: googlePlayMinuteQuota
        ) { line in
            FileHandle.standardError.write(Data("bench play: \(line)\n".utf8))
        }
        try printJSON(try await bench.run(appStore: appStore), snakeCaseKeys: true)
    }
}
