import AppleSimulator
import Demo
import Foundation
import Messages
import Observability
import Traffic
import Worker

/// What one `bench replay-storm` run measures (the command's options, without the parsing).
package struct ReplayStormSettings: Sendable {
    package var receipts: Int
    package var accountsPerReceipt: Int
    package var sandboxReceipts: Int
    package var raceWorkers: Int
    package var stormAccounts: Int
    package var stormWorkers: Int
    package var appleLatencyMs: Int
    package var partitions: Int
    package var ledgerURL: String?
    package var coalescing: Bool
    package var baseline: Bool
    package var workersInProcess: Bool

    package init(
        receipts: Int = 20,
        accountsPerReceipt: Int = 8,
        sandboxReceipts: Int = 4,
        raceWorkers: Int = 2,
        stormAccounts: Int = 5_000,
        stormWorkers: Int = 3,
        appleLatencyMs: Int = 100,
        partitions: Int = 12,
        ledgerURL: String? = nil,
        coalescing: Bool = true,
        baseline: Bool = true,
        workersInProcess: Bool = false
    ) {
        self.receipts = receipts
        self.accountsPerReceipt = accountsPerReceipt
        self.sandboxReceipts = sandboxReceipts
        self.raceWorkers = raceWorkers
        self.stormAccounts = stormAccounts
        self.stormWorkers = stormWorkers
        self.appleLatencyMs = appleLatencyMs
        self.partitions = partitions
        self.ledgerURL = ledgerURL
        self.coalescing = coalescing
        self.baseline = baseline
        self.workersInProcess = workersInProcess
    }
}

/// What `bench replay-storm` prints (snake_case JSON).
package struct ReplayStormResult: Codable, Sendable {
    /// One run of a scenario.
    package struct Run: Codable, Sendable {
        package var coalescing: Bool
        package var jobs: Int
        package var workers: Int
        /// Requests to Apple's endpoints (the simulator's count), by endpoint and by answer status.
        package var appleCalls: Int
        /// Distinct requests among them (a receipt asked twice counts once).
        package var appleDistinct: Int
        package var appleRequests: [String: Int]
        package var appleStatuses: [String: Int]
        /// One call per receipt, plus one per 21007 answer (a sandbox receipt asked at production first).
        package var appleCallTarget: Int
        package var granted: Int
        package var replayed: Int
        package var alreadyGranted: Int
        /// Every outcome as `outcome` or `outcome/reason`.
        package var verdicts: [String: Int]
        /// Jobs without a verdict (must be 0) and with more than one (redeliveries).
        package var undecided: Int
        package var duplicated: Int
        /// From the first submit to the last verdict read.
        package var seconds: Double
        /// Worker children only: each worker's `verify_apple_calls_total` and `verify_apple_calls_coalesced_total`.
        package var workerAppleCalls: [Int]?
        package var workerCoalesced: [Int]?
        package var workerExits: [Int32?]?
    }

    package struct Scenario: Codable, Sendable {
        package var receipts: Int
        package var accountsPerReceipt: Int
        package var sandboxReceipts: Int
        package var jobs: Int
        package var workers: Int
        package var coalesced: Run?
        package var uncoalesced: Run?
    }

    package var cores: Int
    package var appleLatencyMs: Int
    package var ledger: String
    package var workersInProcess: Bool
    package var loadAverage1m: Double?
    package var race: Scenario?
    package var storm: Scenario?
}

/// Runs the scenarios of `bench replay-storm` through ``DemoRun``.
package struct ReplayStormBenchmark: Sendable {
    package let settings: ReplayStormSettings
    package let progress: @Sendable (String) -> Void

    package func race() async throws -> ReplayStormResult.Scenario {
        let receipts = settings.receipts
        let accounts = settings.accountsPerReceipt
        let sandbox = settings.sandboxReceipts
        return try await scenario(
            name: "(a) race", receipts: receipts, accountsPerReceipt: accounts, sandboxReceipts: sandbox,
            workers: settings.raceWorkers
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

    package func storm() async throws -> ReplayStormResult.Scenario {
        let accounts = settings.stormAccounts
        return try await scenario(
            name: "(b) storm", receipts: 1, accountsPerReceipt: accounts, sandboxReceipts: 0,
            workers: settings.stormWorkers
        ) { simulator in
            let receipt = try simulator.mint(
                MintRequest(
                    bundleId: DemoApp.bundleID, productId: Self.product, format: .appReceipt,
                    environment: .production))
            return (0..<accounts).map { Self.job(receipt, account: "acct-\($0)") }
        }
    }

    package static let product = "com.example.verifyworker.coins100"

    package static func job(_ minted: MintedReceipt, account: String) -> GeneratedJob {
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
        if settings.coalescing {
            progress("\(name): \(count) jobs, \(workers) workers, coalescing")
            scenario.coalesced = try await run(
                jobs: jobs, count: count, receipts: receipts, workers: workers, coalescing: true)
        }
        if settings.baseline {
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
        options.partitions = settings.partitions
        options.appleLatencyMs = Double(settings.appleLatencyMs)
        options.appleDeadline = .seconds(120)
        options.repeatsLast = false
        options.progressInterval = nil
        options.scenario = jobs
        options.workerSettings["coalesce_apple_calls"] = coalescing ? "true" : "false"
        if let url = settings.ledgerURL {
            // A fresh schema per run: the runs must not find each other's claims.
            let tag = UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(12)
            options.ledgerURL = url + (url.contains("?") ? "&" : "?") + "schema=storm_\(tag)"
        }
        if !settings.workersInProcess { options.workerExecutable = RunningExecutable.url }
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
        if !settings.workersInProcess {
            run.workerAppleCalls = sampler.finalCounts(of: MetricNames.appleCalls)
            run.workerCoalesced = sampler.finalCounts(of: MetricNames.appleCallsCoalesced)
            run.workerExits = report.workerExits
        }
        return run
    }
}
