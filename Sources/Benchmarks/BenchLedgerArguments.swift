import ArgumentParser
import Foundation
import Ledger
import Traffic
import Worker

/// `verify-worker bench ledger`: claims per second and latency of both ledgers, 1 and 64 concurrent tasks,
/// fresh and repeated transaction ids, in one run. The logic lives in `LedgerBenchmark` (Benchmarks) (it measures `LedgerSettlement`).
package struct BenchLedgerArguments: HarnessArguments {
    package static let commandConfiguration = CommandConfiguration(
        commandName: "ledger",
        abstract: "Claims/s and p50/p99 latency of the PostgreSQL and SQLite ledgers (JSON on stdout)."
    )

    @Option(
        name: .customLong("postgres-url"),
        help: "PostgreSQL to measure. Default: start a throwaway one with scripts/test-postgres.sh (as root).")
    package var postgresURL: String?

    @Option(
        name: .customLong("sqlite-path"),
        help: "Path prefix of the SQLite files (one per scenario, deleted after). Default: a temp directory.")
    package var sqlitePath: String?

    @Option(help: "Claims (jobs settled) per scenario.")
    package var claims: Int = 2000

    package init() {}

    package func run() async throws {
        let report = try await LedgerBenchmark.runSuite(
            postgresURL: postgresURL, sqlitePath: sqlitePath, claims: claims)
        try printJSON(report, snakeCaseKeys: true)
    }
}
