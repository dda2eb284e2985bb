import ArgumentParser
import Benchmarks
import Foundation
import Ledger
import Pipeline

/// `verify-worker bench ledger`: claims per second and latency of both ledgers, 1 and 64 concurrent tasks,
/// fresh and repeated transaction ids, in one run. The logic lives in `Pipeline.LedgerBenchmark` (it measures `LedgerSettlement`).
struct BenchLedgerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger",
        abstract: "Claims/s and p50/p99 latency of the PostgreSQL and SQLite ledgers (JSON on stdout)."
    )

    @Option(
        name: .customLong("postgres-url"),
        help: "PostgreSQL to measure. Default: start a throwaway one with scripts/test-postgres.sh (as root).")
    var postgresURL: String?

    @Option(
        name: .customLong("sqlite-path"),
        help: "Path prefix of the SQLite files (one per scenario, deleted after). Default: a temp directory.")
    var sqlitePath: String?

    @Option(help: "Claims (jobs settled) per scenario.")
    var claims: Int = 2000

    func run() async throws {
        let (postgres, startedHere) = try postgresURL.map { ($0, false) } ?? Self.startPostgres()
        defer { if startedHere { _ = try? Self.script("stop") } }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "verify-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let base = sqlitePath ?? directory.appendingPathComponent("ledger").path
        let benchmark = LedgerBenchmark(claims: claims)
        var results: [LedgerBenchmark.Result] = []
        for backend in ["postgres", "sqlite"] {
            for concurrency in [1, 64] {
                for ids in LedgerBenchmark.IDs.allCases {
                    let tag = "c\(concurrency)_\(ids.rawValue)_\(UUID().uuidString.prefix(6).lowercased())"
                    let url =
                        backend == "postgres"
                        ? postgres + (postgres.contains("?") ? "&" : "?") + "schema=bench_\(tag)"
                        : "sqlite:\(base)-\(tag)"
                    let configuration = LedgerConfiguration(maximumConnections: 32)
                    let result = try await LedgerFactory.withLedger(url: url, configuration: configuration) { ledger in
                        try await benchmark.run(ledger: ledger, backend: backend, concurrency: concurrency, ids: ids)
                    }
                    if backend == "sqlite" {
                        for suffix in ["", "-wal", "-shm"] {
                            try? FileManager.default.removeItem(atPath: "\(base)-\(tag)\(suffix)")
                        }
                    }
                    results.append(result)
                }
            }
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let report = Report(claimsPerScenario: claims, results: results)
        print(String(decoding: try encoder.encode(report), as: UTF8.self))
    }

    struct Report: Encodable {
        var benchmark = "ledger"
        var claimsPerScenario: Int
        var results: [LedgerBenchmark.Result]

        enum CodingKeys: String, CodingKey {
            case benchmark, results
            case claimsPerScenario = "claims_per_scenario"
        }
    }

    /// Uses the running test PostgreSQL, or starts one (and stops it at the end).
    static func startPostgres() throws -> (String, Bool) {
        if let url = try? script("url") { return (url, false) }
        do {
            return (try script("start"), true)
        } catch {
            throw ValidationError(
                "no --postgres-url given and scripts/test-postgres.sh could not start one (\(error)); "
                    + "run it as root from the package root, or pass --postgres-url")
        }
    }

    /// Runs scripts/test-postgres.sh (or $VERIFY_PG_SCRIPT) and returns its last line of output.
    static func script(_ argument: String) throws -> String {
        let path = ProcessInfo.processInfo.environment["VERIFY_PG_SCRIPT"] ?? "scripts/test-postgres.sh"
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw ValidationError("\(path) not found (run from the package root or set VERIFY_PG_SCRIPT)")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = [argument]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.standardError
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw ValidationError("\(path) \(argument) exited with \(process.terminationStatus)")
        }
        return output.split(separator: "\n").last.map(String.init) ?? ""
    }
}
