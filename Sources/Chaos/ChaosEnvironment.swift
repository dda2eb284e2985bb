import AppleSimulator
import Decision
import Entitlements
import Foundation
import Gateway
import Kafka
import Ledger
import Logging
import Messages
import Observability
import RateLimiter
import Receipts
import Synchronization
import Traffic

#if canImport(Glibc)
    import Glibc
#endif

/// One run's processes and state, from start to tear-down.
final class ChaosEnvironment: Sendable {
    let configuration: ChaosConfiguration
    let directory: URL
    let runID: String
    let started: ContinuousClock.Instant
    let logger: Logger
    private let services = Mutex<Services>(Services())
    let clock = ContinuousClock()
    /// The notification family's gateway and reconciler.
    let notificationServices = ChaosNotificationServices()

    private struct Services {
        var broker: ChildProcess?
        var simulator: ChildProcess?
        var playSimulator: ChildProcess?
        var workers: [ChildProcess?] = []
        var metricsPorts: [Int] = []
        var entitlements: ChildProcess?
        var entitlementsPort: Int?
        var postgresState: URL?
        var faults: [ChaosFaultRecord] = []
        var violations: [ChaosViolation] = []
    }

    init(configuration: ChaosConfiguration, directory: URL, runID: String, started: ContinuousClock.Instant) throws {
        self.configuration = configuration
        self.directory = directory
        self.runID = runID
        self.started = started
        self.logger = configuration.logger
    }

    var secondsSinceStart: Double { Self.seconds(started.duration(to: clock.now)) }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
    }

    // MARK: The run

    func run() async throws -> ChaosReport {
        // 1. Mint the traffic with an in-process simulator sharing the state directory, before the simulator process
        // starts: it then loads the same PKI and the journal of minted (and refunded) transactions.
        let simulatorState = try ChaosSimulatorState(directory: directory, secretPrefix: "chaos", runID: runID)
        let sharedSecret = simulatorState.sharedSecret
        let minting = simulatorState.minting
        logger.info("chaos: minting traffic", metadata: [LogKeys.chaosJobs: "\(configuration.jobs)"])
        let canary = try ChaosCanary()
        defer { canary.stop() }
        var builder = ChaosTrafficBuilder(
            simulator: minting, seed: configuration.seed, allowSandbox: configuration.allowSandbox, runID: runID)
        builder.baitURL = canary.url
        builder.ios6Refunds = configuration.ios6Refunds
        builder.fuzzMaximumSize = configuration.fuzzMaximumSize
        builder.fuzzHeavyShare = configuration.fuzzHeavyShare
        let playJobs = Int(Double(configuration.jobs) * min(1, max(0, configuration.playShare)))
        var traffic = try builder.build(jobs: max(1, configuration.jobs - playJobs), fuzz: configuration.fuzz)
        var catalog = ChaosApp.catalog
        var playPurchases: [ChaosPlayPurchase] = []
        if playJobs > 0 {
            // The Play simulator keeps its purchases in memory: it starts first, and the traffic is minted in it.
            let play = try await startPlaySimulator()
            playPurchases = try await ChaosPlayTrafficBuilder(simulator: play, runID: runID)
                .build(jobs: playJobs, into: &traffic)
            traffic.shuffleBursts(seed: configuration.seed ^ 0x9_1A7)
            let licensingKeyFile = directory.appendingPathComponent("play-licensing-key")
            try Data(try await play.licensingKey(packageName: ChaosPlayApp.packageName).utf8).write(
                to: licensingKeyFile)
            catalog = ChaosPlayApp.catalog(
                licensingKeyFile: licensingKeyFile, serviceAccountKeyFile: playServiceAccountFile)
        }
        let playJobIDs = Set(traffic.jobs.filter { $0.category.hasPrefix("play_") }.map(\.jobID))

        // 2. Services. Topics get enough partitions that the planned volume stays far below the mock broker's
        // 5 MiB per partition (see ``ChaosHarnessError``), and the submitter keeps a window of unsettled bytes.
        let identities = Self.identities(traffic)
        let plannedBytes = traffic.messages.reduce(0) { $0 + $1.value.count + $1.key.count }
        let partitions = configuration.partitions ?? Self.partitions(forPlannedBytes: plannedBytes)
        partitionCount.withLock { $0 = partitions }
        let window = configuration.flowWindowBytes ?? partitions * Self.windowBytesPerPartition
        logger.info(
            "chaos: traffic minted",
            metadata: [
                LogKeys.chaosMessages: "\(traffic.messages.count)", LogKeys.chaosPlannedMB: "\(plannedBytes >> 20)",
                LogKeys.chaosPartitions: "\(partitions)", LogKeys.chaosWindowKB: "\(window >> 10)",
            ])
        let (bootstrap, ledgerURL) = try await startCluster(simulatorState, catalog: catalog)

        // 3. Read verdicts and dead letters; submit; inject faults meanwhile.
        var retention: ChaosRetentionCheck.Outcome = ([], ([], []))
        var notifications: ChaosNotificationOutcome?
        var playLifecycle: (report: ChaosPlayLifecycleReport, violations: [ChaosViolation])?
        var playLifecycleTokens = Set<String>()
        var playLifecycleAccounts = Set<String>()
        var trimmed: [String: Int] = [:]
        let tally = ChaosTally(
            expectedJobs: Set(traffic.jobs.map(\.jobID)), expectedDeadLetters: traffic.malformedKeys)
        let offsets = ChaosOffsetTracker()
        let (reader, producer) = try readerAndProducer(
            bootstrap: bootstrap, tally: tally, offsets: offsets, producerRole: "frontend")
        let expectedSettled = traffic.jobs.count + traffic.malformedKeys.count
        let settledBySubmission = Self.settledCounts(traffic)
        let deliveries = ChaosDeliveryLog()
        let submitter = ChaosSubmitter(
            producer: producer, traffic: traffic, identities: identities, tally: tally, deliveries: deliveries,
            windowBytes: window, stallTimeout: configuration.settleTimeout)

        // The reader is the run's in-process service; the cluster's processes are children (``ChildProcess``).
        try await HarnessServices.run([reader], logger: quietLogger) {
            let schedule = faultSchedule()
            let slices = submitter.slices(schedule.count + 1)
            for (index, slice) in slices.enumerated() {
                // Each fault meets a slice of messages in flight: the slice is being produced when it strikes.
                async let submitted: Void = submitter.submit(slice)
                guard index < schedule.count else {
                    try await submitted
                    logger.info(
                        "chaos: last slice submitted",
                        metadata: [
                            LogKeys.chaosMessages: "\(slice.upperBound)", LogKeys.chaosSettled: "\(tally.settled)",
                        ])
                    break
                }
                try await Task.sleep(for: .milliseconds(300))
                var record = await inject(schedule[index], index: index)
                try await submitted
                let clearedAt = clock.now
                let target = settledBySubmission[slice.upperBound]
                if await tally.waitUntilSettled(target, within: configuration.settleTimeout) {
                    record.recoverySeconds = Self.seconds(clearedAt.duration(to: clock.now))
                }
                services.withLock { $0.faults.append(record) }
                logger.info(
                    "chaos: fault cleared",
                    metadata: [
                        LogKeys.chaosFault: "\(schedule[index])",
                        LogKeys.chaosRecoverySeconds: "\(record.recoverySeconds ?? -1)",
                    ])
            }
            let settledInTime = await tally.waitUntilSettled(expectedSettled, within: configuration.settleTimeout)
            if let play = playSimulator, !playPurchases.isEmpty {
                // Acknowledgements follow a grant (and a crash's sweep takes a lease to expire): the workers stay up
                // until every granted Play purchase has had its call.
                let checker = ChaosPlayChecker(
                    jobs: traffic.jobs.filter { playJobIDs.contains($0.jobID) }, purchases: playPurchases)
                await waitForPlayFollowUps(
                    play, tokens: checker.grantedTokens(tally.snapshot.verdicts), within: configuration.settleTimeout)
            }
            if settledInTime {
                let stalled = await uncommittedPartitions(
                    bootstrap: bootstrap, producer: producer, partitions: partitions)
                services.withLock { $0.violations += stalled }
            }
            // Not only after a clean settle: the family reads the ledger and the simulator, not the harness's reader.
            if configuration.notifications {
                // Apple's lifecycle events are for App Store purchases only.
                notifications = await runNotificationPhase(
                    verdicts: tally.snapshot.verdicts.filter { $0.store == .appStore }, ledgerURL: ledgerURL,
                    stateDirectory: simulatorState.stateDirectory, producer: producer)
                if playSimulator != nil, !playPurchases.isEmpty, configuration.playLifecyclePurchases > 0 {
                    let checker = ChaosPlayChecker(
                        jobs: traffic.jobs.filter { playJobIDs.contains($0.jobID) }, purchases: playPurchases)
                    let outcome = await runPlayLifecyclePhase(
                        purchases: playPurchases, grantedTokens: checker.grantedTokens(tally.snapshot.verdicts),
                        ledgerURL: ledgerURL, stateDirectory: simulatorState.stateDirectory, producer: producer)
                    playLifecycle = (outcome.report, outcome.violations)
                    playLifecycleTokens = Set(outcome.owners.keys)
                    playLifecycleAccounts = Set(outcome.owners.values)
                }
            }
            logger.info(
                "chaos: settled, stopping the workers",
                metadata: [LogKeys.chaosSettled: "\(tally.settled)", LogKeys.chaosExpected: "\(expectedSettled)"])
            let (jobMarks, readMarks) = await stopAndReadToEnd(
                reader: reader, offsets: offsets, producer: producer, partitions: partitions)
            retention = ChaosRetentionCheck.check(
                deliveries: deliveries.entries, jobWatermarks: jobMarks, unsettled: tally.unsettled,
                readerNext: offsets.next, readWatermarks: readMarks)
            if jobMarks.count < partitions || readMarks.count < 2 * partitions {
                retention.errors.append(
                    ChaosHarnessError(
                        kind: .watermarksUnavailable,
                        detail: "read \(jobMarks.count + readMarks.count) of \(3 * partitions) partitions' watermarks"))
            }
            // Messages the broker deleted unsettled are harness errors; only the others make the run a failure.
            let unsettled = tally.unsettled
            let missing =
                unsettled.jobs.subtracting(retention.deleted.jobs).count
                + unsettled.deadLetters.subtracting(retention.deleted.deadLetters).count
            if !settledInTime, missing > 0 {
                services.withLock {
                    $0.violations.append(
                        .runFailed("\(missing) of \(expectedSettled) messages did not settle in time"))
                }
            }
            trimmed = [Topics.jobs: jobMarks.values.filter { $0.low > 0 }.count]
            for topic in [Topics.verdicts, Topics.deadLetters] {
                trimmed[topic] = readMarks.filter { $0.key.topic == topic && $0.value.low > 0 }.count
            }
        }
        await producer.shutdown(timeout: .seconds(5))
        var harnessErrors = offsets.holes + retention.errors
        if submitter.stalls.value > 0 {
            harnessErrors.append(
                ChaosHarnessError(
                    kind: .windowStalled,
                    detail: "nothing settled for \(configuration.settleTimeout) while the window was full; window off"))
        }

        // 4. The ledger and the invariants.
        var snapshot = tally.snapshot
        // The notification family's verdicts, and those of the reconciler's corrections, are checked by the family's
        // own invariants, against Apple's truth. Without the family, a correction is a verdict never submitted.
        snapshot.verdicts.removeAll { $0.jobID.hasPrefix(NotificationJob.jobIDPrefix) }
        // So are the verification jobs of the family members the family shared purchases with.
        snapshot.verdicts.removeAll { $0.jobID.hasPrefix(familyMemberJobIDPrefix) }
        // Google Play's notification jobs (pushed, swept, re-read) and the verification jobs of its pending purchases
        // are the Play lifecycle's, checked against Google's truth.
        snapshot.verdicts.removeAll {
            $0.jobID.hasPrefix(GooglePlayNotificationJob.jobIDPrefix) || $0.jobID.hasPrefix(playPendingJobIDPrefix)
                || $0.jobID.hasPrefix(GooglePlayNotificationJob.voidedJobIDPrefix)
                || $0.jobID.hasPrefix(GooglePlayNotificationJob.rereadJobIDPrefix)
        }
        if var family = notifications {
            let corrections = snapshot.verdicts.filter { $0.jobID.hasPrefix(CorrectionJob.jobIDPrefix) }
            snapshot.verdicts.removeAll { $0.jobID.hasPrefix(CorrectionJob.jobIDPrefix) }
            let ids = Set(corrections.compactMap { CorrectionJob.transactionID(ofJobID: $0.jobID) })
            // Without a simulator (the family then failed the run already) every correction is one Apple does not know.
            var truth: [String: ChaosTransactionTruth] = [:]
            if let simulator = simulatorBase { truth = await truths(of: ids, simulator: simulator) }
            // The owners the run knew before the lifecycle, else the ledger's: a subscription the receipt traffic
            // rejected as expired still holds its owner's claim, and a re-read may correct it (a later expiry).
            let subscriptions = ids.union(truth.values.map(\.originalTransactionID))
            var owners = ((try? await ledgerClaims(url: ledgerURL, transactionIDs: subscriptions)) ?? [:])
                .mapValues(\.accountID)
            owners.merge(family.owners) { _, known in known }
            family.violations += ChaosNotificationChecker.corrections(corrections, owners: owners, truth: truth)
            family.report.correctionVerdicts = corrections.count
            family.report.correctionJobs = Set(corrections.map(\.jobID)).count
            notifications = family
        }
        let ledgerView = try await readLedger(url: ledgerURL, traffic: traffic, verdicts: snapshot.verdicts)
        writeRecords(traffic: traffic, verdicts: snapshot.verdicts)
        // Messages the broker deleted before they settled are harness errors, not lost jobs: left out of the check.
        let checker = ChaosInvariantChecker(
            jobs: traffic.jobs.filter { !retention.deleted.jobs.contains($0.jobID) },
            malformedKeys: traffic.malformedKeys.subtracting(retention.deleted.deadLetters))
        let (found, counts) = checker.check(
            verdicts: snapshot.verdicts, deadLetters: snapshot.deadLetters, ledger: ledgerView)
        if configuration.entitlements {
            let truth = ChaosEntitlementTruth(
                jobs: traffic.jobs, claims: ledgerView.claims, verdicts: snapshot.verdicts, catalog: catalog)
            let entitlementViolations = await checkEntitlements(
                truth, skipping: (notifications?.touchedAccounts ?? []).union(playLifecycleAccounts))
            services.withLock { $0.violations += entitlementViolations }
        }
        var playReport: ChaosPlayReport?
        var playViolations: [ChaosViolation] = []
        if let play = playSimulator, !playPurchases.isEmpty {
            var checker = ChaosPlayChecker(
                jobs: traffic.jobs.filter {
                    playJobIDs.contains($0.jobID) && !retention.deleted.jobs.contains($0.jobID)
                },
                purchases: playPurchases)
            checker.lifecycleTokens = playLifecycleTokens
            let truths = await play.truths(tokens: playPurchases.map(\.token))
            var (playFound, report) = checker.check(verdicts: snapshot.verdicts, truths: truths)
            (report.requests, report.faultsInjected) = await play.stats()
            playReport = report
            playViolations = playFound
        }
        let (faults, runViolations) = services.withLock { ($0.faults, $0.violations) }
        var violations =
            runViolations + found + playViolations + (notifications?.violations ?? [])
            + (playLifecycle?.violations ?? [])
        if canary.hits > 0 {
            violations.append(.unexpectedAppleEndpoint("the URL bait listener (\(canary.hits) connections)"))
        }
        let appleRequests = await simulatorRequests()
        for endpoint in appleRequests.keys.sorted() where !Self.isConfiguredEndpoint(endpoint) {
            violations.append(.unexpectedAppleEndpoint(endpoint))
        }
        let keyLines = (try? String(contentsOf: serverAPIKeyFile, encoding: .utf8))?.split(separator: "\n")
            .filter { !$0.hasPrefix("-----") }.map(String.init)
        for finding in ChaosLogAudit.audit(
            directory: directory, secrets: [sharedSecret] + (keyLines ?? []) + playServiceAccountKeyLines)
        {
            violations.append(.leakInLog(finding.description))
        }
        var kinds: [String: Int] = [:]
        for violation in violations { kinds[violation.kind, default: 0] += 1 }
        return ChaosReport(
            jobs: traffic.jobs.count, messages: traffic.messages.count, malformed: traffic.malformedKeys.count,
            fuzz: configuration.fuzz, cases: traffic.cases, workers: configuration.workers,
            partitions: partitions, seed: configuration.seed,
            verdictsDelivered: counts.verdictsDelivered, jobsDecided: counts.jobsDecided,
            duplicatesDelivered: counts.duplicatesDelivered, redecided: counts.redecided,
            deadLetters: counts.deadLetters,
            grantedTransactions: counts.grantedTransactions, outcomes: counts.outcomes,
            faultsInjected: faults.filter { $0.detail?.hasPrefix("skipped") != true }.count, faults: faults,
            violations: violations.count, violationKinds: kinds,
            violationExamples: violations.prefix(25).map(\.description),
            appleRequests: appleRequests, elapsedSeconds: secondsSinceStart, workDirectory: directory.path,
            harnessErrors: harnessErrors.count,
            harnessErrorKinds: harnessErrors.reduce(into: [:]) { $0[$1.kind.rawValue, default: 0] += 1 },
            harnessErrorExamples: harnessErrors.prefix(25).map(\.description), plannedMegabytes: plannedBytes >> 20,
            windowKilobytes: window >> 10, largestJobPartitionKilobytes: deliveries.largestPartitionBytes >> 10,
            trimmedPartitions: trimmed, workerOffsetResets: workerOffsetResets(), notifications: notifications?.report,
            play: playReport, playLifecycle: playLifecycle?.report)
    }

    /// Lines in which a worker's librdkafka reset a fetch position because the broker no longer held the offset
    /// (`Offset out of range`): the broker deleted what a worker had not read yet (not necessarily unsettled: a
    /// redelivery of settled jobs after a restart ends the same way).
    /// The run's reader of verdicts and dead letters (group `<run>-reader`), and the producer that submits its
    /// messages (client `<run>-<producerRole>`, with the frontend's message size limit).
    func readerAndProducer(
        bootstrap: String, tally: ChaosTally, offsets: ChaosOffsetTracker, producerRole: String
    ) throws -> (TrafficReader, KafkaProducer) {
        let reader = try TrafficReader.chaos(
            bootstrap: bootstrap, groupID: "\(runID)-reader", tally: tally, offsets: offsets, logger: quietLogger)
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(
                bootstrapServers: bootstrap, clientID: "\(runID)-\(producerRole)",
                messageMaxBytes: Self.frontendMessageMaxBytes),
            logger: quietLogger)
        return (reader, producer)
    }

    private func workerOffsetResets() -> Int {
        (0..<configuration.workers).reduce(0) { total, index in
            let text = (try? String(contentsOf: workerLog(index), encoding: .utf8)) ?? ""
            return total + text.components(separatedBy: "Offset out of range").count - 1
        }
    }

    /// Writes the workers' catalog (``ChaosApp/catalog``), starts the dev broker, the simulator process on
    /// `simulatorState`, the ledger and every worker, and waits until each worker is ready. Returns the bootstrap
    /// servers and the ledger's URL.
    func startCluster(
        _ simulatorState: ChaosSimulatorState, catalog: Catalog = ChaosApp.catalog
    ) async throws -> (bootstrap: String, ledgerURL: String) {
        let catalogFile = directory.appendingPathComponent("catalog.json")
        try JSONEncoder().encode(catalog).write(to: catalogFile)
        let bootstrap = try await startBroker()
        let simulatorURL = try await startSimulator(
            stateDirectory: simulatorState.stateDirectory, secretFile: simulatorState.secretFile)
        let ledgerURL = try await startLedger()
        if configuration.notifications {
            try writeServerAPIKey()
            try writeRefundPolicy()
        }
        let workerEnvironment = makeWorkerEnvironment(
            bootstrap: bootstrap, simulatorURL: simulatorURL, ledgerURL: ledgerURL, catalogFile: catalogFile,
            stateDirectory: simulatorState.stateDirectory, secretFile: simulatorState.secretFile)
        for index in 0..<configuration.workers {
            try startWorker(index, environment: workerEnvironment)
        }
        for index in 0..<configuration.workers where !(await waitForReady(index, within: .seconds(90))) {
            let tail = (try? String(contentsOf: workerLog(index), encoding: .utf8))?.suffix(400) ?? ""
            throw ChaosError("worker \(index) was not ready within 90 s (log: \(workerLog(index).path)): \(tail)")
        }
        if configuration.entitlements {
            try startEntitlements(bootstrap: bootstrap, catalogFile: catalogFile)
            guard await waitForEntitlementsReady(within: .seconds(90)) else {
                throw ChaosError("the entitlement service was not ready within 90 s (log: \(log("entitlements").path))")
            }
        }
        return (bootstrap, ledgerURL)
    }

    /// Ends a run's traffic: saves the workers' metrics for the audit (no secret or receipt may be in a label),
    /// drains every worker with SIGTERM (itself checked), then reads what is still in flight (redeliveries) until the
    /// reader has every verdict and dead-letter partition's high watermark (bounded), not for a guessed time, and
    /// closes the reader. Returns the watermarks it read.
    func stopAndReadToEnd(
        reader: TrafficReader, offsets: ChaosOffsetTracker, producer: KafkaProducer, partitions: Int
    ) async -> (jobs: [Int32: KafkaWatermarks], read: [KafkaTopicPartition: KafkaWatermarks]) {
        await saveMetrics()
        await stopWorkersGracefully()
        let marks = await watermarks(producer: producer, partitions: partitions)
        await offsets.waitUntilRead(marks.read, within: .seconds(30))
        await reader.close()
        return marks
    }

    /// What the harness's producers may send: the corpus's size-limit messages reach 1,048,589 bytes, over
    /// librdkafka's default `message.max.bytes` (the mock broker has no limit of its own).
    static let frontendMessageMaxBytes = 4_000_000

    /// How long the workers' commits may take to reach every partition's end once everything settled: they commit
    /// every 200 ms, so this only absorbs a rebalance or a slow machine.
    static let commitCatchUp = Duration.seconds(30)

    /// Once every message settled: waits (bounded by ``commitCatchUp``) until the workers' group has committed every
    /// partition of `receipt-jobs` up to its end, and returns a violation for each partition that never got there. A
    /// partition stalled behind an output that was never delivered, or delivered and never committed, shows here even
    /// when the verdicts all arrived.
    func uncommittedPartitions(
        bootstrap: String, producer: KafkaProducer, partitions: Int
    ) async -> [ChaosViolation] {
        let all = (0..<Int32(partitions)).map { KafkaTopicPartition(topic: Topics.jobs, partition: $0) }
        let probe: KafkaConsumer
        do {
            // Not subscribed: it only reads the group's committed offsets, never joins it.
            probe = try KafkaConsumer(
                configuration: KafkaConsumerConfiguration(bootstrapServers: bootstrap, groupID: "\(runID)-workers"),
                logger: quietLogger)
        } catch {
            return [.runFailed("could not read the workers' committed offsets: \(error)")]
        }
        let deadline = clock.now.advanced(by: Self.commitCatchUp)
        var lagging: [ChaosViolation] = [.runFailed("the workers' committed offsets could not be read")]
        while clock.now < deadline {
            var ends: [Int32: Int64] = [:]
            for partition in all {
                if let marks = try? await producer.watermarks(topic: Topics.jobs, partition: partition.partition) {
                    ends[partition.partition] = marks.high
                }
            }
            if ends.count == partitions, let answer = try? await probe.committedOffsets(for: all) {
                var committed: [Int32: Int64?] = [:]
                for (partition, offset) in answer { committed[partition.partition] = offset }
                lagging = ChaosInvariantChecker.uncommittedPartitions(committed: committed, ends: ends)
                if lagging.isEmpty { break }
            }
            try? await Task.sleep(for: .milliseconds(250))
        }
        await probe.close()
        return lagging
    }

    /// The watermarks of every partition of the three topics (those that answered).
    func watermarks(
        producer: KafkaProducer, partitions: Int
    ) async -> (jobs: [Int32: KafkaWatermarks], read: [KafkaTopicPartition: KafkaWatermarks]) {
        var jobs: [Int32: KafkaWatermarks] = [:]
        var read: [KafkaTopicPartition: KafkaWatermarks] = [:]
        for partition in 0..<Int32(partitions) {
            if let marks = try? await producer.watermarks(topic: Topics.jobs, partition: partition) {
                jobs[partition] = marks
            }
            for topic in [Topics.verdicts, Topics.deadLetters] {
                if let marks = try? await producer.watermarks(topic: topic, partition: partition) {
                    read[KafkaTopicPartition(topic: topic, partition: partition)] = marks
                }
            }
        }
        return (jobs, read)
    }

    /// The mock broker keeps 5 MiB per partition; a run plans at most 20 MiB of traffic per partition (the window
    /// keeps what is unsettled far smaller), between 12 and 64 partitions.
    static func partitions(forPlannedBytes bytes: Int) -> Int {
        min(64, max(12, (bytes + (20 << 20) - 1) / (20 << 20)))
    }

    /// Unsettled bytes allowed per partition on average: a tenth of what the mock broker keeps.
    static let windowBytesPerPartition = 512 << 10

    /// Each message's job id (nil for a non-job) and key, as the worker will decode it.
    static func identities(_ traffic: ChaosTraffic) -> [ChaosSubmitter.Identity] {
        let codec = MessageCodec()
        return traffic.messages.map { message in
            ChaosSubmitter.Identity(
                jobID: (try? codec.decodeJob(message.value))?.jobID,
                key: String(decoding: message.key, as: UTF8.self))
        }
    }

    let partitionCount = Mutex(12)

    /// Violations the services recorded (drains that failed).
    var serviceViolations: [ChaosViolation] { services.withLock { $0.violations } }

    /// `jobs.jsonl` (id, account, category, grantable transaction) and `verdicts.jsonl` (every delivery) in the work
    /// directory, for looking into a violation. Neither holds a receipt.
    private func writeRecords(traffic: ChaosTraffic, verdicts: [Verdict]) {
        var jobs = ""
        for job in traffic.jobs {
            let object: [String: String] = [
                "job_id": job.jobID, "account_id": job.accountID, "category": job.category,
                "grantable": job.grantableTransactionID ?? "",
            ]
            if let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) {
                jobs += String(decoding: data, as: UTF8.self) + "\n"
            }
        }
        try? Data(jobs.utf8).write(to: directory.appendingPathComponent("jobs.jsonl"))
        let codec = MessageCodec()
        let lines = verdicts.map { String(decoding: codec.encode($0), as: UTF8.self) }.joined(separator: "\n")
        try? Data(lines.utf8).write(to: directory.appendingPathComponent("verdicts.jsonl"))
    }

    /// The simulator's request counts per endpoint (`GET /sim/stats`).
    func simulatorRequests() async -> [String: Int] {
        guard let base = simulatorBase, let data = await ChaosHTTP.get("\(base)/sim/stats"),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let requests = object["requests"] as? [String: Any]
        else { return [:] }
        return requests.compactMapValues { ($0 as? NSNumber)?.intValue }
    }

    /// The endpoints a worker may call: verifyReceipt and the App Store Server API, production and sandbox (and the
    /// harness's own `sim/*` calls).
    static func isConfiguredEndpoint(_ endpoint: String) -> Bool {
        let path = endpoint.hasPrefix("sandbox/") ? String(endpoint.dropFirst("sandbox/".count)) : endpoint
        return path == "verifyReceipt" || path.hasPrefix("inApps/") || endpoint.hasPrefix("sim/")
    }

    /// For each number of submitted messages, how many settlements (job ids decided + malformed keys dead-lettered)
    /// they amount to: repeated job ids count once.
    static func settledCounts(_ traffic: ChaosTraffic) -> [Int] {
        var counts = [0]
        var seen = Set<String>()
        let codec = MessageCodec()
        for message in traffic.messages {
            let identity =
                (try? codec.decodeJob(message.value)).map { "job:" + $0.jobID }
                ?? "dead-letter:" + String(decoding: message.key, as: UTF8.self)
            seen.insert(identity)
            counts.append(seen.count)
        }
        return counts
    }

    private var stepLength: Duration { configuration.faultHold + .seconds(2) }

    /// The harness's own Kafka clients: a broker taken down on purpose makes librdkafka log connection errors.
    var quietLogger: Logger {
        var logger = configuration.logger
        logger.logLevel = .critical
        return logger
    }

    // MARK: Services

    func log(_ name: String) -> URL { directory.appendingPathComponent("\(name).log") }
    func workerLog(_ index: Int) -> URL { log("worker-\(index)") }

    func startBroker() async throws -> String {
        let broker = try ChildProcess(
            name: "dev-broker", executable: configuration.binary.path,
            arguments: [
                "dev-broker", "--brokers", "\(configuration.brokers)", "--partitions",
                "\(partitionCount.withLock { $0 })",
            ],
            logFile: log("dev-broker"), readsLines: true, opensStdin: true, exitsWithParent: true)
        services.withLock { $0.broker = broker }
        guard let line = await broker.waitForLine(timeout: .seconds(60), where: { $0.hasPrefix("bootstrap=") }) else {
            throw ChaosError("dev-broker did not print bootstrap= within 60 s (log: \(log("dev-broker").path))")
        }
        return String(line.dropFirst("bootstrap=".count))
    }

    func startSimulator(stateDirectory: URL, secretFile: URL) async throws -> String {
        let simulator = try ChildProcess(
            name: "apple-sim", executable: configuration.binary.path,
            arguments: [
                "apple-sim", "--port", "0", "--state-dir", stateDirectory.path, "--shared-secret-file",
                secretFile.path,
            ] + (configuration.notifications ? ["--notification-time-scale", "\(Self.notificationTimeScale)"] : []),
            logFile: log("apple-sim"), readsLines: true, exitsWithParent: true)
        services.withLock { $0.simulator = simulator }
        guard let line = await simulator.waitForLine(timeout: .seconds(120), where: { $0.hasPrefix("listening=") })
        else {
            throw ChaosError("apple-sim did not print listening= within 120 s (log: \(log("apple-sim").path))")
        }
        return String(line.dropFirst("listening=".count))
    }

    /// Where the Play simulator writes the service-account key file the workers read.
    var playServiceAccountFile: URL { directory.appendingPathComponent("play-service-account.json") }

    /// The Play simulator's HTTP API, once it was started.
    var playSimulator: ChaosPlaySimulator? {
        services.withLock { $0.playSimulator }?.lines.first { $0.hasPrefix("listening=") }
            .map { ChaosPlaySimulator(base: String($0.dropFirst("listening=".count))) }
    }

    /// Starts the Play simulator process (its clock at real time: no purchase nears Google's three days to be
    /// acknowledged), which writes the service-account key file the workers read.
    func startPlaySimulator() async throws -> ChaosPlaySimulator {
        let simulator = try ChildProcess(
            name: "play-sim", executable: configuration.binary.path,
            arguments: ["play-sim", "--port", "0", "--service-account-file", playServiceAccountFile.path],
            logFile: log("play-sim"), readsLines: true, exitsWithParent: true)
        services.withLock { $0.playSimulator = simulator }
        guard await simulator.waitForLine(timeout: .seconds(120), where: { $0.hasPrefix("listening=") }) != nil,
            let play = playSimulator
        else {
            throw ChaosError("play-sim did not print listening= within 120 s (log: \(log("play-sim").path))")
        }
        return play
    }

    /// The lines of the Play service account's private key (the log audit looks for them).
    var playServiceAccountKeyLines: [String] {
        guard let data = try? Data(contentsOf: playServiceAccountFile),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let key = object["private_key"] as? String
        else { return [] }
        return key.split(separator: "\n").filter { !$0.hasPrefix("-----") && !$0.isEmpty }.map(String.init)
    }

    /// Waits, at most `limit`, until every purchase of `tokens` had its acknowledge or consume call.
    func waitForPlayFollowUps(_ play: ChaosPlaySimulator, tokens: Set<String>, within limit: Duration) async {
        let deadline = clock.now.advanced(by: limit)
        var waiting = tokens
        while !waiting.isEmpty, clock.now < deadline {
            let truths = await play.truths(tokens: waiting.sorted())
            waiting = waiting.filter { token in
                guard let truth = truths[token] else { return true }
                return truth.acknowledgeCalls + truth.consumeCalls == 0
            }
            if waiting.isEmpty { break }
            try? await Task.sleep(for: .milliseconds(500))
        }
        logger.info(
            "chaos: Google Play follow-ups", metadata: [LogKeys.chaosSettled: "\(tokens.count - waiting.count)"])
    }

    func startLedger() async throws -> String {
        if let url = configuration.ledgerURL { return url }
        guard let script = postgresScript else {
            throw ChaosError(
                "no --ledger-url and scripts/test-postgres.sh not found: give --ledger-url postgres://… or --pg-script")
        }
        let state = directory.appendingPathComponent("pg-state")
        let output = try await runScript(script, ["start"], state: state)
        services.withLock { $0.postgresState = state }
        guard let url = output.split(separator: "\n").last.map(String.init), url.hasPrefix("postgres") else {
            throw ChaosError("test-postgres.sh start printed no URL")
        }
        return url
    }

    private var postgresScript: URL? {
        if let script = configuration.postgresScript { return script }
        var directory = configuration.binary.deletingLastPathComponent()
        for _ in 0..<5 {
            let candidate = directory.appendingPathComponent("scripts/test-postgres.sh")
            if FileManager.default.fileExists(atPath: candidate.path) { return candidate }
            directory.deleteLastPathComponent()
        }
        let local = URL(fileURLWithPath: "scripts/test-postgres.sh")
        return FileManager.default.fileExists(atPath: local.path) ? local : nil
    }

    /// Runs `test-postgres.sh` with this run's private state file; returns its stdout (and stderr, in one file).
    @discardableResult
    private func runScript(_ script: URL, _ arguments: [String], state: URL) async throws -> String {
        var environment = ProcessInfo.processInfo.environment
        environment["VERIFY_PG_STATE"] = state.path
        let output = directory.appendingPathComponent("pg-\(arguments.joined(separator: "-")).out")
        let process = try ChildProcess(
            name: "test-postgres", executable: "/bin/bash", arguments: [script.path] + arguments,
            environment: environment, logFile: output)
        // The script takes seconds (`initdb`, a server start); a stop may wait for a slow shutdown.
        let exit = await process.waitForExit(timeout: .seconds(300))
        let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        guard exit == .exited(0) else {
            if exit == nil { await process.stop() }
            throw ChaosError("test-postgres.sh \(arguments.joined(separator: " ")) failed: \(text.suffix(300))")
        }
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func makeWorkerEnvironment(
        bootstrap: String, simulatorURL: String, ledgerURL: String, catalogFile: URL, stateDirectory: URL,
        secretFile: URL
    ) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("VERIFY_") }
        let settings: [String: String] = [
            "VERIFY_BROKERS": bootstrap,
            "VERIFY_GROUP_ID": "\(runID)-workers",
            "VERIFY_LEDGER_URL": ledgerURL,
            "VERIFY_CATALOG_FILE": catalogFile.path,
            "VERIFY_TRUST_ANCHORS": [
                stateDirectory.appendingPathComponent("pki-rsa-root.pem").path,
                stateDirectory.appendingPathComponent("pki-ec-root.pem").path,
            ].joined(separator: ","),
            "VERIFY_ALLOW_SANDBOX": configuration.allowSandbox ? "true" : "false",
            "VERIFY_VERIFY_RECEIPT_PRODUCTION_URL": "\(simulatorURL)/verifyReceipt",
            "VERIFY_VERIFY_RECEIPT_SANDBOX_URL": "\(simulatorURL)/sandbox/verifyReceipt",
            "VERIFY_SERVER_API_PRODUCTION_URL": simulatorURL,
            "VERIFY_SERVER_API_SANDBOX_URL": "\(simulatorURL)/sandbox",
            "VERIFY_SHARED_SECRET_FILE": secretFile.path,
            "VERIFY_DRAIN_TIMEOUT_S": "\(configuration.drainTimeoutSeconds)",
            "VERIFY_APPLE_REQUEST_TIMEOUT_MS": "2000",
            "VERIFY_JOB_DEADLINE_S": "\(configuration.jobDeadlineSeconds)",
            "VERIFY_METRICS_HOST": "127.0.0.1",
            "VERIFY_LOG_FORMAT": "json",
            "VERIFY_LOG_LEVEL": configuration.workerLogLevel,
        ]
        environment.merge(settings) { _, new in new }
        if configuration.notifications {
            // The notification family: Finish Transaction and consumption answers on, through a Server API key of
            // the run's own (the simulator accepts any P-256 key).
            environment.merge([
                "VERIFY_SERVER_API_KEY_FILE": serverAPIKeyFile.path, "VERIFY_SERVER_API_KEY_ID": "CHAOSKEY",
                "VERIFY_SERVER_API_ISSUER_ID": "chaos-issuer", "VERIFY_FINISH_TRANSACTIONS": "true",
                "VERIFY_CONSUMPTION_ANSWERS": "true", "VERIFY_CONSUMPTION_CUSTOMER_CONSENTED": "true",
                "VERIFY_REFUND_POLICY_FILE": refundPolicyFile.path,
                // A killed worker's claimed calls are taken over within the run, not after production's 5 minutes.
                "VERIFY_FOLLOW_UP_CLAIM_LEASE_S": "15", "VERIFY_FOLLOW_UP_SWEEP_INTERVAL_S": "2",
            ]) { _, new in new }
        }
        if let play = playSimulator {
            environment.merge([
                "VERIFY_GOOGLE_PLAY_API_URL": play.base, "VERIFY_GOOGLE_PLAY_TOKEN_URL": "\(play.base)/token",
                // A killed worker's claimed acknowledgements are taken over within the run.
                "VERIFY_FOLLOW_UP_CLAIM_LEASE_S": "15", "VERIFY_FOLLOW_UP_SWEEP_INTERVAL_S": "2",
            ]) { _, new in new }
            // The Play lifecycle's refund reviews are answered.
            if configuration.notifications { environment["VERIFY_GOOGLE_PLAY_REFUND_REVIEW_ANSWERS"] = "true" }
        }
        if let properties = configuration.workerKafkaProperties { environment["VERIFY_KAFKA_PROPERTIES"] = properties }
        return environment
    }

    /// Starts worker `index`; `remember` keeps `base` as the environment ``restartWorker(_:)`` uses.
    func startWorker(_ index: Int, environment base: [String: String], remember: Bool = true) throws {
        let port = services.withLock { services -> Int in
            while services.metricsPorts.count <= index { services.metricsPorts.append(chaosFreePort()) }
            return services.metricsPorts[index]
        }
        var environment = base
        environment["VERIFY_METRICS_PORT"] = "\(port)"
        environment["VERIFY_WORKER_ID"] = "\(runID)-worker-\(index)"
        let worker = try ChildProcess(
            name: "worker-\(index)", executable: configuration.binary.path, arguments: ["run"],
            environment: environment,
            logFile: workerLog(index), exitsWithParent: true)
        services.withLock { services in
            while services.workers.count <= index { services.workers.append(nil) }
            services.workers[index] = worker
        }
        if remember { workerEnvironment.withLock { $0 = base } }
    }

    /// SIGTERM to worker `index`, then waits for its drain; a drain that fails is a violation. Returns a note when
    /// it did not exit 0.
    private func terminate(_ index: Int) async -> String? {
        guard let process = worker(index) else { return nil }
        process.signal(SIGTERM)
        let limit = Duration.seconds(configuration.drainTimeoutSeconds + 15)
        let exit = await process.waitForExit(timeout: limit)
        guard exit != .exited(0) else { return nil }
        let detail = exit.map { "\($0)" } ?? "still running after \(limit)"
        services.withLock { $0.violations.append(.drainFailed(worker: index, detail: detail)) }
        if exit == nil { process.signal(SIGKILL) }
        return detail
    }

    let workerEnvironment = Mutex<[String: String]>([:])

    /// Adds faults a family injected outside the schedule to the run's record.
    func record(faults: [ChaosFaultRecord]) { services.withLock { $0.faults += faults } }

    func restartWorker(_ index: Int) throws {
        try startWorker(index, environment: workerEnvironment.withLock { $0 })
    }

    /// Polls the worker's `/readyz` until it answers 200; false when the time runs out or the worker exits.
    func waitForReady(_ index: Int, within limit: Duration) async -> Bool {
        let port = services.withLock { $0.metricsPorts[index] }
        let deadline = clock.now.advanced(by: limit)
        while clock.now < deadline {
            if await ChaosHTTP.status("http://127.0.0.1:\(port)/readyz") == 200 { return true }
            if worker(index)?.exit != nil { return false }
            try? await Task.sleep(for: .milliseconds(100))
        }
        return false
    }

    func worker(_ index: Int) -> ChildProcess? { services.withLock { $0.workers[index] } }

    // MARK: Entitlement service

    static let entitlementsToken = "chaos-entitlements-token-0123456789"

    private let entitlementsEnvironment = Mutex<[String: String]>([:])

    func startEntitlements(bootstrap: String, catalogFile: URL) throws {
        let tokens = directory.appendingPathComponent("entitlement-tokens")
        try "chaos:\(Self.entitlementsToken)\n".write(to: tokens, atomically: true, encoding: .utf8)
        let port = chaosFreePort()
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("VERIFY_") }
        environment.merge([
            "VERIFY_BROKERS": bootstrap, "VERIFY_ENTITLEMENTS_GROUP_ID": "\(runID)-entitlements",
            "VERIFY_ENTITLEMENTS_STORE_URL": "sqlite:" + directory.appendingPathComponent("entitlements.sqlite").path,
            "VERIFY_CATALOG_FILE": catalogFile.path, "VERIFY_ENTITLEMENTS_TOKENS_FILE": tokens.path,
            "VERIFY_ENTITLEMENTS_PORT": "\(port)", "VERIFY_ENTITLEMENTS_HOST": "127.0.0.1",
            "VERIFY_ENTITLEMENTS_EVENTS_TOPIC": "", "VERIFY_LOG_FORMAT": "json",
            "VERIFY_LOG_LEVEL": configuration.workerLogLevel,
            // A generous per-token limit: the end of the run asks about every account at once.
            "VERIFY_ENTITLEMENTS_RATE_LIMIT": "100000", "VERIFY_ENTITLEMENTS_RATE_BURST": "100000",
        ]) { _, new in new }
        if let properties = configuration.workerKafkaProperties { environment["VERIFY_KAFKA_PROPERTIES"] = properties }
        entitlementsEnvironment.withLock { $0 = environment }
        services.withLock { $0.entitlementsPort = port }
        try restartEntitlements()
    }

    func restartEntitlements() throws {
        let process = try ChildProcess(
            name: "entitlements", executable: configuration.binary.path, arguments: ["entitlements"],
            environment: entitlementsEnvironment.withLock { $0 }, logFile: log("entitlements"), exitsWithParent: true)
        services.withLock { $0.entitlements = process }
    }

    func waitForEntitlementsReady(within limit: Duration) async -> Bool {
        guard let port = services.withLock({ $0.entitlementsPort }) else { return false }
        let deadline = clock.now.advanced(by: limit)
        while clock.now < deadline {
            if await ChaosHTTP.status("http://127.0.0.1:\(port)/readyz") == 200 { return true }
            if services.withLock({ $0.entitlements })?.exit != nil { return false }
            try? await Task.sleep(for: .milliseconds(100))
        }
        return false
    }

    /// Waits until the entitlement service has read every verdict in the topic (its positions in its store reach the
    /// high watermarks), then compares every account of the run with the truth.
    /// Accounts in `skipping` are left out: their purchases went through lifecycle events the truth does not model.
    func checkEntitlements(_ truth: ChaosEntitlementTruth, skipping: Set<String> = []) async -> [ChaosViolation] {
        guard let port = services.withLock({ $0.entitlementsPort }) else {
            return [.runFailed("no entitlement service")]
        }
        let bootstrap = entitlementsEnvironment.withLock { $0["VERIFY_BROKERS"] } ?? ""
        let partitions = partitionCount.withLock { $0 }
        var ends: [Int32: Int64] = [:]
        if let producer = try? KafkaProducer(
            configuration: KafkaProducerConfiguration(
                bootstrapServers: bootstrap, clientID: "\(runID)-entitlements-check"),
            logger: quietLogger)
        {
            for partition in 0..<Int32(partitions) {
                if let marks = try? await producer.watermarks(topic: Topics.verdicts, partition: partition) {
                    ends[partition] = marks.high
                }
            }
            await producer.shutdown(timeout: .seconds(2))
        }
        var storeLogger = quietLogger
        storeLogger.logLevel = .critical
        guard
            let store = try? SQLiteEntitlementStore(
                path: directory.appendingPathComponent("entitlements.sqlite").path, logger: storeLogger)
        else { return [.runFailed("the entitlement store could not be opened")] }
        defer { Task { await store.close() } }
        let deadline = clock.now.advanced(by: configuration.settleTimeout)
        var caughtUp = false
        while clock.now < deadline {
            let positions = (try? await store.progress().positions) ?? []
            let reached = Dictionary(positions.map { ($0.partition, $0.nextOffset) }) { max($0, $1) }
            if ends.count == partitions, ends.allSatisfy({ reached[$0.key, default: 0] >= $0.value }) {
                caughtUp = true
                break
            }
            try? await Task.sleep(for: .milliseconds(200))
        }
        guard caughtUp else {
            return [
                .runFailed("the entitlement service did not read every verdict within \(configuration.settleTimeout)")
            ]
        }
        logger.info(
            "chaos: entitlement service caught up; comparing accounts",
            metadata: [LogKeys.chaosAccounts: "\(truth.accounts.count)"])
        var violations: [ChaosViolation] = []
        for account in truth.accounts.keys.sorted() where !skipping.contains(account) {
            let encoded = account.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? account
            let reply = await ChaosHTTP.getAuthorized(
                "http://127.0.0.1:\(port)/v1/accounts/\(encoded)/entitlements", token: Self.entitlementsToken)
            var active: Set<String> = []
            var consumables: [String: Int] = [:]
            switch reply?.status {
            case 200?:
                let json = (try? JSONSerialization.jsonObject(with: Data(reply?.body ?? []))) as? [String: Any] ?? [:]
                for entitlement in json["entitlements"] as? [[String: Any]] ?? []
                where entitlement["active"] as? Bool == true {
                    if let id = entitlement["id"] as? String { active.insert(id) }
                }
                for consumable in json["consumables"] as? [[String: Any]] ?? [] {
                    if let product = consumable["product_id"] as? String {
                        consumables[product] = consumable["count"] as? Int ?? 0
                    }
                }
            case 404?:
                break  // No verdict named the account: it must have nothing.
            default:
                violations.append(.entitlementMismatch(account: account, detail: "no answer (\(reply?.status ?? 0))"))
                continue
            }
            if let difference = truth.differences(account: account, active: active, consumables: consumables) {
                violations.append(.entitlementMismatch(account: account, detail: difference))
            }
        }
        if let process = services.withLock({ $0.entitlements }), process.exit == nil {
            process.signal(SIGTERM)
            if await process.waitForExit(timeout: .seconds(40)) != .exited(0) {
                violations.append(.runFailed("the entitlement service did not exit 0 on SIGTERM"))
                process.signal(SIGKILL)
            }
        }
        return violations
    }

    // MARK: Faults

    enum Fault: String, CaseIterable, CustomStringConvertible {
        case killWorker = "kill_worker"
        case sigtermWorker = "sigterm_worker"
        case brokerDown = "broker_down"
        case brokerErrors = "broker_errors"
        case postgresOutage = "postgres_outage"
        case apple21005 = "apple_21005"
        case apple503 = "apple_503"
        case appleTimeouts = "apple_timeouts"
        case killEntitlements = "kill_entitlements"
        /// Google Play storms through the Play simulator's fault plans: every API call throttled (429 with
        /// Retry-After), failing with 500 and 503, or access tokens expiring while the token endpoint is down.
        case play429 = "play_429"
        case play5xx = "play_5xx"
        case playTokenEndpointDown = "play_token_endpoint_down"
        /// A worker restarted with a wrong shared secret beside healthy ones, then restarted right: no purchase may
        /// be recorded as a non-grant because of the worker's own configuration.
        case wrongSharedSecret = "wrong_shared_secret"

        var description: String { rawValue }

        var isPlay: Bool { self == .play429 || self == .play5xx || self == .playTokenEndpointDown }
    }

    /// Every fault once, in a seeded order; with a duration, cycles until it has passed (estimated per step).
    private func faultSchedule() -> [Fault] {
        guard configuration.faults else { return [] }
        var random = SplitMix64(seed: configuration.seed ^ 0xFA17)
        let kinds = Fault.allCases.filter {
            (configuration.onlyFaults?.contains($0.rawValue) ?? true)
                && ($0 != .killEntitlements || configuration.entitlements)
                && (!$0.isPlay || configuration.playShare > 0)
        }
        guard !kinds.isEmpty else { return [] }
        var schedule = kinds.shuffled(using: &random)
        if let duration = configuration.duration {
            let perCycle = Self.seconds(stepLength) * Double(kinds.count) * 2
            let cycles = max(1, Int((Self.seconds(duration) / perCycle).rounded(.up)))
            for _ in 1..<cycles { schedule += kinds.shuffled(using: &random) }
        }
        return schedule
    }

    /// Injects one fault, holds it, clears it; returns its record (recovery is measured by the caller).
    private func inject(_ fault: Fault, index: Int) async -> ChaosFaultRecord {
        let at = secondsSinceStart
        let hold = configuration.faultHold
        var random = SplitMix64(seed: configuration.seed &+ UInt64(index) &* 0x9E37)
        let victim = Int(random.next() % UInt64(max(1, configuration.workers)))
        var target: String?
        var detail: String?
        let simulatorURL = simulatorBase
        logger.info("chaos: injecting", metadata: [LogKeys.chaosFault: "\(fault)"])
        let injected = clock.now
        switch fault {
        case .killWorker:
            target = "worker-\(victim)"
            worker(victim)?.signal(SIGKILL)
            _ = await worker(victim)?.waitForExit(timeout: .seconds(10))
            try? await Task.sleep(for: hold)
            do {
                try restartWorker(victim)
                if !(await waitForReady(victim, within: .seconds(60))) { detail = "restarted worker not ready in 60 s" }
            } catch {
                detail = "restart failed: \(error)"
            }
        case .killEntitlements:
            target = "entitlements"
            services.withLock { $0.entitlements }?.signal(SIGKILL)
            _ = await services.withLock { $0.entitlements }?.waitForExit(timeout: .seconds(10))
            try? await Task.sleep(for: hold)
            do {
                try restartEntitlements()
                if !(await waitForEntitlementsReady(within: .seconds(60))) {
                    detail = "restarted entitlement service not ready in 60 s"
                }
            } catch {
                detail = "restart failed: \(error)"
            }
        case .sigtermWorker:
            target = "worker-\(victim)"
            detail = await terminate(victim)
            do {
                try restartWorker(victim)
                _ = await waitForReady(victim, within: .seconds(60))
            } catch {
                detail = (detail ?? "") + "; restart failed: \(error)"
            }
        case .wrongSharedSecret:
            target = "worker-\(victim)"
            var notes = [await terminate(victim)].compactMap { $0 }
            do {
                var environment = workerEnvironment.withLock { $0 }
                let wrongSecret = URL(
                    fileURLWithPath: (environment["VERIFY_SHARED_SECRET_FILE"] ?? "/tmp/shared_secret") + ".wrong")
                try Data("not-the-app-secret".utf8).write(to: wrongSecret)
                environment["VERIFY_SHARED_SECRET_FILE"] = wrongSecret.path
                try startWorker(victim, environment: environment, remember: false)
                try? await Task.sleep(for: hold)
                let port = services.withLock { $0.metricsPorts[victim] }
                if let body = await ChaosHTTP.get("http://127.0.0.1:\(port)/readyz"),
                    String(decoding: body, as: UTF8.self).contains("apple_shared_secret_rejected")
                {
                    notes.append("the misconfigured worker reported apple_shared_secret_rejected")
                }
                notes.append(contentsOf: [await terminate(victim)].compactMap { $0 })
                try restartWorker(victim)
                _ = await waitForReady(victim, within: .seconds(60))
            } catch {
                notes.append("restart failed: \(error)")
            }
            detail = notes.joined(separator: "; ")
        case .brokerDown:
            let broker = 1 + Int(random.next() % UInt64(max(1, configuration.brokers)))
            target = "broker-\(broker)"
            await control("down \(broker)")
            try? await Task.sleep(for: hold)
            await control("up \(broker)")
        case .brokerErrors:
            // Produce, fetch and offset-commit requests fail a few times with retriable errors.
            target = "produce,fetch,offset_commit"
            await control("errors 0 8 7")
            await control("errors 1 8 6")
            await control("errors 8 4 7")
            try? await Task.sleep(for: hold)
            for api in [0, 1, 8] { await control("clear-errors \(api)") }
        case .postgresOutage:
            if let script = postgresScript, let state = services.withLock({ $0.postgresState }) {
                do {
                    try await runScript(script, ["pause"], state: state)
                    try? await Task.sleep(for: hold)
                    try await runScript(script, ["resume"], state: state)
                } catch {
                    detail = "\(error)"
                }
            } else {
                detail = "skipped: the ledger was given with --ledger-url"
            }
        case .play429, .play5xx, .playTokenEndpointDown:
            let seconds = Int(Self.seconds(hold).rounded(.up))
            if let play = playSimulator, let plan = ChaosPlaySimulator.faultPlan(fault, seconds: seconds) {
                target = "google_play"
                if !(await play.setFaults(plan)) { detail = "POST /sim/faults refused the plan" }
                try? await Task.sleep(for: hold)
                await play.setFaults("{}")
            } else {
                detail = "skipped: no Play simulator"
            }
        case .apple21005, .apple503, .appleTimeouts:
            let ratio = min(1, max(0, configuration.appleFaultRatio))
            let plan =
                switch fault {
                case .apple21005: "{\"status_21005_ratio\": \(ratio)}"
                case .apple503: "{\"http_503_ratio\": \(ratio)}"
                default: "{\"timeout_ratio\": \(min(0.5, ratio)), \"timeout_hold_ms\": 4000}"
                }
            target = "ratio \(ratio)"
            if let simulatorURL {
                if !(await ChaosHTTP.post("\(simulatorURL)/sim/faults", json: plan)) {
                    detail = "POST /sim/faults failed"
                }
                try? await Task.sleep(for: hold)
                await ChaosHTTP.post("\(simulatorURL)/sim/faults", json: "{}")
            }
        }
        return ChaosFaultRecord(
            kind: fault.rawValue, target: target, atSeconds: at,
            heldSeconds: Self.seconds(injected.duration(to: clock.now)), recoverySeconds: nil, detail: detail)
    }

    var simulatorBase: String? {
        services.withLock { $0.simulator }?.lines.first { $0.hasPrefix("listening=") }
            .map { String($0.dropFirst("listening=".count)) }
    }

    /// One dev-broker control line; waits for its reply.
    private func control(_ command: String) async {
        guard let broker = services.withLock({ $0.broker }) else { return }
        let before = broker.lines.count
        broker.send(line: command)
        let reply = await broker.waitForLine(timeout: .seconds(10), after: before) {
            $0.hasPrefix("ok") || $0.hasPrefix("error")
        }
        if let reply, reply.hasPrefix("error") {
            logger.warning("chaos: dev-broker refused a command", metadata: [LogKeys.chaosCommand: "\(command)"])
        }
    }

    // MARK: End

    /// Each worker's `/metrics` text, as `metrics-worker-N.log` (audited with the logs).
    func saveMetrics() async {
        let ports = services.withLock { $0.metricsPorts }
        for (index, port) in ports.enumerated() {
            guard let data = await ChaosHTTP.get("http://127.0.0.1:\(port)/metrics") else { continue }
            try? data.write(to: log("metrics-worker-\(index)"))
        }
    }

    /// SIGTERM to every worker; each must exit 0 within the drain timeout.
    func stopWorkersGracefully() async {
        let workers = services.withLock { $0.workers }
        await withTaskGroup(of: Void.self) { group in
            for (index, worker) in workers.enumerated() {
                guard let worker, worker.exit == nil else { continue }
                group.addTask {
                    worker.signal(SIGTERM)
                    let limit = Duration.seconds(self.configuration.drainTimeoutSeconds + 15)
                    let exit = await worker.waitForExit(timeout: limit)
                    if exit != .exited(0) {
                        self.services.withLock {
                            $0.violations.append(
                                .drainFailed(worker: index, detail: exit.map { "\($0) at the end" } ?? "still running"))
                        }
                        worker.signal(SIGKILL)
                    }
                }
            }
        }
    }

    /// The ledger's record of every job and the claims on every transaction the run cares about.
    /// Runs `body` with the run's ledger at `url`, its log quiet but for errors: the harness reads the ledger often,
    /// and the workers' logs are the ones that tell the run's story.
    func withRunLedger<T: Sendable>(url: String, _ body: @Sendable (any Ledger) async throws -> T) async throws -> T {
        var logger = configuration.logger
        logger.logLevel = .error
        return try await LedgerFactory.withLedger(url: url, logger: logger, body)
    }

    private func readLedger(url: String, traffic: ChaosTraffic, verdicts: [Verdict]) async throws -> ChaosLedgerView {
        var transactions: [String: Set<String>] = [:]
        for job in traffic.jobs where job.category != "fuzz_job" {
            transactions[job.jobID] = Set([job.grantableTransactionID].compactMap { $0 })
        }
        for verdict in verdicts where verdict.outcome == .granted || transactions[verdict.jobID] != nil {
            transactions[verdict.jobID, default: []].formUnion(verdict.transactions.map(\.transactionID))
        }
        let queries = transactions
        return try await withRunLedger(url: url) { ledger in
            try await withThrowingTaskGroup(of: LedgerSnapshot?.self) { group in
                var view = ChaosLedgerView()
                var pending = queries.makeIterator()
                func addNext(_ group: inout ThrowingTaskGroup<LedgerSnapshot?, any Error>) -> Bool {
                    guard let (jobID, ids) = pending.next() else { return false }
                    group.addTask {
                        try await ledger.snapshot(
                            jobID: jobID, transactionIDs: ids.sorted(), originalTransactionIDs: [])
                    }
                    return true
                }
                for _ in 0..<8 where !addNext(&group) { break }
                while let snapshot = try await group.next() {
                    if let snapshot {
                        if let prior = snapshot.priorVerdict { view.recordedVerdicts[prior.jobID] = prior }
                        for claim in snapshot.claims {
                            view.claims[claim.transactionID] = ChaosClaim(
                                transactionID: claim.transactionID, accountID: claim.accountID,
                                grantedJobID: claim.grantedJobID)
                        }
                    }
                    _ = addNext(&group)
                }
                return view
            }
        }
    }

    /// Stops everything that is still running and the private PostgreSQL.
    func tearDown() async {
        let (broker, simulator, workers, postgres) = services.withLock {
            ($0.broker, $0.simulator, $0.workers, $0.postgresState)
        }
        for worker in workers.compactMap({ $0 }) where worker.exit == nil { worker.signal(SIGKILL) }
        killNotificationServices()
        if let entitlements = services.withLock({ $0.entitlements }), entitlements.exit == nil {
            entitlements.signal(SIGKILL)
        }
        await simulator?.stop()
        await services.withLock({ $0.playSimulator })?.stop()
        await broker?.stop()
        if let postgres, let script = postgresScript { _ = try? await runScript(script, ["stop"], state: postgres) }
    }
}

/// Produces the traffic, slice by slice, keeping at most `windowBytes` of it unsettled (flow control: the mock broker
/// deletes the oldest batches of a partition past 5 MiB, so nothing may wait for a worker behind that much newer data).
struct ChaosSubmitter: Sendable {
    /// What settles a message: a verdict for its job id, or (not a job) a dead letter with its key.
    struct Identity: Sendable {
        var jobID: String?
        var key: String
    }

    let producer: KafkaProducer
    let traffic: ChaosTraffic
    let identities: [Identity]
    let tally: ChaosTally
    let deliveries: ChaosDeliveryLog
    let windowBytes: Int
    /// How long one message may wait for room. After the first wait that runs out, the window is off for the rest of
    /// the run (one stall costs this once, not once per message) and the stall is a harness error: what the broker
    /// deleted meanwhile is reported by the retention check.
    let stallTimeout: Duration
    let stalls = ChaosCounter()
    /// Sends of a message whose delivery stays unproven: a frontend sends again after `deliveryUnproven`, a bounded
    /// number of times.
    static let attempts = 10

    /// The messages cut into `count` consecutive ranges.
    func slices(_ count: Int) -> [Range<Int>] {
        let total = traffic.messages.count
        let size = max(1, (total + max(1, count) - 1) / max(1, count))
        return stride(from: 0, to: max(total, 1), by: size).map { $0..<min(total, $0 + size) }
    }

    /// Produces one range and waits for every delivery report: one account's messages of a burst in order, each
    /// after the previous one's report (``ChaosTraffic/chains(_:)``); every message waits for room in the window.
    func submit(_ range: Range<Int>) async throws {
        let (traffic, identities, tally, deliveries, stalls) = (traffic, identities, tally, deliveries, stalls)
        let (windowBytes, stallTimeout) = (windowBytes, stallTimeout)
        let submitter = JobSubmitter(producer: producer, attempts: Self.attempts)
        try await submitter.submit(chains: traffic.chains(range), spread: .windowed) {
            index in
            let message = traffic.messages[index]
            let identity = identities[index]
            let bytes = message.value.count + message.key.count
            if stalls.value == 0,
                !(await tally.waitForRoom(limit: max(0, windowBytes - bytes), within: stallTimeout))
            {
                stalls.increment()
            }
            tally.submitting(jobID: identity.jobID, deadLetterKey: identity.key, bytes: bytes)
            return (message.key, message.value)
        } delivered: { index, report in
            let identity = identities[index]
            let message = traffic.messages[index]
            deliveries.delivered(
                ChaosDeliveryLog.Entry(
                    jobID: identity.jobID, deadLetterKey: identity.key, partition: report.topicPartition.partition,
                    offset: report.offset),
                bytes: message.value.count + message.key.count)
        }
    }
}

extension TrafficReader {
    /// The harness's reader of verdicts and dead letters, in a group of its own: each record goes to `tally`, each
    /// offset to `offsets`.
    static func chaos(
        bootstrap: String, groupID: String, tally: ChaosTally, offsets: ChaosOffsetTracker, logger: Logger
    ) throws -> TrafficReader {
        var quiet = logger
        quiet.logLevel = .critical
        return try TrafficReader(bootstrapServers: bootstrap, groupID: groupID, deadLetters: true, logger: quiet) {
            record, partition, offset in
            offsets.read(partition, offset: offset)
            switch record {
            case .verdict(let verdict, _): tally.received(verdict: verdict)
            case .unreadableVerdict: tally.unreadable()
            case .deadLetter(let key, let reason): tally.received(deadLetterKey: key, reason: reason)
            }
        }
    }
}

extension ChaosOffsetTracker {
    /// Waits until the reader has read up to every partition's high watermark, at most `limit`.
    func waitUntilRead(_ watermarks: [KafkaTopicPartition: KafkaWatermarks], within limit: Duration) async {
        let deadline = ContinuousClock.now.advanced(by: limit)
        while ContinuousClock.now < deadline {
            let next = self.next
            if watermarks.allSatisfy({ $0.value.high <= (next[$0.key] ?? 0) || $0.value.high == $0.value.low }) {
                return
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
    }
}

/// The Apple simulator's state for a run: its state directory and shared secret (written to a file for the
/// simulator and worker processes), and an in-process simulator minting into that state before the simulator
/// process starts, so the process loads the same PKI and journal of minted transactions.
struct ChaosSimulatorState {
    let stateDirectory: URL
    let sharedSecret: String
    let secretFile: URL
    let minting: AppleSimulator

    init(directory: URL, secretPrefix: String, runID: String) throws {
        stateDirectory = directory.appendingPathComponent("sim", isDirectory: true)
        sharedSecret = "\(secretPrefix)-\(runID)-\(UInt64.random(in: 0...UInt64.max))"
        secretFile = directory.appendingPathComponent("shared_secret")
        try Data(sharedSecret.utf8).write(to: secretFile)
        var simulatorConfiguration = AppleSimulatorConfiguration()
        simulatorConfiguration.stateDirectory = stateDirectory
        simulatorConfiguration.sharedSecret = sharedSecret
        simulatorConfiguration.logger.logLevel = .critical
        minting = try AppleSimulator(configuration: simulatorConfiguration)
    }
}
