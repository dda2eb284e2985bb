import ArgumentParser
import Demo
import Foundation
import Gateway
import Kafka
import Logging
import Messages
import Operations
import StoreHTTP
import Synchronization
import Traffic
import Worker

/// The store-independent half of `bench notifications` (App Store) and `bench rtdn` (Google Play): the workers, the
/// grants made through jobs before the burst, the POSTs kept within a window of undecided bytes, the wait for the
/// verdicts and the figures read from them. Each store's benchmark brings its simulator, the notifications it
/// collects from it and the route they are POSTed to.
package enum NotificationBurst {
    /// What a burst is asked to do; `drain` is the App Store's and `minuteQuota` Google Play's alone.
    package struct Options: Sendable {
        package var notifications = 10_000
        package var workers = 1
        /// Requests the bench keeps in flight at the gateway (Apple's sender and Pub/Sub's pushes are concurrent too).
        package var httpConcurrency = 32
        package var partitions = 4
        /// The most notification bytes posted and not yet decided (0: no bound). librdkafka's mock cluster keeps
        /// only about 5 MB per partition: a backlog larger than that is deleted before the worker reads it (the jobs
        /// are lost to the bench, not to a real broker). Notification jobs are keyed by purchase, so they spread over
        /// the partitions, but a 3 MiB window stays under one partition's bound whatever the spread.
        package var windowBytes = 3 << 20
        /// How long the run may go without a new verdict before it ends and reports the rest undecided.
        package var stallLimit: Duration = .seconds(60)
        /// App Store drain mode: every notification is POSTed and accepted while no worker runs, then the workers
        /// start on the full topic and the figure is theirs alone (the gateway idle meanwhile, as in `bench
        /// pipeline` (b)). The whole burst must fit the mock's ~5 MB per partition: about one partition per 2,000 kB
        /// of notifications.
        package var drain = false
        /// Google Play: each worker's `google_play_minute_quota`. Lifted by default so that the figure is the path's:
        /// Google's default (3,000 a minute per bucket) bounds a worker to 50 reads a second per bucket.
        package var minuteQuota = 1_000_000

        package init() {}

        /// The checks both commands make of those flags.
        func validate() throws {
            guard notifications > 0, workers > 0, httpConcurrency > 0, partitions > 0, windowBytes >= 0 else {
                throw ValidationError("--notifications, --workers, --http-concurrency and --partitions must be above 0")
            }
        }
    }

    /// Where both commands say how far the run has come: a line on standard error (standard output is the JSON).
    static func printProgress(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    /// The figures `bench notifications` and `bench rtdn` print (snake_case JSON); a field one store does not
    /// measure is nil and left out.
    package struct Result: Codable, Sendable {
        package var notifications: Int
        /// App Store: subscriptions minted and granted before the burst, each with up to ten lifecycle notifications.
        /// Google Play: the purchases of `purchases` that are subscriptions (ten notifications each).
        package var subscriptions: Int
        /// Google Play: purchases minted and granted through `google_play` jobs before the burst, and those of them
        /// that are one-time products (two notifications each).
        package var purchases: Int?
        package var oneTimeProducts: Int?
        /// Notifications by type: the App Store's `notificationType` (and `/subtype`), Google Play's type
        /// (`SUBSCRIPTION_RENEWED`, `VOIDED_PURCHASE`, …).
        package var types: [String: Int]
        package var workers: Int
        package var partitions: Int
        package var httpConcurrency: Int
        /// Google Play: each worker's `google_play_minute_quota`.
        package var googlePlayMinuteQuota: Int?
        package var windowBytes: Int
        /// The mean body: the App Store's `{"signedPayload": …}` (three JWS, each with its certificate chain), or
        /// the Pub/Sub envelope with the base64 notification (the OIDC token is a header).
        package var meanBodyBytes: Int
        /// First POST to the last answer, and answers with 200 over it.
        package var acceptSeconds: Double
        package var acceptedPerSecond: Double
        /// Answers by HTTP status (every one 200 in a good run).
        package var httpStatuses: [String: Int]
        /// First POST to the last verdict read, and notifications decided over it (for Google Play the Developer
        /// API reads included: each notification job reads its purchase again).
        package var decidedSeconds: Double
        package var decidedPerSecond: Double
        /// `decided_per_second / workers`. Notification jobs are keyed by purchase, so they spread over the
        /// partitions and the workers' lanes.
        package var decidedPerSecondPerWorker: Double
        /// App Store drain mode: from the workers' assignment on the full topic to the last verdict, and the rate
        /// over it (total and per worker); nil in burst mode.
        package var drainSeconds: Double?
        package var drainedPerSecond: Double?
        package var drainedPerSecondPerWorker: Double?
        /// Notifications without a verdict (must be 0) and with more than one (redeliveries; 0 in a calm run).
        package var undecided: Int
        package var duplicated: Int
        /// Verdicts by `outcome` or `outcome/reason`.
        package var outcomes: [String: Int]
        /// App Store: requests the simulator answered outside `/sim/` over the whole run (0: nothing was asked of
        /// Apple).
        package var appleCalls: Int?
        /// Google Play: purchase reads (`subscriptionsv2.get`, `productsv2.getproductpurchasev2`) the simulator
        /// counted during the burst, per notification, and the most of one purchase. A purchase's notifications
        /// share one lane (their message key is the token), so each reads once: at most one read per notification.
        package var developerAPIReads: Int?
        package var readsPerNotification: Double?
        package var maxReadsPerPurchase: Int?
        /// From a notification's POST to its verdict read by the bench.
        package var latencyP50Ms: Double
        package var latencyP99Ms: Double
        /// Minting, granting and collecting the notifications (not part of the measure).
        package var setupSeconds: Double
        package var cores: Int
        /// The 1-minute load average at the end (other processes share the machine).
        package var loadAverage1m: Double?
    }

    struct Worker: Sendable {
        let task: Task<WorkerRuntime.Exit, any Error>
        let stop: OneShot<Void>
        let health: WorkerHealth
    }

    /// `verify-worker run`'s runtime, `count` times in this process (one consumer group), the `index`th worker with
    /// `configuration(index)`.
    static func startWorkers(
        _ count: Int, logger: Logger, configuration: (Int) throws -> WorkerConfiguration
    ) throws -> [Worker] {
        try (0..<count).map { index in
            let runtime = WorkerRuntime(configuration: try configuration(index), logger: logger, serveOperations: false)
            let stop = OneShot<Void>()
            let health = WorkerHealth()
            let task = Task { try await runtime.run(health: health) { _ = await stop.wait() } }
            return Worker(task: task, stop: stop, health: health)
        }
    }

    /// Waits until the workers hold every partition (and the verdict reader too, when given).
    static func awaitAssignment(
        of workers: [Worker], partitions: Int, reader: VerdictClock? = nil, what: String = "partitions assigned"
    ) async throws {
        try await poll(what, limit: .seconds(60)) {
            workers.map(\.health.assignedPartitions).reduce(0, +) == partitions
                && (reader.map { $0.consumer.assignment.count == partitions } ?? true)
        }
    }

    /// The port the gateway listens on, once it does.
    static func listeningPort(of gateway: ReceiptGateway) async throws -> Int {
        guard let port = await gateway.waitUntilListening() else {
            throw BenchmarkFailure("the gateway did not start listening")
        }
        return port
    }

    /// Asks each worker to stop and waits until it has.
    static func stop(_ workers: [Worker]) async {
        for worker in workers { worker.stop.resolve(()) }
        for worker in workers { _ = try? await worker.task.value }
    }

    /// Stops the workers, then the verdict reader's loop (its group then stops the gateway, the reader and the
    /// simulator).
    static func finish(_ workers: [Worker], verdicts: VerdictClock) async {
        await stop(workers)
        await verdicts.consumer.close()
    }

    /// Mints `count` purchases and grants each to an account of its own through a job (each a chain of its own),
    /// waits for the verdicts and fails unless every one is `granted` (`what` names the purchases in that failure);
    /// returns the purchases' ids. `mint(index)` mints one and makes its job.
    static func grant(
        _ count: Int, what: String, bootstrap: String, verdicts: VerdictClock, logger: Logger,
        mint: (Int) throws -> (job: ReceiptJob, purchase: String)
    ) async throws -> [String] {
        let minted = try (0..<count).map(mint)
        let jobs = minted.map(\.job)
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(bootstrapServers: bootstrap, clientID: "bench-frontend"),
            logger: logger)
        let codec = MessageCodec()
        // Delivery reports come back in batches: 32 sends in flight keep the setup short.
        try await JobSubmitter(producer: producer).submit(
            chains: jobs.indices.map { [$0] }, spread: JobSubmitter.Spread(lanes: 32, chunk: 1)
        ) { index in
            (jobs[index].messageKey, codec.encode(jobs[index]))
        }
        await producer.shutdown()
        let grants = Set(jobs.map(\.jobID))
        try await poll("verdicts of \(jobs.count) grants", limit: .seconds(300)) {
            verdicts.decidedCount(of: grants) == grants.count
        }
        let granted = verdicts.snapshot(of: grants).values.filter { $0.label == "granted" }.count
        guard granted == count else { throw BenchmarkFailure("\(granted) of \(count) \(what) were granted") }
        return minted.map(\.purchase)
    }

    /// One notification as the bench POSTs it: its body and the headers its sender adds to the JSON content type.
    struct Request: Sendable {
        var body: [UInt8]
        var headers: [(String, String)] = []
    }

    struct Burst {
        var start: ContinuousClock.Instant
        /// When each notification's POST began, by index.
        var sent: [ContinuousClock.Instant]
        var seconds: Double
        var statuses: [String: Int]
    }

    /// POSTs every request to `url`, `concurrency` at a time, never more than `window` of them undecided.
    static func post(
        _ requests: [Request], url: String, concurrency: Int, window: Int, verdicts: VerdictClock
    ) async throws -> Burst {
        let engine = try CurlHTTPEngine()
        defer { engine.shutdown() }
        let clock = ContinuousClock()
        let start = clock.now
        let record = BurstRecord(start: start, count: requests.count)
        await withTaskGroup(of: Void.self) { posts in
            for _ in 0..<max(1, concurrency) {
                posts.addTask {
                    while true {
                        let index = record.next.take()
                        guard index < requests.count else { return }
                        while index - verdicts.notificationsDecided >= window {
                            try? await Task.sleep(for: .milliseconds(2))
                        }
                        let request = requests[index]
                        record.sent.withLock { $0[index] = clock.now }
                        let status: String
                        do {
                            let response = try await engine.execute(
                                TransportRequest(
                                    method: .post, url: url,
                                    headers: [("Content-Type", "application/json")] + request.headers,
                                    body: request.body, timeout: .seconds(30)))
                            status = String(response.status)
                        } catch {
                            status = "transport_error"
                        }
                        record.statuses.withLock { $0[status, default: 0] += 1 }
                    }
                }
            }
        }
        return Burst(
            start: start, sent: record.sent.withLock { $0 }, seconds: (clock.now - start).seconds,
            statuses: record.statuses.withLock { $0 })
    }

    /// The window for `windowBytes` of requests of `meanBodyBytes` each (`Int.max` when 0: no bound).
    static func window(windowBytes: Int, meanBodyBytes: Int) -> Int {
        windowBytes > 0 ? max(1, windowBytes / max(1, meanBodyBytes)) : Int.max
    }

    /// Hands out indices to the tasks that share one list.
    final class Counter: Sendable {
        private let value = Atomic(0)
        func take() -> Int { value.add(1, ordering: .relaxed).oldValue }
    }

    /// What the posting tasks share: the next index, when each POST began, and the answers by status.
    final class BurstRecord: Sendable {
        let next = Counter()
        let sent: Mutex<[ContinuousClock.Instant]>
        let statuses = Mutex<[String: Int]>([:])
        init(start: ContinuousClock.Instant, count: Int) { sent = Mutex(Array(repeating: start, count: count)) }
    }

    /// Waits until every job of `expected` has a verdict, or none came for `stallLimit`.
    static func awaitVerdicts(
        _ expected: Set<String>, verdicts: VerdictClock, stallLimit: Duration, progress: (String) -> Void
    ) async throws {
        let clock = ContinuousClock()
        var lastCount = -1
        var lastProgress = clock.now
        while true {
            let count = verdicts.decidedCount(of: expected)
            if count == expected.count { return }
            if count != lastCount {
                lastCount = count
                lastProgress = clock.now
            } else if clock.now - lastProgress > stallLimit {
                progress("no verdict for \(stallLimit): \(expected.count - count) undecided")
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// The figures every store measures, read from the verdicts of the burst's notifications: `jobIDs[i]` of type
    /// `types[i]`, posted as `burst.sent[i]`. With `drainStart` (App Store drain mode), the drain's figures from the
    /// drain's workers' assignment on. The store's own figures are set by its benchmark.
    static func result(
        _ options: Options, jobIDs: [String], types: [String], subscriptions: Int, meanBodyBytes: Int,
        setupSeconds: Double, burst: Burst, drainStart: ContinuousClock.Instant? = nil, verdicts: VerdictClock
    ) -> Result {
        let expected = Set(jobIDs)
        let decided = verdicts.snapshot(of: expected)
        let lastVerdict = decided.values.map(\.first).max() ?? burst.start
        let decidedSeconds = (lastVerdict - burst.start).seconds
        var latencies = jobIDs.indices.compactMap { index -> Double? in
            guard let read = decided[jobIDs[index]]?.first else { return nil }
            return (read - burst.sent[index]).seconds * 1_000
        }
        latencies.sort()
        var outcomes: [String: Int] = [:]
        for verdict in decided.values { outcomes[verdict.label, default: 0] += 1 }
        var typeCounts: [String: Int] = [:]
        for type in types { typeCounts[type, default: 0] += 1 }
        let workers = Double(max(1, options.workers))
        let decidedPerSecond = decidedSeconds > 0 ? Double(decided.count) / decidedSeconds : 0
        let drainSeconds = drainStart.map { (lastVerdict - $0).seconds }
        let drainedPerSecond = drainSeconds.map { $0 > 0 ? Double(decided.count) / $0 : 0 }
        return Result(
            notifications: jobIDs.count, subscriptions: subscriptions, types: typeCounts, workers: options.workers,
            partitions: options.partitions, httpConcurrency: options.httpConcurrency,
            windowBytes: options.windowBytes, meanBodyBytes: meanBodyBytes, acceptSeconds: burst.seconds,
            acceptedPerSecond: burst.seconds > 0 ? Double(burst.statuses["200"] ?? 0) / burst.seconds : 0,
            httpStatuses: burst.statuses, decidedSeconds: decidedSeconds, decidedPerSecond: decidedPerSecond,
            decidedPerSecondPerWorker: decidedPerSecond / workers, drainSeconds: drainSeconds,
            drainedPerSecond: drainedPerSecond, drainedPerSecondPerWorker: drainedPerSecond.map { $0 / workers },
            undecided: expected.count - decided.count, duplicated: decided.values.filter { $0.count > 1 }.count,
            outcomes: outcomes, latencyP50Ms: percentile(latencies, 0.50), latencyP99Ms: percentile(latencies, 0.99),
            setupSeconds: setupSeconds, cores: ProcessInfo.processInfo.activeProcessorCount,
            loadAverage1m: PipelineBenchmark.loadAverage())
    }

    /// What every burst starts from: a logger that keeps quiet, a mock cluster of one broker with the burst's
    /// topics, and when the setup began.
    struct Setup {
        let logger: Logger
        let cluster: MockKafkaCluster
        let clock = ContinuousClock()
        let start: ContinuousClock.Instant

        init(label: String, partitions: Int) throws {
            var logger = Logger(label: label)
            logger.logLevel = .critical
            self.logger = logger
            start = ContinuousClock.now
            cluster = try MockKafkaCluster(brokers: 1)
            for topic in [Topics.jobs, Topics.verdicts, Topics.deadLetters, Topics.control] {
                try cluster.createTopic(topic, partitions: partitions)
            }
        }

        /// The gateway the burst is POSTed to: this cluster's jobs topic, no bearer token, the demo's trust anchors.
        func gatewayConfiguration(files: DemoFiles) -> GatewayConfiguration {
            var configuration = GatewayConfiguration(
                host: "127.0.0.1", port: 0, brokers: cluster.bootstrapServers, jobsTopic: Topics.jobs,
                operations: .init(host: "127.0.0.1", port: 0), authentication: .disabled,
                trustAnchorFiles: files.anchors.map(\.path))
            configuration.drainTimeoutSeconds = 2
            return configuration
        }
    }

    static func percentile(_ sorted: [Double], _ share: Double) -> Double {
        guard !sorted.isEmpty else { return 0 }
        let index = min(sorted.count - 1, Int((Double(sorted.count) * share).rounded(.up)) - 1)
        return (sorted[max(0, index)] * 10).rounded() / 10
    }

    static func poll(_ what: String, limit: Duration, _ condition: () throws -> Bool) async throws {
        let deadline = ContinuousClock.now.advanced(by: limit)
        while try !condition() {
            guard ContinuousClock.now < deadline else { throw BenchmarkFailure("timed out waiting for \(what)") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}

/// Reads the verdicts topic with a group of its own and keeps, per job, when each of its verdicts was read.
final class VerdictClock: Sendable {
    struct Decided: Sendable {
        var first: ContinuousClock.Instant
        var count: Int
        var label: String
    }

    let consumer: KafkaConsumer
    private let decided = Mutex<[String: Decided]>([:])
    private let notifications = Atomic(0)

    init(bootstrap: String, logger: Logger) throws {
        consumer = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(
                bootstrapServers: bootstrap, groupID: "bench-notification-verdicts",
                properties: ["fetch.wait.max.ms": "10", "fetch.error.backoff.ms": "10"]),
            logger: logger)
        try consumer.subscribe(topics: [Topics.verdicts])
    }

    func run() async throws {
        let codec = MessageCodec()
        for try await event in consumer.events {
            guard case .message(let message) = event, let verdict = try? codec.decodeVerdict(message.value ?? [])
            else { continue }
            let now = ContinuousClock.now
            let label = verdict.outcome.rawValue + (verdict.reason.map { "/" + $0.rawValue } ?? "")
            decided.withLock {
                if $0[verdict.jobID] == nil {
                    $0[verdict.jobID] = Decided(first: now, count: 1, label: label)
                    if verdict.jobID.hasPrefix(NotificationJob.jobIDPrefix)
                        || verdict.jobID.hasPrefix(GooglePlayNotificationJob.jobIDPrefix)
                    {
                        notifications.add(1, ordering: .relaxed)
                    }
                } else {
                    $0[verdict.jobID]?.count += 1
                }
            }
        }
    }

    /// Notification jobs (the App Store's and Google Play's) with a verdict so far.
    var notificationsDecided: Int { notifications.load(ordering: .relaxed) }

    func decidedCount(of jobIDs: Set<String>) -> Int {
        decided.withLock { all in jobIDs.reduce(0) { $0 + (all[$1] == nil ? 0 : 1) } }
    }

    func snapshot(of jobIDs: Set<String>) -> [String: Decided] {
        decided.withLock { $0.filter { jobIDs.contains($0.key) } }
    }
}
