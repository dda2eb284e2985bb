import AppleSimulator
import Foundation
import Gateway
import Kafka
import Logging
import Messages
import Observability
import Synchronization
import Traffic

#if canImport(Glibc)
    import Glibc
#endif

/// What `verify-worker chaos --live-fuzz N` saw: N adversarial inputs through live `verify-worker run` processes.
public struct ChaosLiveFuzzReport: Sendable, Codable, ChaosPrintedReport {
    public var inputs = 0
    public var bytes = 0
    public var largestInput = 0
    /// Inputs that may take their kind's large forms (``AdversarialJobCorpus/heavyShare``).
    public var heavyShare = 0.0
    public var maximumSize = 0
    public var kinds: [String: Int] = [:]
    /// Inputs the worker's codec reads as jobs (each must end `rejected`) and as non-jobs (each a dead letter).
    public var expectedJobs = 0
    public var expectedDeadLetters = 0
    /// What came back: verdict outcomes and `dead_letter`, every delivery counted.
    public var outcomes: [String: Int] = [:]
    public var settled = 0
    public var workers = 0
    public var partitions = 0
    /// Workers that exited while the run went on (any exit before the final SIGTERM is a crash), and restarts.
    public var workerCrashes = 0
    public var workerRestarts = 0
    /// The largest resident set seen per worker (`VmRSS` of /proc/PID/status, sampled every second), in MiB.
    public var peakRSSMegabytes: [String: Int] = [:]
    public var maximumRSSMegabytes = 0
    public var violations = 0
    public var violationExamples: [String] = []
    public var harnessErrors = 0
    public var harnessErrorExamples: [String] = []
    public var elapsedSeconds = 0.0
    public var inputsPerSecond = 0.0
    public var workDirectory = ""

    enum CodingKeys: String, CodingKey {
        case inputs, bytes, kinds, outcomes, settled, workers, partitions, violations
        case largestInput = "largest_input"
        case heavyShare = "heavy_share"
        case maximumSize = "size_limit"
        case expectedJobs = "expected_jobs"
        case expectedDeadLetters = "expected_dead_letters"
        case workerCrashes = "worker_crashes"
        case workerRestarts = "worker_restarts"
        case peakRSSMegabytes = "max_rss_mb"
        case maximumRSSMegabytes = "rss_limit_mb"
        case violationExamples = "violation_examples"
        case harnessErrors = "harness_errors"
        case harnessErrorExamples = "harness_error_examples"
        case elapsedSeconds = "elapsed_s"
        case inputsPerSecond = "inputs_per_s"
        case workDirectory = "work_directory"
    }
}

/// How a live fuzz run is shaped (the cluster itself comes from ``ChaosConfiguration``).
public struct ChaosLiveFuzzPlan: Sendable {
    /// Adversarial inputs to submit. Default: 10,000.
    public var inputs = 10_000
    /// See ``AdversarialJobCorpus/heavyShare``. Default: 0.01.
    public var heavyShare = 0.01
    /// A worker whose resident set passes this is a violation. Default: 1,024 MiB.
    public var maximumRSSMegabytes = 1_024

    public init() {}
}

extension ChaosRun {
    /// The fuzzing through live workers: the adversarial corpus into `receipt-jobs` of a running cluster (dev broker,
    /// Apple simulator, PostgreSQL, N workers; no faults). Every input must end as a dead letter or a `rejected`
    /// verdict, no worker may exit, and each worker's resident set must stay under the plan's limit.
    public func runLiveFuzz(_ plan: ChaosLiveFuzzPlan) async throws -> ChaosLiveFuzzReport {
        try await withEnvironment(
            runIDPrefix: "fuzz", keepsDirectory: { $0.violations != 0 || $0.harnessErrors != 0 }
        ) { try await $0.runLiveFuzz(plan) }
    }
}

extension ChaosEnvironment {
    func runLiveFuzz(_ plan: ChaosLiveFuzzPlan) async throws -> ChaosLiveFuzzReport {
        let clock = ContinuousClock()
        var report = ChaosLiveFuzzReport()
        report.heavyShare = plan.heavyShare
        report.maximumSize = configuration.fuzzMaximumSize
        report.maximumRSSMegabytes = plan.maximumRSSMegabytes
        report.workers = configuration.workers
        report.workDirectory = directory.path

        // 1. The simulator's PKI, and other apps' authentic receipts for the corpus to mutate.
        let simulatorState = try ChaosSimulatorState(directory: directory, secretPrefix: "fuzz", runID: runID)
        let sharedSecret = simulatorState.sharedSecret
        let minting = simulatorState.minting
        let canary = try ChaosCanary()
        defer { canary.stop() }
        let codec = MessageCodec()
        let seedTraffic = try ChaosTrafficBuilder(
            simulator: minting, seed: configuration.seed, allowSandbox: configuration.allowSandbox, runID: runID
        ).build(jobs: 200, fuzz: 0)
        let otherApps = Set(seedTraffic.jobs.filter { $0.category == "other_app" }.map(\.jobID))
        let seeds = seedTraffic.messages.compactMap { message -> String? in
            guard let job = try? codec.decodeJob(message.value), otherApps.contains(job.jobID) else { return nil }
            return job.proof.value
        }

        // 2. The cluster.
        let partitions = configuration.partitions ?? 24
        partitionCount.withLock { $0 = partitions }
        report.partitions = partitions
        let window = configuration.flowWindowBytes ?? partitions * Self.windowBytesPerPartition
        let (bootstrap, _) = try await startCluster(simulatorState)

        // 3. Submit with a window, read back, watch the workers.
        let started = clock.now
        let tally = ChaosTally(expectedJobs: [], expectedDeadLetters: [], keepsRecords: false)
        let offsets = ChaosOffsetTracker()
        let (reader, producer) = try readerAndProducer(
            bootstrap: bootstrap, tally: tally, offsets: offsets, producerRole: "fuzzer")
        let submitter = JobSubmitter(producer: producer, attempts: ChaosSubmitter.attempts)
        let deliveries = ChaosDeliveryLog()
        let watch = ChaosWorkerWatch(workers: configuration.workers)
        var corpus = AdversarialJobCorpus(receiptSeeds: seeds, seed: configuration.seed ^ 0xF022, tag: "\(runID)-fuzz")
        corpus.maximumSize = configuration.fuzzMaximumSize
        corpus.heavyShare = plan.heavyShare
        corpus.baitURL = canary.url

        var retention: ChaosRetentionCheck.Outcome = ([], ([], []))
        var stalled: [String] = []
        // The reader is the run's in-process service, as in the chaos run; the cluster's processes are children.
        try await HarnessServices.run([reader], logger: quietLogger) {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await self.watchWorkers(watch) }
                var identities = Set<String>()
                try await withThrowingDiscardingTaskGroup { sends in
                    for number in 1...max(1, plan.inputs) {
                        let message = corpus.next()
                        let key = Array(message.key.utf8)
                        report.inputs += 1
                        report.bytes += message.value.count
                        report.largestInput = max(report.largestInput, message.value.count)
                        report.kinds[message.kind.rawValue, default: 0] += 1
                        // The message, then its follow-up on the same key: sent one after the other, so that the
                        // follow-up is behind it in its partition and its lane.
                        var records: [(value: [UInt8], jobID: String?, bytes: Int)] = []
                        for value in [message.value] + (message.followUp.map { [$0] } ?? []) {
                            let jobID: String? =
                                switch AdversarialJobCorpus.classify(value, codec: codec) {
                                case .job(let job): job.jobID
                                case .deadLetter: nil
                                }
                            let bytes = value.count + key.count
                            if let jobID {
                                if identities.insert("job:" + jobID).inserted { report.expectedJobs += 1 }
                            } else if identities.insert("dlq:" + message.key).inserted {
                                report.expectedDeadLetters += 1
                            }
                            _ = await tally.waitForRoom(
                                limit: max(0, window - bytes), within: configuration.settleTimeout)
                            tally.submitting(jobID: jobID, deadLetterKey: message.key, bytes: bytes, expect: true)
                            records.append((value, jobID, bytes))
                        }
                        sends.addTask {
                            for (value, jobID, bytes) in records {
                                let delivered = try await submitter.send(key: key, value: value)
                                deliveries.delivered(
                                    ChaosDeliveryLog.Entry(
                                        jobID: jobID, deadLetterKey: message.key,
                                        partition: delivered.topicPartition.partition, offset: delivered.offset),
                                    bytes: bytes)
                            }
                        }
                        if number % 50_000 == 0 {
                            let seconds = Self.seconds(started.duration(to: clock.now))
                            logger.info(
                                "chaos: live fuzz progress",
                                metadata: [
                                    LogKeys.chaosInputs: "\(number)", LogKeys.chaosSettled: "\(tally.settled)",
                                    LogKeys.chaosInputsPerSecond: "\(Int(Double(number) / max(seconds, 0.001)))",
                                ])
                        }
                    }
                }
                let expected = identities.count
                if await tally.waitUntilSettled(expected, within: configuration.settleTimeout) {
                    stalled = await uncommittedPartitions(
                        bootstrap: bootstrap, producer: producer, partitions: partitions
                    )
                    .map(\.description)
                } else {
                    logger.warning(
                        "chaos: live fuzz did not settle", metadata: [LogKeys.chaosSettled: "\(tally.settled)"])
                }
                report.settled = tally.settled
                report.elapsedSeconds = Self.seconds(started.duration(to: clock.now))
                report.inputsPerSecond = Double(report.inputs) / max(report.elapsedSeconds, 0.001)
                watch.stop()
                let (jobMarks, readMarks) = await stopAndReadToEnd(
                    reader: reader, offsets: offsets, producer: producer, partitions: partitions)
                group.cancelAll()
                retention = ChaosRetentionCheck.check(
                    deliveries: deliveries.entries, jobWatermarks: jobMarks, unsettled: tally.unsettled,
                    readerNext: offsets.next, readWatermarks: readMarks)
            }
        }
        await producer.shutdown(timeout: .seconds(5))

        // 4. The findings.
        let findings = tally.findings
        report.outcomes = findings.outcomes
        var violations = findings.notRejected + findings.unexpected + stalled
        let unsettled = tally.unsettled
        for jobID in unsettled.jobs.subtracting(retention.deleted.jobs).sorted().prefix(1_000) {
            violations.append("job \(jobID.prefix(64)): no verdict")
        }
        for key in unsettled.deadLetters.subtracting(retention.deleted.deadLetters).sorted().prefix(1_000) {
            violations.append("input \(key): no dead letter")
        }
        let watched = watch.snapshot
        report.workerCrashes = watched.crashes.count
        report.workerRestarts = watched.restarts
        violations += watched.crashes.map { "worker crashed: \($0)" }
        for (index, kilobytes) in watched.peakRSSKilobytes.enumerated() {
            report.peakRSSMegabytes["worker-\(index)"] = kilobytes >> 10
            if kilobytes >> 10 > plan.maximumRSSMegabytes {
                violations.append(
                    "worker-\(index) reached \(kilobytes >> 10) MiB resident (limit \(plan.maximumRSSMegabytes))")
            }
        }
        violations += serviceViolations.map(\.description)
        if canary.hits > 0 { violations.append("the URL bait listener saw \(canary.hits) connections") }
        for endpoint in (await simulatorRequests()).keys.sorted() where !Self.isConfiguredEndpoint(endpoint) {
            violations.append("the simulator was asked for \(endpoint)")
        }
        violations += ChaosLogAudit.audit(directory: directory, secrets: [sharedSecret]).map { "log leak: \($0)" }
        report.violations = violations.count
        report.violationExamples = Array(violations.prefix(25))
        let harnessErrors = offsets.holes + retention.errors
        report.harnessErrors = harnessErrors.count
        report.harnessErrorExamples = harnessErrors.prefix(25).map(\.description)
        return report
    }

    /// Every second until stopped: each worker's resident set, and any worker that exited (a crash: it is restarted).
    private func watchWorkers(_ watch: ChaosWorkerWatch) async {
        while !watch.isStopped {
            for index in 0..<configuration.workers {
                guard let process = worker(index) else { continue }
                if let exit = process.exit {
                    guard !watch.isStopped else { return }
                    watch.crashed("worker-\(index): \(exit)")
                    do {
                        try restartWorker(index)
                        watch.restarted()
                        _ = await waitForReady(index, within: .seconds(60))
                    } catch {
                        watch.crashed("worker-\(index): restart failed: \(error)")
                    }
                    continue
                }
                if let kilobytes = Self.residentKilobytes(pid: process.pid) {
                    watch.sample(index, kilobytes: kilobytes)
                }
            }
            try? await Task.sleep(for: .seconds(1))
        }
    }

    /// `VmRSS` of /proc/PID/status, in KiB.
    static func residentKilobytes(pid: Int32) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return line.split(separator: " ").dropFirst().first.flatMap { Int($0) }
        }
        return nil
    }
}

/// The worker watch's findings, shared between the sampling task and the run.
final class ChaosWorkerWatch: Sendable {
    private struct State {
        var peakRSSKilobytes: [Int]
        var crashes: [String] = []
        var restarts = 0
        var stopped = false
    }

    private let state: Mutex<State>

    init(workers: Int) { state = Mutex(State(peakRSSKilobytes: Array(repeating: 0, count: workers))) }

    func sample(_ index: Int, kilobytes: Int) {
        state.withLock { $0.peakRSSKilobytes[index] = max($0.peakRSSKilobytes[index], kilobytes) }
    }
    func crashed(_ detail: String) { state.withLock { $0.crashes.append(detail) } }
    func restarted() { state.withLock { $0.restarts += 1 } }
    func stop() { state.withLock { $0.stopped = true } }
    var isStopped: Bool { state.withLock { $0.stopped } }
    var snapshot: (peakRSSKilobytes: [Int], crashes: [String], restarts: Int) {
        state.withLock { ($0.peakRSSKilobytes, $0.crashes, $0.restarts) }
    }
}
