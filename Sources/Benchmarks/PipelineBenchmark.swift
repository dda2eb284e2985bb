import AppleSimulator
import Demo
import Foundation
import Kafka
import Logging
import Messages
import Observability
import Operations
import Prometheus
import RateLimiter
import Receipts
import Synchronization
import Traffic
import Worker

/// What `verify-worker bench pipeline` measures, and how big each part is.
package struct PipelineBenchmarkOptions: Sendable {
    /// Messages of the raw Kafka run (a). Default: 50 000.
    package var kafkaMessages = 50_000
    /// Jobs of the locally decided run (b). Default: 20 000.
    package var localJobs = 20_000
    /// Jobs of the seed-mix run (c): enough that the workers' unequal shares of Apple-bound accounts (random, by
    /// key) leave a short tail. Default: 20 000.
    package var mixJobs = 20_000
    /// Simulated Apple latency of the seed-mix run, in milliseconds. Default: 100.
    package var appleLatencyMs = 100
    /// Concurrent Apple calls per worker in run (c): the gate's minimum and maximum both, so the bound is exact. Low
    /// enough that Apple, not the local work, limits the run. Default: 2.
    package var appleConcurrency = 2
    /// Jobs of the paced latency run (d), submitted at half the throughput of (c). Default: 3 000.
    package var latencyJobs = 3_000
    /// Jobs held at once in the memory run (e) (also that run's `max_in_flight`). Default: 10 000.
    package var memoryJobs = 10_000
    /// Workers (consumers of one group, in this process) of runs (b) and (c). Default: 2.
    package var workers = 2
    /// Partitions of every topic; the mock cluster keeps about 5 MB per partition (20 000 seed-mix jobs need more
    /// than 16). Default: 32.
    package var partitions = 32
    /// The workers' `kafka_properties` (librdkafka `name=value;…`), for tuning experiments. Default: none.
    package var workerKafkaProperties = ""
    /// Run the workers inside the bench process (sharing its heap, cores and metrics) instead of as `verify-worker
    /// run` children. Default: false (children: their memory and metrics are their own).
    package var workersInProcess = false
    /// Also drain the jobs of (b) from a pre-filled topic (``PipelineBenchmarkResult/Drain``). Default: true.
    package var localDrain = true
    /// The parts to run. Default: all.
    package var parts = Set(PipelineBenchmarkPart.allCases)
}

/// The figures `bench pipeline` prints (snake_case JSON).
package struct PipelineBenchmarkResult: Codable, Sendable {
    package struct KafkaCeiling: Codable, Sendable {
        package var raw: KafkaThroughputBenchmark.Result
        /// A job crosses Kafka once produced and once consumed and committed: the slower of the two bounds it.
        package var ceilingMessagesPerSecond: Double
    }

    package struct Throughput: Codable, Sendable {
        package var jobs: Int
        package var workers: Int
        package var partitions: Int
        package var seconds: Double
        package var jobsPerSecond: Double
        /// From the start of the run to the last job handed to the frontend's producer: close to `seconds`, the
        /// submitting bounds the run; well below it, the jobs queue behind the workers or the verdict reader.
        package var submitSeconds: Double?
        /// Jobs that got no verdict (must be 0) and jobs that got more than one (redeliveries; 0 in a calm run).
        package var undecided: Int
        package var duplicated: Int
        package var outcomes: [String: Int]
        package var appleCalls: Int
        package var latency: LatencySummary
        /// Worker children only: CPU seconds each worker used from the first submit to the last verdict, and the
        /// bench process's (mock cluster, frontend producer, verdict reader, simulator) over the same time.
        package var workerCpuSeconds: [Double]?
        package var benchCpuSeconds: Double?
        /// Worker children only: the highest `verify_jobs_in_flight` each worker reported (sampled every 50 ms); near
        /// `max_in_flight` the worker paused its partitions.
        package var workerPeakInFlight: [Int]?
        /// Worker children only: each worker's `verify_kafka_fetch_wakeups_total` at the end (fetchers it woke that
        /// librdkafka 2.0.2 had left idle past the prefetch limit with messages waiting).
        package var workerFetchWakeUps: [Int]?
        /// Worker children only: each worker's exit status after the run's SIGTERM (0: drained and closed cleanly).
        package var workerExits: [Int32?]?
    }

    package struct LocalRun: Codable, Sendable {
        /// The burst: jobs produced while the workers run, from the first submit to the last verdict read.
        package var run: Throughput
        /// Present when (a) ran too.
        package var ratioToKafkaCeiling: Double?
        /// The same jobs drained from a pre-filled topic by fresh workers (`--local-drain`).
        package var drain: Drain?
        /// `drain.produced_jobs_per_second` over (a)'s ceiling, when both ran.
        package var drainRatioToKafkaCeiling: Double?
    }

    /// A consumer throughput test of the pipeline: every job is in `receipt-jobs` before the workers start, so the
    /// frontend does not compete with them for the CPU; the workers join the group and drain the backlog.
    package struct Drain: Codable, Sendable {
        /// Runs made: a drain whose group formed in two steps (a child joined more than the mock's 3 s after the
        /// other: the first drained alone, then handed half its partitions over, and they were read again, so
        /// `duplicated` > 0) measured a rebalance, not a drain, and is run again, at most three times in all.
        package var attempts: Int = 1
        package var jobs: Int
        package var workers: Int
        package var partitions: Int
        /// Filling the topic before the workers started (not part of the measure).
        package var fillSeconds: Double
        /// From the first verdict's Kafka timestamp to the last one's (when the workers' producers took them, ms
        /// resolution), and (jobs - 1) over it: the workers' output rate. The headline figure of the drain.
        package var producedSpanSeconds: Double
        package var producedJobsPerSecond: Double
        /// From the first verdict read to the last one read (the verdict reader in the bench process), and
        /// (jobs - 1) over it.
        package var readSpanSeconds: Double
        package var readJobsPerSecond: Double
        package var undecided: Int
        package var duplicated: Int
        package var outcomes: [String: Int]
        /// Worker children only: CPU seconds from the moment every partition was assigned to the last verdict (the
        /// workers may have started draining up to one 50 ms sample before), and the bench process's.
        package var workerCpuSeconds: [Double]?
        package var benchCpuSeconds: Double?
        package var workerPeakInFlight: [Int]?
        /// Worker children only: each worker's `verify_kafka_fetch_wakeups_total` at the end (fetchers it woke that
        /// librdkafka 2.0.2 had left idle past the prefetch limit with messages waiting).
        package var workerFetchWakeUps: [Int]?
        /// Worker children only: each worker's exit status after the run's SIGTERM (0: drained and closed cleanly).
        package var workerExits: [Int32?]?
    }

    package struct AppleBoundRun: Codable, Sendable {
        package var run: Throughput
        package var appleLatencyMs: Int
        package var appleConcurrencyPerWorker: Int
        /// The highest `verify_ratelimiter_concurrency_limit` seen while calls were in flight (the two workers' gates
        /// share one label in this process, so this is one gate's limit).
        package var observedConcurrencyLimit: Double?
        /// Apple calls over the whole run.
        package var appleCallsPerSecond: Double
        /// From the first submit to the last verdict decided by Apple (the jobs go out in one burst): the part of the
        /// run that Apple bounds.
        package var applePhaseSeconds: Double
        package var applePhaseCallsPerSecond: Double
        /// workers × concurrency / latency: the most Apple calls per second the limit allows.
        package var boundAppleCallsPerSecond: Double
        /// `apple_phase_calls_per_second / bound_apple_calls_per_second`.
        package var ratioToBound: Double
        /// Worker children only: from the first worker's first Apple call to the last worker's last one, as their
        /// own counters show (sampled every 50 ms), so the Kafka hops before the first call and after the last one
        /// are left out; and the simulator's calls over it, against the bound.
        package var workersApplePhaseSeconds: Double?
        package var workersApplePhaseRatioToBound: Double?
        /// Worker children only: each worker's calls over its own Apple-busy interval against its own bound.
        package var perWorker: [WorkerAppleUse]?
    }

    /// One worker's use of its Apple concurrency in run (c), from its own `/metrics`.
    package struct WorkerAppleUse: Codable, Sendable {
        package var worker: Int
        /// `verify_apple_calls_total` (a verifyReceipt call redirected from production to sandbox counts once here
        /// and twice at the simulator).
        package var appleCalls: Int
        /// From its first Apple call to its last (sampled every 50 ms; the midpoints between samples).
        package var busySeconds: Double
        package var callsPerSecond: Double
        /// concurrency / latency.
        package var boundCallsPerSecond: Double
        package var ratioToBound: Double
        /// Time spent in calls (`verify_apple_call_duration_seconds_sum`) over busy time x concurrency: the share of
        /// the permits' time spent waiting for Apple; the rest is per-call overhead or no work.
        package var permitOccupancy: Double
        /// Mean duration of one call, ms.
        package var meanCallMs: Double
    }

    package struct LatencyRun: Codable, Sendable {
        package var jobs: Int
        package var submitRatePerSecond: Double
        package var appleLatencyMs: Int
        package var undecided: Int
        package var latency: LatencySummary
        /// The worker's own view (`verify_job_duration_seconds`: from `submitted_at` to the verdict's delivery
        /// report), as the upper bounds of the histogram buckets holding p50 and p99; the rest of `latency` is the
        /// verdict reader's hop.
        package var workerP50AtMostMs: Double?
        package var workerP99AtMostMs: Double?
    }

    package struct MemoryRun: Codable, Sendable {
        package var jobs: Int
        /// The in-flight limit the worker ran with (`max_in_flight`).
        package var maximumInFlight: Int
        /// The highest `verify_jobs_in_flight` seen.
        package var peakInFlight: Int
        package var residentMiBBefore: Double
        package var residentMiBAtPeakInFlight: Double
        package var peakResidentMiB: Double
        package var seconds: Double
        package var undecided: Int
        /// Whether the worker ran as a child process; then the `worker_*` figures are its own and the `resident_*`
        /// ones are the bench process's (mock cluster, simulator, generator, verdict reader).
        package var workerProcess: Bool?
        package var workerResidentMiBBefore: Double?
        package var workerResidentMiBAtPeakInFlight: Double?
        package var workerPeakResidentMiB: Double?

        /// The report's field names (`max_in_flight` kept for the one renamed property).
        enum CodingKeys: String, CodingKey {
            case jobs
            case maximumInFlight = "maxInFlight"
            case peakInFlight, residentMiBBefore, residentMiBAtPeakInFlight, peakResidentMiB, seconds, undecided
            case workerProcess, workerResidentMiBBefore, workerResidentMiBAtPeakInFlight, workerPeakResidentMiB
        }
    }

    package var cores: Int
    /// The 1-minute load average at the end (other processes share the machine).
    package var loadAverage1m: Double?
    /// Whether the workers ran inside the bench process (`--workers-in-process`) rather than as children.
    package var workersInProcess: Bool
    /// Each part is present when it ran (`--parts`).
    package var memory: MemoryRun?
    package var kafka: KafkaCeiling?
    package var local: LocalRun?
    package var seedMix: AppleBoundRun?
    package var pacedLatency: LatencyRun?
}

/// The parts of `bench pipeline`, by the letters `--parts` takes (docs/BENCHMARKS.md describes each).
package enum PipelineBenchmarkPart: String, CaseIterable, Sendable {
    case kafka = "a"
    case local = "b"
    case mix = "c"
    case latency = "d"
    case memory = "e"
}

/// Runs every part of `bench pipeline` in this process, one after the other, each on a fresh mock cluster and
/// simulator, through ``DemoRun`` (the same workers `verify-worker run` builds, with a SQLite ledger).
package struct PipelineBenchmark: Sendable {
    package var options: PipelineBenchmarkOptions
    package var progress: @Sendable (String) -> Void

    package func run() async throws -> PipelineBenchmarkResult {
        // Before any worker starts: the gauges this benchmark watches are read back from the registry.
        let registry = MetricsBootstrap.registry()
        let parts = options.parts
        var result = PipelineBenchmarkResult(
            cores: ProcessInfo.processInfo.activeProcessorCount, workersInProcess: options.workersInProcess)

        if parts.contains(.memory), options.memoryJobs > 0 {
            progress("(e) memory with \(options.memoryJobs) jobs in flight")
            result.memory = try await measureMemory(registry: registry)
        }
        if parts.contains(.kafka) {
            result.kafka = try await kafkaCeiling()
        }
        if parts.contains(.local) {
            let local = try await localThroughput()
            let ceiling = result.kafka?.ceilingMessagesPerSecond
            result.local = .init(run: local, ratioToKafkaCeiling: ceiling.map { local.jobsPerSecond / $0 })
            if options.localDrain {
                let drain = try await localDrain()
                result.local?.drain = drain
                result.local?.drainRatioToKafkaCeiling = ceiling.map { drain.producedJobsPerSecond / $0 }
            }
        }
        if parts.contains(.mix) || parts.contains(.latency) {
            let mix = try await seedMix(registry: registry)
            if parts.contains(.mix) { result.seedMix = mix }
            if parts.contains(.latency) {
                result.pacedLatency = try await pacedLatency(
                    registry: registry, rate: max(1, (mix.run.jobsPerSecond / 2).rounded(.down)))
            }
        }
        result.loadAverage1m = Self.loadAverage()
        return result
    }

    private func kafkaCeiling() async throws -> PipelineBenchmarkResult.KafkaCeiling {
        let jobBytes = try averageLocalJobBytes()
        progress("(a) raw Kafka: \(options.kafkaMessages) messages of \(jobBytes) bytes")
        let raw = try await KafkaThroughputBenchmark(
            messages: options.kafkaMessages, messageBytes: jobBytes, brokers: 1,
            partitions: max(options.partitions, options.kafkaMessages * jobBytes / (3 << 20) + 1)
        ).run()
        return PipelineBenchmarkResult.KafkaCeiling(
            raw: raw, ceilingMessagesPerSecond: min(raw.produceMessagesPerSecond, raw.consumeCommitMessagesPerSecond))
    }

    private func localThroughput() async throws -> PipelineBenchmarkResult.Throughput {
        progress("(b) \(options.localJobs) locally decided jobs (other-app and cracker receipts)")
        var localOptions = demoOptions(jobs: options.localJobs)
        localOptions.mix = TrafficMix(shares: [.otherApp: 0.79, .cracker: 0.093])
        let localSampler = WorkerProcessSampler()
        let report = try await DemoRun(options: localOptions).run(watch: localSampler.watch)
        var local = throughput(report)
        if !options.workersInProcess {
            localSampler.record(into: &local, workers: options.workers, report: report)
        }
        return local
    }

    private func localDrain() async throws -> PipelineBenchmarkResult.Drain {
        var drain = try await localDrainOnce()
        while drain.duplicated > 0, drain.attempts < 3 {
            progress("(b) drain: \(drain.duplicated) jobs read twice (the group formed in two steps); again")
            let attempts = drain.attempts
            drain = try await localDrainOnce()
            drain.attempts = attempts + 1
        }
        return drain
    }

    private func localDrainOnce() async throws -> PipelineBenchmarkResult.Drain {
        progress("(b) drain: \(options.localJobs) locally decided jobs produced before the workers start")
        var drainOptions = demoOptions(jobs: options.localJobs)
        drainOptions.mix = TrafficMix(shares: [.otherApp: 0.79, .cracker: 0.093])
        drainOptions.prefill = true
        let sampler = WorkerProcessSampler()
        let report = try await DemoRun(options: drainOptions).run(watch: sampler.watch)
        let run = throughput(report)
        let intervals = Double(max(1, run.jobs - 1))
        let produced = report.verdictTimestampSpan?.seconds ?? 0
        let read = report.verdictsRead.map { ($0.last - $0.first).seconds } ?? 0
        var drain = PipelineBenchmarkResult.Drain(
            jobs: run.jobs, workers: run.workers, partitions: run.partitions,
            fillSeconds: report.produced?.seconds ?? 0, producedSpanSeconds: produced,
            producedJobsPerSecond: produced > 0 ? intervals / produced : 0, readSpanSeconds: read,
            readJobsPerSecond: read > 0 ? intervals / read : 0, undecided: run.undecided, duplicated: run.duplicated,
            outcomes: run.outcomes)
        if !options.workersInProcess {
            sampler.record(into: &drain, workers: options.workers, report: report)
        }
        return drain
    }

    private var mixOptions: DemoOptions {
        var mixOptions = demoOptions(jobs: options.mixJobs)
        mixOptions.appleLatencyMs = Double(options.appleLatencyMs)
        // Apple-bound jobs queue behind the pinned limit for the whole run (30 s with 20 000 jobs): the demo's 30 s
        // deadline would end the last of them unverifiable, and the run early.
        mixOptions.appleDeadline = .seconds(600)
        mixOptions.workerSettings["apple_max_concurrency"] = String(options.appleConcurrency)
        mixOptions.workerSettings["apple_min_concurrency"] = String(options.appleConcurrency)
        return mixOptions
    }

    private func seedMix(
        registry: PrometheusCollectorRegistry
    ) async throws -> PipelineBenchmarkResult.AppleBoundRun {
        progress("(c) \(options.mixJobs) seed-mix jobs, Apple at \(options.appleLatencyMs) ms")
        let mixOptions = self.mixOptions
        let mixReport: DemoReport
        var observedLimit: Double?
        var perWorker: [PipelineBenchmarkResult.WorkerAppleUse]?
        var workersPhase: Double?
        var mixCPU: (workers: [Double], bench: Double?)?
        if options.workersInProcess {
            let watched = try await GaugeWatcher(registry: registry).watch { [mixOptions] in
                try await DemoRun(options: mixOptions).run()
            }
            mixReport = watched.value
            observedLimit = watched.peaks.concurrencyLimit
        } else {
            let sampler = WorkerProcessSampler()
            mixReport = try await DemoRun(options: mixOptions).run(watch: sampler.watch)
            mixCPU = (sampler.cpuSeconds(), sampler.benchCpuSeconds())
            observedLimit = sampler.peakConcurrencyLimit()
            let uses = sampler.appleUse(
                concurrency: options.appleConcurrency, latencyMs: options.appleLatencyMs)
            perWorker = uses.map(\.use)
            let starts = uses.compactMap(\.start)
            let ends = uses.compactMap(\.end)
            if let start = starts.min(), let end = ends.max(), end > start { workersPhase = end - start }
        }
        var mix = throughput(mixReport)
        mix.workerCpuSeconds = mixCPU?.workers
        mix.benchCpuSeconds = mixCPU?.bench
        let bound = Double(options.workers * options.appleConcurrency) * 1_000 / Double(options.appleLatencyMs)
        // From the first submit to the last verdict Apple decided: each job's own submit offset plus its latency (the
        // burst itself takes seconds to submit).
        let applePhase =
            mixReport.entries.filter { $0.verdicts.first?.decidedBy == .apple }
            .compactMap { entry in entry.latency.map { $0 + (entry.submittedAfter ?? .zero) } }.max()?
            .seconds ?? mix.seconds
        let applePhaseRate = Double(mix.appleCalls) / applePhase

        return .init(
            run: mix, appleLatencyMs: options.appleLatencyMs, appleConcurrencyPerWorker: options.appleConcurrency,
            observedConcurrencyLimit: observedLimit,
            appleCallsPerSecond: Double(mix.appleCalls) / mix.seconds, applePhaseSeconds: applePhase,
            applePhaseCallsPerSecond: applePhaseRate, boundAppleCallsPerSecond: bound,
            ratioToBound: applePhaseRate / bound, workersApplePhaseSeconds: workersPhase,
            workersApplePhaseRatioToBound: workersPhase.map { Double(mix.appleCalls) / $0 / bound },
            perWorker: perWorker)
    }

    private func pacedLatency(
        registry: PrometheusCollectorRegistry, rate: Double
    ) async throws -> PipelineBenchmarkResult.LatencyRun {
        progress("(d) \(options.latencyJobs) seed-mix jobs at \(Int(rate))/s, Apple at \(options.appleLatencyMs) ms")
        var pacedOptions = mixOptions
        pacedOptions.jobs = options.latencyJobs
        pacedOptions.submitRatePerSecond = rate
        var durationsBefore = PrometheusTextSample(registry.emitToString()).histogramBuckets(
            of: MetricNames.verdictLatency)
        let pacedSampler = WorkerProcessSampler()
        let paced = throughput(try await DemoRun(options: pacedOptions).run(watch: pacedSampler.watch))
        var durationsAfter = PrometheusTextSample(registry.emitToString()).histogramBuckets(
            of: MetricNames.verdictLatency)
        if !options.workersInProcess {
            // Fresh children: their histograms hold this run only.
            durationsBefore = [:]
            durationsAfter = pacedSampler.finalHistogram(of: MetricNames.verdictLatency)
        }
        let workerQuantile = { (fraction: Double) in
            PrometheusTextSample.quantileUpperBound(fraction, from: durationsBefore, to: durationsAfter).map {
                $0 * 1_000
            }
        }

        return .init(
            jobs: paced.jobs, submitRatePerSecond: rate, appleLatencyMs: options.appleLatencyMs,
            undecided: paced.undecided, latency: paced.latency, workerP50AtMostMs: workerQuantile(0.5),
            workerP99AtMostMs: workerQuantile(0.99))
    }

    private func demoOptions(jobs: Int) -> DemoOptions {
        var demo = DemoOptions()
        demo.jobs = jobs
        demo.workers = options.workers
        demo.partitions = options.partitions
        demo.progressInterval = nil
        if !options.workersInProcess { demo.workerExecutable = RunningExecutable.url }
        if !options.workerKafkaProperties.isEmpty {
            demo.workerSettings["kafka_properties"] = options.workerKafkaProperties
        }
        return demo
    }

    /// One worker holds `memoryJobs` genuine jobs at once: Apple answers after 70 s (within a 90 s request timeout:
    /// timeouts would open the circuit breaker, which fails every waiting job at once) and admits 4 calls at a time,
    /// so every other job waits in the call gate until its 60 s deadline ends it as `unverifiable`. The deadline is
    /// long enough for every job to be consumed and analyzed (a signature check each) before the first one ends.
    /// (With Apple past the request timeout, the breaker ended the waiting jobs at ~15 s.) Half as many jobs again
    /// are produced: genuine signed transactions are verified locally and never wait, so 10 000 genuine jobs held
    /// only ~7 700 at once; with more, flow control holds the worker at `max_in_flight`.
    private func measureMemory(registry: PrometheusCollectorRegistry) async throws -> PipelineBenchmarkResult.MemoryRun
    {
        var demo = demoOptions(jobs: options.memoryJobs * 3 / 2)
        demo.workers = 1
        demo.mix = TrafficMix(shares: [.genuine: 1])
        demo.appleLatencyMs = 70_000
        demo.appleDeadline = .seconds(60)
        demo.workerSettings = demo.workerSettings.merging([
            "max_in_flight": String(options.memoryJobs), "apple_max_concurrency": "4", "apple_min_concurrency": "4",
            "apple_request_timeout_ms": "90000",
        ]) { _, new in new }
        let before = ProcessMemory.current()?.residentBytes ?? 0
        let started = ContinuousClock.now
        if !options.workersInProcess {
            let sampler = WorkerProcessSampler()
            let report = try await DemoRun(options: demo).run(watch: sampler.watch)
            let seconds = started.duration(to: .now).seconds
            let worker = sampler.memoryPeaks(worker: 0)
            return .init(
                jobs: report.entries.count, maximumInFlight: options.memoryJobs, peakInFlight: Int(worker.inFlight),
                residentMiBBefore: Self.mebibytes(before),
                residentMiBAtPeakInFlight: Self.mebibytes(sampler.benchResidentAtPeakInFlight(worker: 0)),
                peakResidentMiB: Self.mebibytes(sampler.benchPeakResident()), seconds: seconds,
                undecided: report.entries.filter(\.verdicts.isEmpty).count, workerProcess: true,
                workerResidentMiBBefore: Self.mebibytes(worker.residentBefore),
                workerResidentMiBAtPeakInFlight: Self.mebibytes(worker.residentAtPeakInFlight),
                workerPeakResidentMiB: Self.mebibytes(worker.resident))
        }
        let watched = try await GaugeWatcher(registry: registry).watch { [demo] in
            try await DemoRun(options: demo).run()
        }
        let seconds = started.duration(to: .now).seconds
        let report = watched.value
        return .init(
            jobs: report.entries.count, maximumInFlight: options.memoryJobs, peakInFlight: Int(watched.peaks.inFlight),
            residentMiBBefore: Self.mebibytes(before),
            residentMiBAtPeakInFlight: Self.mebibytes(watched.peaks.residentAtPeakInFlight),
            peakResidentMiB: Self.mebibytes(watched.peaks.resident), seconds: seconds,
            undecided: report.entries.filter(\.verdicts.isEmpty).count, workerProcess: false)
    }

    private func throughput(_ report: DemoReport) -> PipelineBenchmarkResult.Throughput {
        let seconds = report.elapsed.seconds
        var outcomes: [String: Int] = [:]
        for entry in report.entries {
            if let verdict = entry.verdicts.first { outcomes[verdict.outcome.rawValue, default: 0] += 1 }
        }
        return .init(
            jobs: report.entries.count, workers: report.workers, partitions: report.partitions, seconds: seconds,
            jobsPerSecond: Double(report.entries.count) / seconds,
            submitSeconds: report.entries.compactMap(\.submittedAfter).max()?.seconds,
            undecided: report.entries.filter(\.verdicts.isEmpty).count,
            duplicated: report.entries.filter { $0.verdicts.count > 1 }.count, outcomes: outcomes,
            appleCalls: report.appleCalls, latency: LatencySummary(report.entries.compactMap(\.latency)))
    }

    /// The mean encoded size of a locally decided job, so the raw Kafka run moves messages of the same size.
    private func averageLocalJobBytes() throws -> Int {
        var configuration = AppleSimulatorConfiguration()
        configuration.logger.logLevel = .critical
        var generator = SeedTrafficGenerator(
            simulator: try AppleSimulator(configuration: configuration), bundleID: DemoApp.bundleID,
            productIDs: DemoApp.catalog.products.keys.sorted(),
            mix: TrafficMix(shares: [.otherApp: 0.79, .cracker: 0.093]))
        let codec = MessageCodec()
        let sizes = try generator.generate(count: 500).map { codec.encode($0.job).count }
        return max(1, sizes.reduce(0, +) / sizes.count)
    }

    /// The first field of `/proc/loadavg`, or nil where there is none.
    package static func loadAverage() -> Double? {
        guard let data = FileManager.default.contents(atPath: "/proc/loadavg") else { return nil }
        return String(decoding: data, as: UTF8.self).split(separator: " ").first.flatMap { Double($0) }
    }

    package static func mebibytes(_ bytes: Int) -> Double { (Double(bytes) / 1_048_576 * 10).rounded() / 10 }
}

/// What a run of worker children reports beside its own figures
/// (``WorkerProcessSampler/record(into:workers:report:)``).
package protocol WorkerChildFigures {
    var workerCpuSeconds: [Double]? { get set }
    var benchCpuSeconds: Double? { get set }
    var workerPeakInFlight: [Int]? { get set }
    var workerFetchWakeUps: [Int]? { get set }
    var workerExits: [Int32?]? { get set }
}

extension PipelineBenchmarkResult.Throughput: WorkerChildFigures {}
extension PipelineBenchmarkResult.Drain: WorkerChildFigures {}

/// Samples every worker child's `/metrics` and resident memory (and this process's) every 50 ms while a run goes
/// on, and reads their metrics once more when every job is decided.
package final class WorkerProcessSampler: Sendable {
    package init() {}

    package struct Sample: Sendable {
        /// Seconds since sampling began.
        package var at: Double
        package var inFlight: Double
        package var resident: Int
        package var benchResident: Int
        package var appleCalls: Double
        package var appleCallSeconds: Double
        package var callsInFlight: Double
        package var concurrencyLimit: Double?
    }

    /// Per worker: what a memory run reports.
    package struct MemoryPeaks: Sendable {
        package var inFlight: Double = 0
        package var residentAtPeakInFlight = 0
        package var resident = 0
        package var residentBefore = 0
    }

    private let samples = Mutex<[Int: [Sample]]>([:])
    private let finals = Mutex<[Int: PrometheusTextSample]>([:])
    /// CPU seconds per worker (and of this process, under -1) when sampling began and when every job was decided.
    private let cpu = Mutex<(start: [Int: Double], end: [Int: Double])>(([:], [:]))

    package var watch: DemoWorkerWatch {
        DemoWorkerWatch(
            running: { processes in
                self.recordCPU(processes, atEnd: false)
                await self.sampleUntilCancelled(processes)
            },
            decided: { processes in
                self.recordCPU(processes, atEnd: true)
                for process in processes {
                    if let metrics = await process.metrics() {
                        self.finals.withLock { $0[process.index] = metrics }
                        self.record(process.index, metrics, memory: process.memory(), at: nil)
                    }
                }
            })
    }

    private func recordCPU(_ processes: [DemoWorkerProcess], atEnd: Bool) {
        var readings: [Int: Double] = [-1: ProcessCPUTime.current()?.seconds ?? 0]
        for process in processes { readings[process.index] = process.cpuTime()?.seconds ?? 0 }
        cpu.withLock { cpu in
            if atEnd { cpu.end = readings } else { cpu.start = readings }
        }
    }

    /// CPU seconds each worker used between the start of sampling and the last verdict.
    package func cpuSeconds() -> [Double] {
        cpu.withLock { cpu in
            cpu.end.keys.filter { $0 >= 0 }.sorted().map { (cpu.end[$0] ?? 0) - (cpu.start[$0] ?? 0) }
        }
    }

    /// The same for this process.
    package func benchCpuSeconds() -> Double? {
        cpu.withLock { cpu in cpu.end[-1].map { $0 - (cpu.start[-1] ?? 0) } }
    }

    private func sampleUntilCancelled(_ processes: [DemoWorkerProcess]) async {
        let clock = ContinuousClock()
        let started = clock.now
        while !Task.isCancelled {
            for process in processes {
                guard let metrics = await process.metrics() else { continue }
                record(process.index, metrics, memory: process.memory(), at: started.duration(to: clock.now).seconds)
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Appends a sample (`at` nil: the final one, stamped like the previous sample so it never widens an interval).
    private func record(_ worker: Int, _ metrics: PrometheusTextSample, memory: ProcessMemory?, at: Double?) {
        let callsInFlight = metrics.sum(of: MetricNames.rateLimiterInFlight)
        let sample = Sample(
            at: at ?? 0, inFlight: metrics.sum(of: MetricNames.inFlight), resident: memory?.residentBytes ?? 0,
            benchResident: ProcessMemory.current()?.residentBytes ?? 0,
            appleCalls: metrics.sum(of: MetricNames.appleCalls),
            appleCallSeconds: metrics.sum(of: MetricNames.appleLatency + "_sum"), callsInFlight: callsInFlight,
            concurrencyLimit: callsInFlight > 0
                ? metrics.values(of: MetricNames.rateLimiterConcurrencyLimit).max() : nil)
        samples.withLock { samples in
            var sample = sample
            if at == nil { sample.at = samples[worker]?.last?.at ?? 0 }
            samples[worker, default: []].append(sample)
        }
    }

    package func memoryPeaks(worker: Int) -> MemoryPeaks {
        let list = samples.withLock { $0[worker] ?? [] }
        var peaks = MemoryPeaks()
        peaks.residentBefore = list.first?.resident ?? 0
        for sample in list {
            if sample.inFlight > peaks.inFlight {
                peaks.inFlight = sample.inFlight
                peaks.residentAtPeakInFlight = sample.resident
            }
            peaks.resident = max(peaks.resident, sample.resident)
        }
        return peaks
    }

    package func benchResidentAtPeakInFlight(worker: Int) -> Int {
        let list = samples.withLock { $0[worker] ?? [] }
        return list.max { $0.inFlight < $1.inFlight }?.benchResident ?? 0
    }

    package func benchPeakResident() -> Int {
        samples.withLock { $0.values.flatMap { $0 }.map(\.benchResident).max() ?? 0 }
    }

    package func peakConcurrencyLimit() -> Double? {
        samples.withLock { $0.values.flatMap { $0 }.compactMap(\.concurrencyLimit).max() }
    }

    /// Fills in the figures every run of worker children reports (CPU, peak in flight, fetch wake-ups, exits).
    package func record(into figures: inout some WorkerChildFigures, workers: Int, report: DemoReport) {
        figures.workerExits = report.workerExits
        figures.workerCpuSeconds = cpuSeconds()
        figures.benchCpuSeconds = benchCpuSeconds()
        figures.workerPeakInFlight = (0..<workers).map { Int(memoryPeaks(worker: $0).inFlight) }
        figures.workerFetchWakeUps = finalCounts(of: MetricNames.fetchWakeUps)
    }

    /// Each worker's final value of `name` (summed over its labels), in worker order.
    package func finalCounts(of name: String) -> [Int] {
        finals.withLock { finals in finals.keys.sorted().map { Int(finals[$0]?.sum(of: name) ?? 0) } }
    }

    /// The final histogram buckets of `name`, summed over the workers.
    package func finalHistogram(of name: String) -> [Double: Double] {
        finals.withLock { finals in
            finals.values.reduce(into: [:]) { total, metrics in
                total.merge(metrics.histogramBuckets(of: name), uniquingKeysWith: +)
            }
        }
    }

    /// Each worker's Apple use, with the start and end of its busy interval (seconds since sampling began): the
    /// midpoint between the last sample before its first call and the first one after, and likewise for the end.
    package func appleUse(
        concurrency: Int, latencyMs: Int
    ) -> [(use: PipelineBenchmarkResult.WorkerAppleUse, start: Double?, end: Double?)] {
        let all = samples.withLock { $0 }
        let bound = Double(concurrency) * 1_000 / Double(latencyMs)
        return all.keys.sorted().map { worker in
            let list = all[worker] ?? []
            // Counters only grow: the highest reading is the final one.
            let calls = list.map(\.appleCalls).max() ?? 0
            var start: Double?
            var end: Double?
            if calls > 0, let firstBusy = list.firstIndex(where: { $0.appleCalls > 0 }),
                let firstDone = list.firstIndex(where: { $0.appleCalls >= calls })
            {
                start = firstBusy > 0 ? (list[firstBusy - 1].at + list[firstBusy].at) / 2 : list[firstBusy].at
                end = firstDone > 0 ? (list[firstDone - 1].at + list[firstDone].at) / 2 : list[firstDone].at
            }
            let busy = max(0, (end ?? 0) - (start ?? 0))
            let callSeconds = list.map(\.appleCallSeconds).max() ?? 0
            let rate = busy > 0 ? calls / busy : 0
            return (
                PipelineBenchmarkResult.WorkerAppleUse(
                    worker: worker, appleCalls: Int(calls), busySeconds: busy, callsPerSecond: rate,
                    boundCallsPerSecond: bound, ratioToBound: rate / bound,
                    permitOccupancy: busy > 0 ? callSeconds / (busy * Double(concurrency)) : 0,
                    meanCallMs: calls > 0 ? callSeconds / calls * 1_000 : 0),
                start, end
            )
        }
    }
}

/// Samples resident memory and the worker gauges every 50 ms while a run goes on, keeping the peaks.
package struct GaugeWatcher: Sendable {
    package struct Peaks: Sendable {
        package var inFlight: Double = 0
        package var residentAtPeakInFlight = 0
        package var resident = 0
        package var concurrencyLimit: Double?
    }

    /// The peaks so far, shared by the sampling task and the caller.
    package final class Recorder: Sendable {
        package let peaks = Mutex(Peaks())
    }

    package let registry: PrometheusCollectorRegistry

    package func watch<Value: Sendable>(
        _ body: @escaping @Sendable () async throws -> Value
    ) async throws -> (value: Value, peaks: Peaks) {
        let recorder = Recorder()
        let value = try await withThrowingTaskGroup(of: Value?.self) { group in
            group.addTask {
                while !Task.isCancelled {
                    sample(into: recorder)
                    try? await Task.sleep(for: .milliseconds(50))
                }
                return nil
            }
            group.addTask { try await body() }
            var result: Value?
            while let next = try await group.next() {
                if let next {
                    result = next
                    group.cancelAll()
                }
            }
            guard let result else { throw CancellationError() }
            return result
        }
        return (value, recorder.peaks.withLock { $0 })
    }

    private func sample(into recorder: Recorder) {
        let metrics = PrometheusTextSample(registry.emitToString())
        let inFlight = metrics.sum(of: MetricNames.inFlight)
        // The gauge keeps the last value of an earlier run's gate until this run's gate records: read it only while
        // calls are in flight.
        let callsInFlight = metrics.sum(of: MetricNames.rateLimiterInFlight)
        let limit = callsInFlight > 0 ? metrics.values(of: MetricNames.rateLimiterConcurrencyLimit).max() : nil
        let resident = ProcessMemory.current()?.residentBytes ?? 0
        recorder.peaks.withLock { peaks in
            if inFlight > peaks.inFlight {
                peaks.inFlight = inFlight
                peaks.residentAtPeakInFlight = resident
            }
            peaks.resident = max(peaks.resident, resident)
            if let limit { peaks.concurrencyLimit = max(peaks.concurrencyLimit ?? 0, limit) }
        }
    }
}
