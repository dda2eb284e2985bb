import ArgumentParser
import Foundation
import Traffic

/// `verify-worker bench replay-storm`: Apple calls per receipt when many accounts send the same receipts at once
/// (one Apple call per receipt is the goal), with coalescing and without, side by side.
package struct BenchReplayStormArguments: HarnessArguments {
    package static let commandConfiguration = CommandConfiguration(
        commandName: "replay-storm",
        abstract: "Counts Apple calls in replay storms and prints JSON.",
        discussion: """
            Each part on a fresh mock cluster, Apple simulator and ledger, the workers as `verify-worker run` \
            children of this executable: (a) the race: --receipts receipts (app and iOS 6 receipts in turn, the first \
            --sandbox-receipts of them sandbox ones), each submitted at once by --accounts-per-receipt accounts, plus \
            one more job of the first account for the first receipt, on --race-workers workers; (b) the storm: one \
            receipt sent by --storm-accounts accounts at once to --storm-workers workers. Each part runs with \
            coalescing (coalesce_apple_calls=true) and, unless --no-baseline, without it. Reported per run: the \
            simulator's Apple calls (by endpoint and status), grants, replays, and wall time. Figures: \
            docs/BENCHMARKS.md, "Replay storms".
            """
    )

    @Option(help: "Receipts of the race (a).")
    package var receipts = 20

    @Option(help: "Accounts sending each receipt in the race.")
    package var accountsPerReceipt = 8

    @Option(help: "How many of the race's receipts are sandbox receipts.")
    package var sandboxReceipts = 4

    @Option(help: "Workers of the race.")
    package var raceWorkers = 2

    @Option(help: "Accounts sending the one receipt of the storm (b).")
    package var stormAccounts = 5_000

    @Option(help: "Workers of the storm.")
    package var stormWorkers = 3

    @Option(help: "Simulated Apple latency, in milliseconds.")
    package var appleLatencyMs = 100

    @Option(help: "Partitions of every topic.")
    package var partitions = 12

    @Option(help: "The workers' ledger: a postgres:// URL (a fresh schema is made per run); default a SQLite file.")
    package var ledgerURL: String?

    @Option(help: "The parts to run, comma-separated: a (race), b (storm).")
    package var parts = "a,b"

    @Flag(inversion: .prefixedNo, help: "Run with coalescing (the default configuration).")
    package var coalescing = true

    @Flag(inversion: .prefixedNo, help: "Also run with coalesce_apple_calls=false, for the figures side by side.")
    package var baseline = true

    @Flag(help: "Run the workers inside the bench process instead of as `verify-worker run` children.")
    package var workersInProcess = false

    package init() {}

    package func validate() throws {
        guard receipts > 0, accountsPerReceipt > 0, stormAccounts > 0, raceWorkers > 0, stormWorkers > 0,
            partitions > 0, appleLatencyMs >= 0
        else { throw ValidationError("counts must be positive") }
        guard (0...receipts).contains(sandboxReceipts) else {
            throw ValidationError("--sandbox-receipts must be between 0 and --receipts")
        }
        guard coalescing || baseline else { throw ValidationError("--no-coalescing with --no-baseline runs nothing") }
        let names = parts.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        guard !names.isEmpty, names.allSatisfy({ $0 == "a" || $0 == "b" }) else {
            throw ValidationError("--parts takes a and b separated by commas")
        }
        if let ledgerURL, !ledgerURL.hasPrefix("postgres://"), !ledgerURL.hasPrefix("postgresql://") {
            throw ValidationError("--ledger-url takes a postgres:// URL (the default is a SQLite file per run)")
        }
    }

    package func run() async throws {
        let selected = Set(parts.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
        let settings = ReplayStormSettings(
            receipts: receipts, accountsPerReceipt: accountsPerReceipt, sandboxReceipts: sandboxReceipts,
            raceWorkers: raceWorkers, stormAccounts: stormAccounts, stormWorkers: stormWorkers,
            appleLatencyMs: appleLatencyMs, partitions: partitions, ledgerURL: ledgerURL, coalescing: coalescing,
            baseline: baseline, workersInProcess: workersInProcess)
        let bench = ReplayStormBenchmark(settings: settings) { line in
            FileHandle.standardError.write(Data("bench replay-storm: \(line)\n".utf8))
        }
        var result = ReplayStormResult(
            cores: ProcessInfo.processInfo.activeProcessorCount, appleLatencyMs: appleLatencyMs,
            ledger: ledgerURL == nil ? "sqlite" : "postgres", workersInProcess: workersInProcess)
        if selected.contains("a") { result.race = try await bench.race() }
        if selected.contains("b") { result.storm = try await bench.storm() }
        result.loadAverage1m = PipelineBenchmark.loadAverage()
        try printJSON(result, snakeCaseKeys: true)
    }
}
