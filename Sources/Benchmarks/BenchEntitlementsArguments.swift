import ArgumentParser
import Entitlements
import Foundation
import Logging
import Traffic

/// `verify-worker bench entitlements`: the entitlement service's three figures, as JSON:
/// (a) projection throughput (verdicts/s, decoding included) of the SQLite and PostgreSQL stores, one batch at a time;
/// (b) API latency under an open-loop load of `--rate` requests/s (latency counted from each request's scheduled
///     time, so a slow answer cannot hide the requests queued behind it);
/// (c) publication-to-visibility: verdicts produced to a mock cluster at half the SQLite throughput, from the
///     record's Kafka timestamp to the end of the database transaction that made it visible to the API.
package struct BenchEntitlementsArguments: HarnessArguments {
    package static let commandConfiguration = CommandConfiguration(
        commandName: "entitlements",
        abstract: "Entitlement service: projection verdicts/s (SQLite, PostgreSQL), API latency, visibility delay.")

    @Option(help: "Verdicts projected per store.")
    package var verdicts: Int = 100_000
    @Option(help: "Verdicts per batch (one database transaction).")
    package var batch: Int = 2000
    @Option(name: .customLong("postgres-url"), help: "PostgreSQL to measure (default: scripts/test-postgres.sh).")
    package var postgresURL: String?
    @Flag(name: .customLong("skip-postgres"), help: "Measure SQLite only.")
    package var skipPostgres = false
    @Option(help: "API requests per second (open loop).")
    package var rate: Int = 1000
    @Option(name: .customLong("api-seconds"), help: "Duration of the API load.")
    package var apiSeconds: Int = 10
    @Option(name: .customLong("visibility-seconds"), help: "Duration of the visibility measurement.")
    package var visibilitySeconds: Int = 10
    @Option(name: .customLong("visibility-rate"), help: "Verdicts/s for the visibility run (default: half of (a)).")
    package var visibilityRate: Int?
    @Option(help: "Parts to run, comma-separated: projection, api, visibility.")
    package var parts: String = "projection,api,visibility"

    package init() {}

    package func run() async throws {
        var logger = Logger(label: "bench-entitlements")
        logger.logLevel = .critical
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "verify-bench-entitlements-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let traffic = BenchEntitlementTraffic.make(count: verdicts)
        var report = EntitlementsBenchmark.Report()

        // (a) SQLite, then PostgreSQL.
        let sqlitePath = directory.appendingPathComponent("bench.sqlite").path
        let sqlite = try SQLiteEntitlementStore(path: sqlitePath, logger: logger)
        try await sqlite.migrate()
        let selected = Set(parts.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
        // The store's own background work (PostgreSQL's pool, SQLite's checkpoints) runs as in the service: a service
        // of this command's group.
        try await HarnessServices.run([TaskService { try await sqlite.run() }], logger: logger) {
            report.projection.append(
                try await EntitlementsBenchmark.project(traffic, store: sqlite, backend: "sqlite", batch: batch))
            if !skipPostgres {
                let projection = try await BenchPostgres.with(url: postgresURL) { url in
                    let schema = "bench_ent_\(UUID().uuidString.prefix(6).lowercased())"
                    let postgres = try PostgresEntitlementStore(
                        url: url + (url.contains("?") ? "&" : "?") + "schema=\(schema)", logger: logger)
                    return try await HarnessServices.run([TaskService { try await postgres.run() }], logger: logger) {
                        try await postgres.migrate()
                        return try await EntitlementsBenchmark.project(
                            traffic, store: postgres, backend: "postgres", batch: batch)
                    }
                }
                report.projection.append(projection)
            }

            // (b) API latency over the SQLite store just filled.
            if selected.contains("api") {
                report.api = try await EntitlementsBenchmark.apiLatency(
                    store: sqlite, accounts: traffic.accounts, rate: rate, seconds: apiSeconds, logger: logger)
            }
            await sqlite.close()
        }

        // (c) Visibility at half the SQLite throughput.
        if selected.contains("visibility") {
            let sqliteRate = report.projection.first?.verdictsPerSecond ?? 10_000
            let target = visibilityRate ?? max(1, Int(sqliteRate / 2))
            report.visibility = try await EntitlementsBenchmark.visibility(
                rate: target, seconds: visibilitySeconds, directory: directory, logger: logger)
        }

        try printJSON(report)
    }
}
