import AppleSimulator
import ArgumentParser
import Benchmarks
import Demo
import Foundation
import Messages
import Observability
import Pipeline
import Traffic

/// `verify-worker bench replay-storm`: Apple calls per receipt when many accounts send the same receipts at once
/// (issue 18.1), with coalescing and without, side by side.
struct BenchReplayStormCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
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
    var receipts = 20

    @Option(help: "Accounts sending each receipt in the race.")
    var accountsPerReceipt = 8

    @Option(help: "How many of the race's receipts are sandbox receipts.")
    var sandboxReceipts = 4

    @Option(help: "Workers of the race.")
    var raceWorkers = 2

    @Option(help: "Accounts sending the one receipt of the storm (b).")
    var stormAccounts = 5_000

    @Option(help: "Workers of the storm.")
    var stormWorkers = 3

    @Option(help: "Simulated Apple latency, in milliseconds.")
    var appleLatencyMs = 100

    @Option(help: "Partitions of every topic.")
    var partitions = 12

    @Option(help: "The workers' ledger: a postgres:// URL (a fresh schema is made per run); default a SQLite file.")
    var ledgerURL: String?

    @Option(help: "The parts to run, comma-separated: a (race), b (storm).")
    var parts = "a,b"

    @Flag(inversion: .prefixedNo, help: "Run with coalescing (the default configuration).")
    var coalescing = true

    @Flag(inversion: .prefixedNo, help: "Also run with coalesce_apple_calls=false, for the figures side by side.")
    var baseline = true

    @Flag(help: "Run the workers inside the bench process instead of as `verify-worker run` children.")
    var workersInProcess = false

    func validate() throws {
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

    func run() async throws {
        let selected = Set(parts.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
        let bench = ReplayStormBenchmark(command: self) { line in
            FileHandle.standardError.write(Data("bench replay-storm: \(line)\n".utf8))
        }
        var result = ReplayStormResult(
            cores: ProcessInfo.processInfo.activeProcessorCount, appleLatencyMs: appleLatencyMs,
            ledger: ledgerURL == nil ? "sqlite" : "postgres", workersInProcess: workersInProcess)
        if selected.contains("a") { result.race = try await bench.race() }
        if selected.contains("b") { result.storm = try await bench.storm() }
        result.loadAverage1m = PipelineBenchmark.loadAverage()
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        FileHandle.standardOutput.write(try encoder.encode(result) + Data("\n".utf8))
    }
}

/// What `bench replay-storm` prints (snake_case JSON).
struct ReplayStormResult: Codable, Sendable {
    /// One run of a scenario.
    struct Run: Codable, Sendable {
        var coalescing: Bool
        var jobs: Int
        var workers: Int
        /// Requests to Apple's endpoints (the simulator's count), by endpoint and by answer status.
        var appleCalls: Int
        /// Distinct requests among them (a receipt asked twice counts once).
        var appleDistinct: Int
        var appleRequests: [String: Int]
        var appleStatuses: [String: Int]
        /// One call per receipt, plus one per 21007 answer (a sandbox receipt asked at production first).
        var appleCallTarget: Int
        var granted: Int
        var replayed: Int
        var alreadyGranted: Int
        /// Every outcome as `outcome` or `outcome/reason`.
        var verdicts: [String: Int]
        /// Jobs without a verdict (must be 0) and with more than one (redeliveries).
        var undecided: Int
        var duplicated: Int
        /// From the first submit to the last verdict read.
        var seconds: Double
        /// Worker children only: each worker's `verify_apple_calls_total` and `verify_apple_calls_coalesced_total`.
        var workerAppleCalls: [Int]?
        var workerCoalesced: [Int]?
        var workerExits: [Int32?]?
    }

    struct Scenario: Codable, Sendable {
        var receipts: Int
        var accountsPerReceipt: Int
        var sandboxReceipts: Int
        var jobs: Int
        var workers: Int
        var coalesced: Run?
        var uncoalesced: Run?
    }

    var cores: Int
    var appleLatencyMs: Int
    var ledger: String
    var workersInProcess: Bool
    var loadAverage1m: Double?
    var race: Scenario?
    var storm: Scenario?
}

/// Runs the scenarios of `bench replay-storm` through ``DemoRun``.
struct ReplayStormBenchmark: Sendable {
    let command: BenchReplayStormCommand
    let progress: @Sendable (String) -> Void

    func race() async throws -> ReplayStormResult.Scenario {
        let receipts = command.receipts
        let accounts = command.accountsPerReceipt
        let sandbox = command.sandboxReceipts
        return try await scenario(
            name: "(a) race", receipts: receipts, accountsPerReceipt: accounts, sandboxReceipts: sandbox,
            workers: command.raceWorkers
        ) { simulator in
            let minted = try (0..<receipts).map { index in
                try simulator.mint(
                    MintRequest(
                        bundleId: DemoApp.bundleID, productId: Self.product,
                        format: index.isMultiple(of: 2) ? .appReceipt : .transactionReceipt,
                        environment: index < sandbox ? .sandbox : .production))
            }
            // Account by account, every receipt in turn: each receipt's jobs spread over the whole burst.
            var jobs: [GeneratedJob] = []
            for account in 0..<accounts {
                for (index, receipt) in minted.enumerated() {
                    jobs.append(Self.job(receipt, account: "acct-\(index)-\(account)"))
                }
            }
            // The duplicate: the first account sends the first receipt again, as a second job.
            jobs.append(Self.job(minted[0], account: "acct-0-0"))
            return jobs
        }
    }

    func storm() async throws -> ReplayStormResult.Scenario {
        let accounts = command.stormAccounts
        return try await scenario(
            name: "(b) storm", receipts: 1, accountsPerReceipt: accounts, sandboxReceipts: 0,
            workers: command.stormWorkers
        ) { simulator in
            let receipt = try simulator.mint(
                MintRequest(
                    bundleId: DemoApp.bundleID, productId: Self.product, format: .appReceipt,
                    environment: .production))
            return (0..<accounts).map { Self.job(receipt, account: "acct-\($0)") }
        }
    }

    static let product = "com.example.verifyworker.coins100"

    static func job(_ minted: MintedReceipt, account: String) -> GeneratedJob {
        let job = ReceiptJob(
            jobID: "storm-" + UUID().uuidString.lowercased(), accountID: account, proof: .receipt(minted.receipt),
            bundleID: DemoApp.bundleID, submittedAt: Date())
        return GeneratedJob(
            category: .genuine, job: job, transactionID: minted.transaction.transactionId)
    }

    private func scenario(
        name: String, receipts: Int, accountsPerReceipt: Int, sandboxReceipts: Int, workers: Int,
        jobs: @escaping @Sendable (AppleSimulator) throws -> [GeneratedJob]
    ) async throws -> ReplayStormResult.Scenario {
        let count = receipts * accountsPerReceipt + (receipts > 1 ? 1 : 0)
        var scenario = ReplayStormResult.Scenario(
            receipts: receipts, accountsPerReceipt: accountsPerReceipt, sandboxReceipts: sandboxReceipts, jobs: count,
            workers: workers)
        if command.coalescing {
            progress("\(name): \(count) jobs, \(workers) workers, coalescing")
            scenario.coalesced = try await run(
                jobs: jobs, count: count, receipts: receipts, workers: workers, coalescing: true)
        }
        if command.baseline {
            progress("\(name): \(count) jobs, \(workers) workers, no coalescing")
            scenario.uncoalesced = try await run(
                jobs: jobs, count: count, receipts: receipts, workers: workers, coalescing: false)
        }
        return scenario
    }

    private func run(
        jobs: @escaping @Sendable (AppleSimulator) throws -> [GeneratedJob], count: Int, receipts: Int, workers: Int,
        coalescing: Bool
    ) async throws -> ReplayStormResult.Run {
        var options = DemoOptions()
        options.jobs = count
        options.workers = workers
        options.partitions = command.partitions
        options.appleLatencyMs = Double(command.appleLatencyMs)
        options.appleDeadline = .seconds(120)
        options.repeatsLast = false
        options.progressInterval = nil
        options.scenario = jobs
        options.workerSettings["coalesce_apple_calls"] = coalescing ? "true" : "false"
        if let url = command.ledgerURL {
            // A fresh schema per run: the runs must not find each other's claims.
            let tag = UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(12)
            options.ledgerURL = url + (url.contains("?") ? "&" : "?") + "schema=storm_\(tag)"
        }
        if !command.workersInProcess { options.workerExecutable = RunningExecutable.url }
        let sampler = WorkerProcessSampler()
        let report = try await DemoRun(options: options).run(watch: sampler.watch)

        var verdicts: [String: Int] = [:]
        for entry in report.entries {
            guard let verdict = entry.verdicts.first else { continue }
            let name = verdict.reason.map { "\(verdict.outcome.rawValue)/\($0.rawValue)" } ?? verdict.outcome.rawValue
            verdicts[name, default: 0] += 1
        }
        let requests = report.appleStats.requests.filter { !$0.key.hasPrefix("sim/") }
        var run = ReplayStormResult.Run(
            coalescing: coalescing, jobs: report.entries.count, workers: workers, appleCalls: report.appleCalls,
            appleDistinct: report.appleStats.distinct, appleRequests: requests,
            appleStatuses: report.appleStats.statuses,
            appleCallTarget: receipts + (report.appleStats.statuses["21007"] ?? 0),
            granted: report.entries.filter { $0.verdicts.first?.outcome == .granted }.count,
            replayed: report.entries.filter { $0.verdicts.first?.reason == .replayed }.count,
            alreadyGranted: report.entries.filter { $0.verdicts.first?.outcome == .alreadyGranted }.count,
            verdicts: verdicts, undecided: report.entries.filter(\.verdicts.isEmpty).count,
            duplicated: report.entries.filter { $0.verdicts.count > 1 }.count,
            seconds: Double(report.elapsed.components.seconds) + Double(report.elapsed.components.attoseconds) / 1e18)
        if !command.workersInProcess {
            run.workerAppleCalls = sampler.finalCounts(of: MetricNames.appleCalls)
            run.workerCoalesced = sampler.finalCounts(of: MetricNames.appleCallsCoalesced)
            run.workerExits = report.workerExits
        }
        return run
    }
}
