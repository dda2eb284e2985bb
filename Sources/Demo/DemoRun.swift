import AppleClients
import AppleSimulator
import Foundation
import Gateway
import Kafka
import Logging
import Messages
import Observability
import Operations
import PlaySimulator
import RateLimiter
import Receipts
import ServiceLifecycle
import StoreHTTP
import Synchronization
import Traffic
import Worker

/// What `verify-worker demo` runs.
package struct DemoOptions: Sendable {
    package init() {}

    /// Jobs to produce. Default: 10 000.
    package var jobs = 10_000
    /// The traffic mix. Default: seed 000's.
    package var mix = TrafficMix.seed000
    /// Added latency of every simulated Apple answer, in milliseconds. Default: 0.
    package var appleLatencyMs: Double = 0
    /// Share of Apple answers that are 21005 (overloaded). Default: 0.
    package var apple21005Ratio: Double = 0
    /// Worker tasks (consumers in one group). Default: 2.
    package var workers = 2
    /// Partitions of every topic. Default: 8.
    package var partitions = 8
    /// How long one job may keep trying Apple before it is `unverifiable`. Default: 30 s.
    package var appleDeadline: Duration = .seconds(30)
    /// The workers' ledger; nil: a SQLite file in the run's temporary directory.
    package var ledgerURL: String?
    /// Produce repeats only once every other job is decided, so a replay never races its original: in the field
    /// a repeat arrives after the purchase it copies was verified. Off, a replay submitted in the same burst as its
    /// original may be decided first and win the transaction (the original then gets `replayed`). Default: true.
    package var repeatsLast = true
    /// Traffic seed. Default: 42.
    package var seed: UInt64 = 42
    /// Share of jobs that are Google Play purchases, decided against a Play simulator run beside the Apple one
    /// (`verify-worker demo` sets 0.4). Default: 0 (App Store traffic only).
    package var playShare: Double = 0
    /// The Google Play traffic mix. Default: ``TrafficMix/android``.
    package var playMix = TrafficMix.android
    /// How often `onProgress` is called; nil for never. Default: 1 s.
    package var progressInterval: Duration? = .seconds(1)
    /// Worker configuration keys (as in `verify-worker run --help`) set over the demo's own, e.g.
    /// `apple_max_concurrency` or `max_in_flight` for `bench pipeline`. Default: none.
    package var workerSettings: [String: String] = [:]
    /// Submit at most this many jobs per second (evenly spaced) instead of all at once, to measure latency below
    /// saturation. Default: nil (one burst).
    package var submitRatePerSecond: Double?
    /// Run each worker as a child process of this executable (`verify-worker run`, configured through `VERIFY_…`
    /// variables) instead of in this process, so its memory and metrics are its own. Default: nil (in process).
    package var workerExecutable: URL?
    /// Produce every job before the workers start, so they join the group and drain a backlog (the method of a
    /// consumer throughput test: the load generator does not compete with the workers for the CPU while they run).
    /// The report's `elapsed` and latencies then include the workers' start; `verdictsRead` and
    /// `verdictTimestampSpan` measure the drain. Default: false (one burst while the workers run).
    package var prefill = false
    /// The jobs to run instead of `jobs` generated ones of `mix` (a benchmark's own scenario), made once the
    /// simulator runs. Default: nil.
    package var scenario: (@Sendable (AppleSimulator) throws -> [GeneratedJob])?
    /// The entitlement service to run beside the workers (one more part of the run's group); `afterDecided` gets it
    /// listening and caught up with every verdict. Default: none.
    package var entitlements: DemoEntitlements?
    /// Runs once every job is decided and the workers stopped, while the mock cluster (its bootstrap servers given)
    /// still holds the verdicts and the entitlement service, if any, still runs. Default: nil.
    package var afterDecided:
        (
            @Sendable (
                _ bootstrap: String, _ report: DemoReport, _ entitlements: DemoEntitlements.Running?
            ) async throws -> Void
        )?
}

/// Watches worker child processes during a run (`bench pipeline` samples their metrics and memory).
package struct DemoWorkerWatch: Sendable {
    /// Runs from the moment every worker holds its partitions until the last verdict is read; then cancelled.
    package var running: @Sendable ([DemoWorkerProcess]) async -> Void
    /// Called once every job is decided, before the workers are stopped.
    package var decided: @Sendable ([DemoWorkerProcess]) async -> Void

    package init(
        running: @escaping @Sendable ([DemoWorkerProcess]) async -> Void,
        decided: @escaping @Sendable ([DemoWorkerProcess]) async -> Void
    ) {
        self.running = running
        self.decided = decided
    }
}

/// The app the demo verifies for.
package enum DemoApp {
    package static let bundleID = "com.example.verifyworker"
    package static let catalog = Catalog(
        bundleIDs: [bundleID],
        products: [
            .init(id: "com.example.verifyworker.coins100", type: .consumable),
            .init(id: "com.example.verifyworker.premium", type: .nonConsumable),
            .init(id: "com.example.verifyworker.seasonpass", type: .nonRenewing),
        ])
}

/// Progress of a running demo.
package struct DemoProgress: Sendable {
    package var jobs: Int
    package var produced: Int
    package var decided: Int
    package var appleCalls: Int
    package var elapsed: Duration
}

/// The outcome of a demo run: every generated job with the verdicts it got.
package struct DemoReport: Sendable {
    package struct Entry: Sendable {
        package var generated: GeneratedJob
        /// Every verdict seen for the job (exactly one when nothing went wrong).
        package var verdicts: [Verdict]
        package var latency: Duration?
        /// When the job was submitted, from the start of the run (the first submit).
        package var submittedAfter: Duration?
    }

    package var entries: [Entry]
    /// Requests the simulated Apple counted per endpoint, and answers per status.
    package var appleStats: SimulatorStats.Snapshot
    /// From the first job produced to the last verdict read.
    package var elapsed: Duration
    package var workers: Int
    package var partitions: Int
    /// From the start of the run to the first and to the last verdict read (the first verdict of each job).
    package var verdictsRead: (first: Duration, last: Duration)?
    /// From the earliest Kafka timestamp of a verdict read to the latest: when the workers' producers took the
    /// first and the last verdict (librdkafka stamps a record when it is produced; milliseconds).
    package var verdictTimestampSpan: Duration?
    /// From the start of the run to the last job handed to the frontend's producer and acknowledged.
    package var produced: Duration?
    /// Worker children only: each one's exit status after the run's SIGTERM (0: drained and closed cleanly; nil:
    /// killed after the grace and still not gone).
    package var workerExits: [Int32?] = []
    /// With Google Play traffic: Google calls counted by the Play simulator, and the acknowledgements. Default: nil.
    package var playCalls: DemoPlayCalls?

    /// Requests to Apple's verification endpoints (the simulator's own `sim/*` endpoints excluded).
    package var appleCalls: Int { appleStats.requests.filter { !$0.key.hasPrefix("sim/") }.values.reduce(0, +) }
}

/// Runs the whole system in one process: a mock Kafka cluster, the Apple simulator, W workers and a verdict reader.
package struct DemoRun: Sendable {
    package var options: DemoOptions
    package var logger: Logger

    package init(options: DemoOptions, logger: Logger = DemoRun.quietLogger) {
        self.options = options
        self.logger = logger
    }

    package static let quietLogger: Logger = {
        var logger = Logger(label: "demo")
        logger.logLevel = .warning
        return logger
    }()

    package func run(
        watch: DemoWorkerWatch? = nil, onProgress: @escaping @Sendable (DemoProgress) -> Void = { _ in }
    ) async throws -> DemoReport {
        let cluster = try MockKafkaCluster(brokers: 1)
        for topic in [Topics.jobs, Topics.verdicts, Topics.deadLetters, Topics.control] {
            try cluster.createTopic(topic, partitions: options.partitions)
        }
        var simulatorConfiguration = AppleSimulatorConfiguration()
        // Stopping the simulator by cancellation makes Hummingbird log a CancellationError: not worth showing.
        simulatorConfiguration.logger.logLevel = .critical
        let simulator = try AppleSimulator(configuration: simulatorConfiguration)
        // Minted in process, before anything listens.
        var generator = SeedTrafficGenerator(
            simulator: simulator, bundleID: DemoApp.bundleID, productIDs: DemoApp.catalog.products.keys.sorted(),
            mix: options.mix, seed: options.seed)
        let playJobs = options.scenario == nil ? Int((Double(options.jobs) * options.playShare).rounded()) : 0
        let play: PlaySimulator? = playJobs > 0 ? Self.playSimulator() : nil
        var generated =
            try options.scenario.map { try $0(simulator) } ?? generator.generate(count: options.jobs - playJobs)
        if let play {
            var playGenerator = PlayTrafficGenerator(
                minter: play, packageName: DemoApp.playPackage, products: DemoApp.playTrafficProducts,
                mix: options.playMix, seed: options.seed)
            generated = PlayTrafficGenerator.interleave(
                appStore: generated, play: try playGenerator.generate(count: playJobs), seed: options.seed)
            play.stats.reset()
        }
        simulator.stats.reset()

        let directory = try DemoFiles(simulator: simulator, play: play)
        defer { directory.remove() }
        let bootstrap = cluster.bootstrapServers
        let health = (0..<options.workers).map { _ in WorkerHealth() }
        let stop = OneShot<Void>()
        let begin = OneShot<Void>()
        let tally = DemoTally(jobs: generated)
        let collector = try TrafficReader.demo(bootstrapServers: bootstrap, tally: tally, logger: logger)

        // In-process workers (no executable given): each `verify-worker run`'s runtime, from `begin` (after the
        // prefill, if any) until `stop` (drain). Their settings are checked here, so a bad one fails with its key before
        // anything starts; the simulator's port, still unknown, changes only the Apple URLs.
        var workers: [any Service] = []
        if options.workerExecutable == nil {
            for index in 0..<options.workers {
                _ = try Self.workerConfiguration(
                    index: index, bootstrap: bootstrap, port: 1, files: directory, ledgerURL: options.ledgerURL,
                    jobDeadline: options.appleDeadline, extra: options.workerSettings)
                workers.append(
                    TaskService { [options, logger] in
                        guard await begin.wait() != nil else { return }
                        let port = try await simulator.waitUntilReady()
                        let playPort = try await play?.waitUntilReady()
                        let configuration = try Self.workerConfiguration(
                            index: index, bootstrap: bootstrap, port: port, playPort: playPort, files: directory,
                            ledgerURL: options.ledgerURL, jobDeadline: options.appleDeadline,
                            extra: options.workerSettings)
                        let runtime = WorkerRuntime(
                            configuration: configuration, logger: logger, serveOperations: false)
                        _ = try await runtime.run(health: health[index]) { await stop.wait() }
                    })
            }
        }
        let entitlements = try options.entitlements?.prepare(bootstrap: bootstrap, logger: logger)
        defer { entitlements?.remove() }
        // One group for the run's in-process parts: the simulator, the verdict reader, the entitlement service, the
        // workers. A group stops its services in reverse order: the workers drain first, while the simulator still
        // answers them.
        let playServices: [any Service] = play.map { play in [TaskService { try await play.run() }] } ?? []
        let services: [any Service] =
            [SimulatorService(simulator)] + playServices + [collector] + (entitlements?.services ?? []) + workers
        return try await HarnessServices.run(services, logger: logger) {
            let port = try await simulator.waitUntilReady()
            simulator.setFaults(faultPlan())
            var playPort: Int?
            if let play {
                playPort = try await play.waitUntilReady()
                // The key file names the token URL, so it is written once the simulator has its port.
                try directory.writePlayServiceAccount(play)
            }
            let report = try await runPipeline(
                DemoStage(
                    bootstrap: bootstrap, simulator: simulator, port: port, play: play, playPort: playPort,
                    generated: generated, directory: directory, health: health, begin: begin, stop: stop,
                    tally: tally, collector: collector),
                watch: watch, onProgress: onProgress)
            if let afterDecided = options.afterDecided {
                let running = try await entitlements?.ready(bootstrap: bootstrap)
                defer { running?.http.shutdown() }
                try await afterDecided(bootstrap, report, running)
            }
            return report
        }
    }

    /// What the run's pipeline stage works with, made before the group starts.
    private struct DemoStage: Sendable {
        var bootstrap: String
        var simulator: AppleSimulator
        var port: Int
        var play: PlaySimulator?
        var playPort: Int?
        var generated: [GeneratedJob]
        var directory: DemoFiles
        var health: [WorkerHealth]
        /// Starts the in-process workers.
        var begin: OneShot<Void>
        var stop: OneShot<Void>
        var tally: DemoTally
        var collector: TrafficReader
    }

    /// The Play simulator of a run with Google Play traffic, quiet as the Apple one.
    private static func playSimulator() -> PlaySimulator {
        var configuration = PlaySimulatorConfiguration()
        configuration.logger.logLevel = .critical
        return PlaySimulator(configuration: configuration)
    }

    private func faultPlan() -> FaultPlan {
        var plan = FaultPlan()
        plan.latencyMs = options.appleLatencyMs
        plan.status21005Ratio = options.apple21005Ratio
        return plan
    }

    private func runPipeline(
        _ stage: DemoStage, watch: DemoWorkerWatch?, onProgress: @escaping @Sendable (DemoProgress) -> Void
    ) async throws -> DemoReport {
        let (bootstrap, simulator, port, generated) = (stage.bootstrap, stage.simulator, stage.port, stage.generated)
        let (directory, health, stop, tally, collector) = (
            stage.directory, stage.health, stage.stop, stage.tally, stage.collector
        )
        return try await withProducer(bootstrap, clientID: "demo-frontend") { frontend in
            var prefilled: (started: ContinuousClock.Instant, produced: Duration)?
            if options.prefill {
                // Before any worker exists: the workers start on a full topic.
                try await prepare(frontend)
                let started = ContinuousClock.now
                try await produceAll(generated, with: frontend, tally: tally)
                prefilled = (started, started.duration(to: .now))
            }
            var processes: [DemoWorkerProcess] = []
            if let executable = options.workerExecutable {
                do {
                    for index in 0..<options.workers {
                        let settings = Self.workerSettings(
                            index: index, bootstrap: bootstrap, port: port, playPort: stage.playPort, files: directory,
                            ledgerURL: options.ledgerURL, jobDeadline: options.appleDeadline,
                            extra: options.workerSettings)
                        // Checked here, so a bad setting fails with its key rather than as a child that exits.
                        _ = try Self.configuration(settings)
                        let process = try DemoWorkerProcess(
                            index: index, executable: executable, settings: settings, directory: directory.directory)
                        processes.append(process)
                    }
                } catch {
                    await Self.stop(processes)
                    throw error
                }
            }
            // The in-process workers start now (after a prefill: on a full topic).
            stage.begin.resolve(())
            return try await withThrowingTaskGroup(of: Void.self) { [processes] group in
                // Stopping drains each worker (committing on revoke); their runs then return on their own. One
                // sequence for a finished run and a failed one.
                @discardableResult
                func shutDown() async -> [Int32?] {
                    stop.resolve(())
                    let exits = await Self.stop(processes)
                    for (index, exit) in exits.enumerated() where exit != 0 {
                        logger.warning(
                            "demo: worker \(index) did not exit cleanly (status \(exit.map(String.init) ?? "unknown"))",
                            metadata: [LogKeys.workerLog: "\(processes[index].logFile.path)"])
                    }
                    await collector.close()
                    return exits
                }
                do {
                    if processes.isEmpty {
                        try await waitForAssignment(health, collector: collector)
                    } else {
                        try await waitForAssignment(processes, collector: collector)
                    }
                } catch {
                    await Self.stop(processes)
                    throw error
                }
                if let watch, !processes.isEmpty {
                    group.addTask { await watch.running(processes) }
                }
                if prefilled == nil { try await prepare(frontend) }
                let started = prefilled?.started ?? ContinuousClock.now
                if let interval = options.progressInterval {
                    group.addTask {
                        try await reportProgress(every: interval, tally: tally, simulator: simulator, onProgress)
                    }
                }
                var produced = prefilled?.produced
                do {
                    if prefilled == nil {
                        try await produce(generated, with: frontend, tally: tally)
                        produced = started.duration(to: .now)
                    }
                    try await tally.waitUntilDecided(generated.count, stallLimit: stallLimit)
                } catch {
                    await shutDown()
                    group.cancelAll()
                    throw error
                }
                let elapsed = started.duration(to: .now)
                if let watch, !processes.isEmpty { await watch.decided(processes) }
                var report = tally.report(
                    appleStats: simulator.stats.snapshot(), started: started, elapsed: elapsed,
                    workers: options.workers, partitions: options.partitions)
                if let play = stage.play {
                    // The workers acknowledge after the grant, in the background: they must still run meanwhile.
                    let all = try await DemoPlayCalls.awaitFollowUps(
                        report.entries, simulator: play, limit: .seconds(30))
                    if !all { logger.warning("demo: some granted Play purchases were not acknowledged within 30 s") }
                    report.playCalls = DemoPlayCalls.count(report.entries, simulator: play)
                }
                let workerExits = await shutDown()
                report.produced = produced
                report.workerExits = workerExits
                // The workers return once drained; the progress reporter only ends by cancellation.
                group.cancelAll()
                return report
            }
        }
    }

    /// How long the run waits without any verdict before it gives up: past the job deadline every job is decided
    /// (at worst `unverifiable`), so silence for that long plus a minute means a job without a verdict.
    private var stallLimit: Duration { options.appleDeadline + .seconds(60) }

    /// librdkafka's mock cluster answers a fetch only when `fetch.wait.max.ms` (500 ms by default) has passed, even
    /// when data is there; a real broker answers as soon as it has data. On the mock every Kafka hop would cost up to
    /// half a second, so the demo's consumers (workers and verdict reader) wait 10 ms. Real deployments keep the
    /// default; a `kafka_properties` given in `workerSettings` replaces this one.
    package static let mockFetchProperties = "fetch.wait.max.ms=10;fetch.error.backoff.ms=10"

    /// The configuration `verify-worker run` would read, pointing at the in-process cluster, simulator and ledger.
    package static func workerConfiguration(
        index: Int, bootstrap: String, port: Int, playPort: Int? = nil, files: DemoFiles, ledgerURL: String? = nil,
        jobDeadline: Duration = .seconds(30), extra: [String: String] = [:], environment: [String: String] = [:]
    ) throws -> WorkerConfiguration {
        try configuration(
            workerSettings(
                index: index, bootstrap: bootstrap, port: port, playPort: playPort, files: files, ledgerURL: ledgerURL,
                jobDeadline: jobDeadline, extra: extra),
            environment: environment)
    }

    package static func configuration(
        _ settings: [String: String], environment: [String: String] = [:]
    ) throws -> WorkerConfiguration {
        var sources = ConfigurationSources()
        sources.addEnvironment(environment)
        try sources.addFlags(settings)
        return try WorkerConfiguration(sources)
    }

    /// The worker's configuration keys and values (`extra` over the demo's own); `playPort`: the Play simulator's.
    package static func workerSettings(
        index: Int, bootstrap: String, port: Int, playPort: Int? = nil, files: DemoFiles, ledgerURL: String?,
        jobDeadline: Duration, extra: [String: String]
    ) -> [String: String] {
        var flags = [
            "brokers": bootstrap,
            "group_id": "verify-worker-demo",
            "worker_id": "demo-worker-\(index)",
            "ledger_url": ledgerURL ?? "sqlite:" + files.ledger.path,
            "catalog_file": files.catalog.path,
            "trust_anchors": files.anchors.map(\.path).joined(separator: ","),
            "allow_sandbox": "true",
            "verify_receipt_production_url": "http://127.0.0.1:\(port)/verifyReceipt",
            "verify_receipt_sandbox_url": "http://127.0.0.1:\(port)/sandbox/verifyReceipt",
            "job_deadline_s": String(max(1, Int(jobDeadline.components.seconds))),
            "max_in_flight": "5000",
            "drain_timeout_s": "5",
            "kafka_properties": DemoRun.mockFetchProperties,
        ]
        if let playPort {
            flags["google_play_api_url"] = "http://127.0.0.1:\(playPort)"
            flags["google_play_token_url"] = "http://127.0.0.1:\(playPort)/token"
        }
        flags.merge(extra) { _, new in new }
        return flags
    }

    /// Stops worker children (SIGTERM: each drains and commits), all at once; returns each one's exit status (nil:
    /// it had to be killed and did not even die), in index order.
    @discardableResult
    package static func stop(_ processes: [DemoWorkerProcess]) async -> [Int32?] {
        await withTaskGroup(of: (Int, Int32?).self) { group in
            for (index, process) in processes.enumerated() { group.addTask { (index, await process.stop()) } }
            var statuses = [Int32?](repeating: nil, count: processes.count)
            for await (index, status) in group { statuses[index] = status }
            return statuses
        }
    }

    /// Runs `body` with a producer, shut down (flushed) whatever `body` does.
    private func withProducer<T: Sendable>(
        _ bootstrap: String, clientID: String, _ body: (KafkaProducer) async throws -> T
    ) async throws -> T {
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(bootstrapServers: bootstrap, clientID: clientID), logger: logger)
        do {
            let result = try await body(producer)
            await producer.shutdown()
            return result
        } catch {
            await producer.shutdown()
            throw error
        }
    }

    /// A frontend runs for long and knows where its topic's partitions are; a fresh producer would hold its first
    /// jobs until librdkafka's next metadata refresh (0.93 s in `bench pipeline` (b)), which is no part of the
    /// pipeline's throughput or latency.
    private func prepare(_ frontend: KafkaProducer) async throws {
        do {
            try await frontend.prepare(topics: [Topics.jobs])
        } catch {
            logger.warning("demo: the jobs topic's metadata was not loaded", metadata: ["error": "\(error)"])
        }
    }

    /// Produces every job at once, repeats after the rest (no worker runs yet: nothing to wait for).
    private func produceAll(_ generated: [GeneratedJob], with producer: KafkaProducer, tally: DemoTally) async throws {
        try await produceBatch(generated.filter { $0.category != .repeated }, with: producer, tally: tally)
        try await produceBatch(generated.filter { $0.category == .repeated }, with: producer, tally: tally)
    }

    /// Produces the jobs keyed by account, each stamped and timed as it is submitted.
    private func produce(_ generated: [GeneratedJob], with producer: KafkaProducer, tally: DemoTally) async throws {
        let first = options.repeatsLast ? generated.filter { $0.category != .repeated } : generated
        try await produceBatch(first, with: producer, tally: tally)
        if options.repeatsLast {
            try await tally.waitUntilDecided(first.count, stallLimit: stallLimit)
            try await produceBatch(generated.filter { $0.category == .repeated }, with: producer, tally: tally)
        }
    }

    private func produceBatch(_ batch: [GeneratedJob], with producer: KafkaProducer, tally: DemoTally) async throws {
        let codec = MessageCodec()
        let clock = ContinuousClock()
        let started = clock.now
        let rate = options.submitRatePerSecond
        // Each job a chain of its own: the demo's accounts have one job each in flight, and the burst must not wait.
        try await JobSubmitter(producer: producer).submit(chains: batch.indices.map { [$0] }, spread: .burst) {
            index in
            if let rate, rate > 0 {
                try await clock.sleep(until: started.advanced(by: .seconds(Double(index) / rate)))
            }
            var job = batch[index].job
            job.submittedAt = Date()
            tally.submitted(job.jobID)
            return (job.messageKey, codec.encode(job))
        }
    }

    /// Waits until the group has spread the partitions over the workers (so the run starts without a rebalance) and
    /// the verdict reader has joined (so latencies do not include its group join).
    private func waitForAssignment(_ workers: [WorkerHealth], collector: TrafficReader) async throws {
        let busy = min(workers.count, options.partitions)
        let clock = ContinuousClock()
        let limit = clock.now.advanced(by: .seconds(30))
        while clock.now < limit {
            let assigned = workers.map(\.assignedPartitions)
            if assigned.reduce(0, +) == options.partitions, assigned.filter({ $0 > 0 }).count == busy,
                collector.consumer.assignment.count == options.partitions
            {
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        logger.warning("demo: the group did not settle within 30 s; starting anyway")
    }

    /// The same for worker children: each reports its partitions (`verify_assigned_partitions`) on `/metrics`.
    private func waitForAssignment(_ workers: [DemoWorkerProcess], collector: TrafficReader) async throws {
        let busy = min(workers.count, options.partitions)
        let clock = ContinuousClock()
        // Generous: each child builds its parts and migrates the ledger before it joins.
        let limit = clock.now.advanced(by: .seconds(90))
        while clock.now < limit {
            var assigned: [Int] = []
            for worker in workers {
                if worker.hasExited {
                    let log = (try? String(contentsOf: worker.logFile, encoding: .utf8)) ?? ""
                    throw DemoWorkerProcessError(
                        "worker \(worker.index) exited at start (log \(worker.logFile.path)): \(log.suffix(400))")
                }
                let sample = await worker.metrics()
                assigned.append(Int(sample?.sum(of: MetricNames.assignedPartitions) ?? 0))
            }
            if assigned.reduce(0, +) == options.partitions, assigned.filter({ $0 > 0 }).count == busy,
                collector.consumer.assignment.count == options.partitions
            {
                return
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw DemoWorkerProcessError("the worker processes did not hold every partition within 90 s")
    }

    private func reportProgress(
        every interval: Duration, tally: DemoTally, simulator: AppleSimulator,
        _ onProgress: @Sendable (DemoProgress) -> Void
    ) async throws {
        let started = ContinuousClock.now
        while true {
            try await Task.sleep(for: interval)
            var progress = tally.progress()
            progress.appleCalls = simulator.stats.snapshot().requests.filter { !$0.key.hasPrefix("sim/") }.values
                .reduce(0, +)
            progress.elapsed = started.duration(to: .now)
            onProgress(progress)
        }
    }
}

/// `operation`'s value, or nil when `limit` passed first (the operation is then cancelled).
package func valueWithin<T: Sendable>(_ limit: Duration, _ operation: @escaping @Sendable () async -> T) async -> T? {
    await withTaskGroup(of: T?.self) { group in
        group.addTask { await operation() }
        group.addTask {
            try? await Task.sleep(for: limit)
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}

/// A demo or bench run in which no verdict arrived for longer than any job may take.
package struct DemoStall: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

/// Submit times and verdicts per job, shared by the producer, the verdict reader and the progress display.
package final class DemoTally: Sendable {
    private struct State {
        package var submittedAt: [String: ContinuousClock.Instant] = [:]
        package var verdicts: [String: [Verdict]] = [:]
        package var latencies: [String: Duration] = [:]
        package var decided = 0
        /// When the first and the last first verdict of a job were read, and the range of their Kafka timestamps.
        package var firstRead: ContinuousClock.Instant?
        package var lastRead: ContinuousClock.Instant?
        package var recordedMilliseconds: ClosedRange<Int64>?
        package var waiters: [Int: (count: Int, continuation: CheckedContinuation<Void, Never>)] = [:]
        package var nextWaiter = 0
    }

    private let generated: [GeneratedJob]
    private let state = Mutex(State())

    package init(jobs: [GeneratedJob]) { generated = jobs }

    package func submitted(_ jobID: String) {
        let now = ContinuousClock.now
        state.withLock { $0.submittedAt[jobID] = now }
    }

    /// Records a verdict read from the verdicts topic, written at `recordedMilliseconds` (its Kafka timestamp).
    package func received(_ verdict: Verdict, recordedMilliseconds: Int64? = nil) {
        let now = ContinuousClock.now
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard let submitted = state.submittedAt[verdict.jobID] else { return [] }
            state.verdicts[verdict.jobID, default: []].append(verdict)
            guard state.latencies[verdict.jobID] == nil else { return [] }
            state.latencies[verdict.jobID] = submitted.duration(to: now)
            state.decided += 1
            if state.firstRead == nil { state.firstRead = now }
            state.lastRead = now
            if let recorded = recordedMilliseconds {
                let range = state.recordedMilliseconds
                state.recordedMilliseconds =
                    min(range?.lowerBound ?? recorded, recorded)...max(range?.upperBound ?? recorded, recorded)
            }
            let decided = state.decided
            let ready = state.waiters.filter { $0.value.count <= decided }
            for id in ready.keys { state.waiters[id] = nil }
            return ready.values.map(\.continuation)
        }
        ready.forEach { $0.resume() }
    }

    /// Waits until `count` jobs are decided, or this task is cancelled.
    package func waitUntilDecided(_ count: Int) async {
        let id = state.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready = state.withLock { state in
                    // Under the lock: a cancellation after this point finds the waiter and resumes it.
                    guard state.decided < count, !Task.isCancelled else { return true }
                    state.waiters[id] = (count, continuation)
                    return false
                }
                if ready { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.continuation.resume()
        }
    }

    /// Waits until `count` jobs are decided; throws ``DemoStall`` when no job was decided for `stallLimit` (a job
    /// that never gets a verdict must end the run with its name, not hang it), and `CancellationError`.
    package func waitUntilDecided(_ count: Int, stallLimit: Duration) async throws {
        while true {
            let before = state.withLock { $0.decided }
            let reached = await valueWithin(stallLimit) { await self.waitUntilDecided(count) } != nil
            try Task.checkCancellation()
            if reached { return }
            let undecided = state.withLock { state -> (count: Int, ids: [String])? in
                guard state.decided == before else { return nil }
                let ids = generated.map(\.job.jobID).filter {
                    state.submittedAt[$0] != nil && state.latencies[$0] == nil
                }
                return (ids.count, Array(ids.prefix(10)))
            }
            if let undecided {
                throw DemoStall(
                    "no verdict for \(stallLimit) with \(undecided.count) submitted jobs undecided, such as "
                        + undecided.ids.joined(separator: ", "))
            }
        }
    }

    package func progress() -> DemoProgress {
        state.withLock {
            DemoProgress(
                jobs: generated.count, produced: $0.submittedAt.count, decided: $0.decided, appleCalls: 0,
                elapsed: .zero)
        }
    }

    package func report(
        appleStats: SimulatorStats.Snapshot, started: ContinuousClock.Instant? = nil, elapsed: Duration, workers: Int,
        partitions: Int
    ) -> DemoReport {
        state.withLock { state in
            var report = DemoReport(
                entries: generated.map { generated in
                    let id = generated.job.jobID
                    return DemoReport.Entry(
                        generated: generated, verdicts: state.verdicts[id] ?? [], latency: state.latencies[id],
                        submittedAfter: started.flatMap { started in
                            state.submittedAt[id].map { started.duration(to: $0) }
                        })
                },
                appleStats: appleStats, elapsed: elapsed, workers: workers, partitions: partitions)
            if let started, let first = state.firstRead, let last = state.lastRead {
                report.verdictsRead = (started.duration(to: first), started.duration(to: last))
            }
            report.verdictTimestampSpan = state.recordedMilliseconds.map {
                .milliseconds($0.upperBound - $0.lowerBound)
            }
            return report
        }
    }
}

extension TrafficReader {
    /// The demo's reader: the verdicts topic in a group of its own, fetched eagerly (verdicts are timed), every verdict
    /// to `tally`.
    package static func demo(bootstrapServers: String, tally: DemoTally, logger: Logger) throws -> TrafficReader {
        try TrafficReader(
            bootstrapServers: bootstrapServers, groupID: "verify-worker-demo-verdicts", deadLetters: false,
            properties: ["fetch.wait.max.ms": "10", "fetch.error.backoff.ms": "10"], logger: logger
        ) { record, _, _ in
            switch record {
            case .verdict(let verdict, let recorded): tally.received(verdict, recordedMilliseconds: recorded)
            case .unreadableVerdict(let error):
                logger.error("demo: unreadable verdict", metadata: [LogKeys.error: "\(error)"])
            case .deadLetter: break
            }
        }
    }
}

/// The files a worker reads (catalog, trust anchors) and its SQLite ledger, in a temporary directory.
package struct DemoFiles: Sendable {
    package let directory: URL
    package let catalog: URL
    package let anchors: [URL]
    package let ledger: URL
    /// With a Play simulator: the Play app's licensing key and its service account's key file (written by
    /// ``writePlayServiceAccount(_:)``, once the simulator listens).
    package let playLicensingKey: URL?
    package let playServiceAccount: URL?

    package init(simulator: AppleSimulator, play: PlaySimulator? = nil) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "verify-worker-demo-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        catalog = directory.appendingPathComponent("catalog.json")
        if let play {
            let keyFile = directory.appendingPathComponent("play-licensing-key.txt")
            try Data(try play.licensingKey(packageName: DemoApp.playPackage).utf8).write(to: keyFile)
            (playLicensingKey, playServiceAccount) = (
                keyFile, directory.appendingPathComponent("play-service-account.json")
            )
        } else {
            (playLicensingKey, playServiceAccount) = (nil, nil)
        }
        try JSONEncoder().encode(
            DemoApp.catalog(licensingKeyFile: playLicensingKey, serviceAccountKeyFile: playServiceAccount)
        ).write(to: catalog)
        let pem = try simulator.pki.rootsPEM()
        let marker = "-----END CERTIFICATE-----"
        var anchors: [URL] = []
        for (index, part) in pem.components(separatedBy: marker).enumerated()
        where part.contains("-----BEGIN CERTIFICATE-----") {
            let url = directory.appendingPathComponent("root-\(index).pem")
            try Data((part.trimmingCharacters(in: .whitespacesAndNewlines) + "\n" + marker + "\n").utf8).write(to: url)
            anchors.append(url)
        }
        self.anchors = anchors
        ledger = directory.appendingPathComponent("ledger.sqlite")
    }

    /// Issues the Play app's service account at `play` (listening) and writes its key file.
    package func writePlayServiceAccount(_ play: PlaySimulator) throws {
        guard let playServiceAccount else { return }
        try play.issueServiceAccount(packages: [DemoApp.playPackage]).writeKeyFile(to: playServiceAccount)
    }

    package func remove() { try? FileManager.default.removeItem(at: directory) }
}
