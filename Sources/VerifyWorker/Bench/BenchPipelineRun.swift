import AppleSimulator
import Foundation
import Kafka
import Logging
import Messages
import Operations
import Pipeline
import Prometheus
import RateLimiter
import Synchronization

/// What `verify-worker bench pipeline` measures, and how big each part is.
struct PipelineBenchmarkOptions: Sendable {
    /// Messages of the raw Kafka run (a). Default: 50 000.
    var kafkaMessages = 50_000
    /// Jobs of the locally decided run (b). Default: 20 000.
    var localJobs = 20_000
    /// Jobs of the seed-mix run (c). Default: 10 000.
    var mixJobs = 10_000
    /// Simulated Apple latency of the seed-mix run, in milliseconds. Default: 100.
    var appleLatencyMs = 100
    /// Concurrent Apple calls per worker in run (c): the gate's floor and ceiling both, so the bound is exact. Low
    /// enough that Apple, not the local work, limits the run. Default: 2.
    var appleConcurrency = 2
    /// Jobs of the paced latency run (d), submitted at half the throughput of (c). Default: 3 000.
    var latencyJobs = 3_000
    /// Jobs held at once in the memory run (e) (also that run's `max_in_flight`). Default: 10 000.
    var memoryJobs = 10_000
    /// Workers (consumers of one group, in this process) of runs (b) and (c). Default: 2.
    var workers = 2
    /// Partitions of every topic; the mock cluster keeps about 5 MB per partition. Default: 16.
    var partitions = 16
    /// The workers' `kafka_properties` (librdkafka `name=value;…`), for tuning experiments. Default: none.
    var workerKafkaProperties = ""
}

/// The figures `bench pipeline` prints (snake_case JSON).
struct PipelineBenchmarkResult: Codable, Sendable {
    struct KafkaCeiling: Codable, Sendable {
        var raw: KafkaThroughputBenchmark.Result
        /// A job crosses Kafka once produced and once consumed and committed: the slower of the two bounds it.
        var ceilingMessagesPerSecond: Double
    }

    struct Throughput: Codable, Sendable {
        var jobs: Int
        var workers: Int
        var partitions: Int
        var seconds: Double
        var jobsPerSecond: Double
        /// Jobs that got no verdict (must be 0) and jobs that got more than one (redeliveries; 0 in a calm run).
        var undecided: Int
        var duplicated: Int
        var outcomes: [String: Int]
        var appleCalls: Int
        var latency: LatencySummary
    }

    struct LocalRun: Codable, Sendable {
        var run: Throughput
        var ratioToKafkaCeiling: Double
    }

    struct AppleBoundRun: Codable, Sendable {
        var run: Throughput
        var appleLatencyMs: Int
        var appleConcurrencyPerWorker: Int
        /// The highest `verify_ratelimiter_concurrency_limit` seen while calls were in flight (the two workers' gates
        /// share one label in this process, so this is one gate's limit).
        var observedConcurrencyLimit: Double?
        /// Apple calls over the whole run.
        var appleCallsPerSecond: Double
        /// From the first submit to the last verdict decided by Apple (the jobs go out in one burst): the part of the
        /// run that Apple bounds.
        var applePhaseSeconds: Double
        var applePhaseCallsPerSecond: Double
        /// workers × concurrency / latency: the most Apple calls per second the limit allows.
        var boundAppleCallsPerSecond: Double
        /// `apple_phase_calls_per_second / bound_apple_calls_per_second`.
        var ratioToBound: Double
    }

    struct LatencyRun: Codable, Sendable {
        var jobs: Int
        var submitRatePerSecond: Double
        var appleLatencyMs: Int
        var undecided: Int
        var latency: LatencySummary
        /// The worker's own view (`verify_job_duration_seconds`: from `submitted_at` to the verdict's delivery
        /// report), as the upper bounds of the histogram buckets holding p50 and p99; the rest of `latency` is the
        /// verdict reader's hop.
        var workerP50AtMostMs: Double?
        var workerP99AtMostMs: Double?
    }

    struct MemoryRun: Codable, Sendable {
        var jobs: Int
        var maxInFlight: Int
        /// The highest `verify_jobs_in_flight` seen.
        var peakInFlight: Int
        var residentMiBBefore: Double
        var residentMiBAtPeakInFlight: Double
        var peakResidentMiB: Double
        var seconds: Double
        var undecided: Int
    }

    var cores: Int
    /// The 1-minute load average at the end (other processes share the machine).
    var loadAverage1m: Double?
    var memory: MemoryRun?
    var kafka: KafkaCeiling
    var local: LocalRun
    var seedMix: AppleBoundRun
    var pacedLatency: LatencyRun
}

/// Runs every part of `bench pipeline` in this process, one after the other, each on a fresh mock cluster and
/// simulator, through ``DemoRun`` (the same workers `verify-worker run` builds, with a SQLite ledger).
struct PipelineBenchmark: Sendable {
    var options: PipelineBenchmarkOptions
    var progress: @Sendable (String) -> Void

    func run() async throws -> PipelineBenchmarkResult {
        // Before any worker starts: the gauges this benchmark watches are read back from the registry.
        let registry = MetricsBootstrap.registry()

        var memory: PipelineBenchmarkResult.MemoryRun?
        if options.memoryJobs > 0 {
            progress("(e) memory with \(options.memoryJobs) jobs in flight")
            memory = try await measureMemory(registry: registry)
        }

        let jobBytes = try averageLocalJobBytes()
        progress("(a) raw Kafka: \(options.kafkaMessages) messages of \(jobBytes) bytes")
        let raw = try await KafkaThroughputBenchmark(
            messages: options.kafkaMessages, messageBytes: jobBytes, brokers: 1,
            partitions: max(options.partitions, options.kafkaMessages * jobBytes / (3 << 20) + 1)
        ).run()
        let kafka = PipelineBenchmarkResult.KafkaCeiling(
            raw: raw, ceilingMessagesPerSecond: min(raw.produceMessagesPerSecond, raw.consumeCommitMessagesPerSecond))

        progress("(b) \(options.localJobs) locally decided jobs (other-app and cracker receipts)")
        var localOptions = demoOptions(jobs: options.localJobs)
        localOptions.mix = TrafficMix(shares: [.otherApp: 0.79, .cracker: 0.093])
        let local = try await throughput(DemoRun(options: localOptions).run())

        progress("(c) \(options.mixJobs) seed-mix jobs, Apple at \(options.appleLatencyMs) ms")
        var mixOptions = demoOptions(jobs: options.mixJobs)
        mixOptions.appleLatencyMs = Double(options.appleLatencyMs)
        mixOptions.workerSettings["apple_max_concurrency"] = String(options.appleConcurrency)
        mixOptions.workerSettings["apple_min_concurrency"] = String(options.appleConcurrency)
        let watcher = GaugeWatcher(registry: registry)
        let mixReport = try await watcher.watch { [mixOptions] in try await DemoRun(options: mixOptions).run() }
        let mix = throughput(mixReport.value)
        let bound = Double(options.workers * options.appleConcurrency) * 1_000 / Double(options.appleLatencyMs)
        let applePhase =
            mixReport.value.entries.filter { $0.verdicts.first?.decidedBy == .apple }.compactMap(\.latency).max()?
            .seconds ?? mix.seconds
        let applePhaseRate = Double(mix.appleCalls) / applePhase

        let rate = (mix.jobsPerSecond / 2).rounded(.down)
        progress("(d) \(options.latencyJobs) seed-mix jobs at \(Int(rate))/s, Apple at \(options.appleLatencyMs) ms")
        var pacedOptions = mixOptions
        pacedOptions.jobs = options.latencyJobs
        pacedOptions.submitRatePerSecond = max(1, rate)
        let durationsBefore = PrometheusTextSample(registry.emitToString()).histogramBuckets(
            of: MetricNames.verdictLatency)
        let paced = throughput(try await DemoRun(options: pacedOptions).run())
        let durationsAfter = PrometheusTextSample(registry.emitToString()).histogramBuckets(
            of: MetricNames.verdictLatency)
        let workerQuantile = { (fraction: Double) in
            PrometheusTextSample.quantileUpperBound(fraction, from: durationsBefore, to: durationsAfter).map {
                $0 * 1_000
            }
        }

        return PipelineBenchmarkResult(
            cores: ProcessInfo.processInfo.activeProcessorCount, loadAverage1m: Self.loadAverage(), memory: memory,
            kafka: kafka,
            local: .init(run: local, ratioToKafkaCeiling: local.jobsPerSecond / kafka.ceilingMessagesPerSecond),
            seedMix: .init(
                run: mix, appleLatencyMs: options.appleLatencyMs, appleConcurrencyPerWorker: options.appleConcurrency,
                observedConcurrencyLimit: mixReport.peaks.concurrencyLimit,
                appleCallsPerSecond: Double(mix.appleCalls) / mix.seconds, applePhaseSeconds: applePhase,
                applePhaseCallsPerSecond: applePhaseRate, boundAppleCallsPerSecond: bound,
                ratioToBound: applePhaseRate / bound),
            pacedLatency: .init(
                jobs: paced.jobs, submitRatePerSecond: max(1, rate), appleLatencyMs: options.appleLatencyMs,
                undecided: paced.undecided, latency: paced.latency, workerP50AtMostMs: workerQuantile(0.5),
                workerP99AtMostMs: workerQuantile(0.99)))
    }

    private func demoOptions(jobs: Int) -> DemoOptions {
        var demo = DemoOptions()
        demo.jobs = jobs
        demo.workers = options.workers
        demo.partitions = options.partitions
        demo.progressInterval = nil
        if !options.workerKafkaProperties.isEmpty {
            demo.workerSettings["kafka_properties"] = options.workerKafkaProperties
        }
        return demo
    }

    /// One worker holds `memoryJobs` genuine jobs at once: Apple answers after 12 s and admits 4 calls at a time,
    /// so every other job waits in the call gate until its 8 s deadline ends it as `unverifiable`.
    private func measureMemory(registry: PrometheusCollectorRegistry) async throws -> PipelineBenchmarkResult.MemoryRun
    {
        var demo = demoOptions(jobs: options.memoryJobs)
        demo.workers = 1
        demo.mix = TrafficMix(shares: [.genuine: 1])
        demo.appleLatencyMs = 12_000
        demo.appleDeadline = .seconds(8)
        demo.workerSettings = demo.workerSettings.merging([
            "max_in_flight": String(options.memoryJobs), "apple_max_concurrency": "4", "apple_min_concurrency": "4",
        ]) { _, new in new }
        let before = ProcessMemory.current()?.residentBytes ?? 0
        let started = ContinuousClock.now
        let watched = try await GaugeWatcher(registry: registry).watch { [demo] in
            try await DemoRun(options: demo).run()
        }
        let seconds = started.duration(to: .now).seconds
        let report = watched.value
        return .init(
            jobs: options.memoryJobs, maxInFlight: options.memoryJobs, peakInFlight: Int(watched.peaks.inFlight),
            residentMiBBefore: Self.mebibytes(before),
            residentMiBAtPeakInFlight: Self.mebibytes(watched.peaks.residentAtPeakInFlight),
            peakResidentMiB: Self.mebibytes(watched.peaks.resident), seconds: seconds,
            undecided: report.entries.filter(\.verdicts.isEmpty).count)
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
    static func loadAverage() -> Double? {
        guard let data = FileManager.default.contents(atPath: "/proc/loadavg") else { return nil }
        return String(decoding: data, as: UTF8.self).split(separator: " ").first.flatMap { Double($0) }
    }

    static func mebibytes(_ bytes: Int) -> Double { (Double(bytes) / 1_048_576 * 10).rounded() / 10 }
}

/// Samples resident memory and the worker gauges every 50 ms while a run goes on, keeping the peaks.
struct GaugeWatcher: Sendable {
    struct Peaks: Sendable {
        var inFlight: Double = 0
        var residentAtPeakInFlight = 0
        var resident = 0
        var concurrencyLimit: Double?
    }

    /// The peaks so far, shared by the sampling task and the caller.
    final class Recorder: Sendable {
        let peaks = Mutex(Peaks())
    }

    let registry: PrometheusCollectorRegistry

    func watch<Value: Sendable>(
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
        let callsInFlight = metrics.sum(of: RateLimiterMetricNames.inFlight)
        let limit = callsInFlight > 0 ? metrics.values(of: RateLimiterMetricNames.concurrencyLimit).max() : nil
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

extension Duration {
    fileprivate var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
