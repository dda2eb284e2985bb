import AppleClients
import AppleSimulator
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

/// `verify-worker bench notifications`: a burst of App Store Server Notifications V2 POSTed to a
/// running gateway (`POST /apple/notifications`) and decided by workers, all in this process over one mock cluster,
/// the simulator and a SQLite ledger. The notifications are the simulator's own, signed by its chain, about
/// subscriptions granted through jobs first, so the workers do ledger work and never call Apple.
package enum NotificationBurstBenchmark {
    package struct Options: Sendable {
        package var notifications = 10_000
        package var workers = 1
        /// Requests the bench keeps in flight at the gateway (Apple's own sender is concurrent too).
        package var httpConcurrency = 32
        package var partitions = 4
        /// The most notification bytes posted and not yet decided (0: no bound). librdkafka's mock cluster keeps
        /// only about 5 MB per partition: a backlog larger than that is deleted before the worker reads it (the jobs
        /// are lost to the bench, not to a real broker). Notification jobs are keyed by purchase, so they spread over
        /// the partitions, but a 3 MiB window stays under one partition's bound whatever the spread.
        package var windowBytes = 3 << 20
        /// How long the run may go without a new verdict before it ends and reports the rest undecided.
        package var stallLimit: Duration = .seconds(60)
        /// Drain mode: every notification is POSTed and accepted while no worker runs, then the workers start on the
        /// full topic and the figure is theirs alone (the gateway idle meanwhile, as in `bench pipeline` (b)). The
        /// whole burst must fit the mock's ~5 MB per partition: about one partition per 2,000 kB of notifications.
        package var drain = false

        package init() {}
    }

    /// The figures `bench notifications` prints (snake_case JSON).
    package struct Result: Codable, Sendable {
        package var notifications: Int
        /// Subscriptions minted and granted before the burst; each gets up to ten lifecycle notifications.
        package var subscriptions: Int
        /// Notifications by `notificationType` (and `subtype`).
        package var types: [String: Int]
        package var workers: Int
        package var partitions: Int
        package var httpConcurrency: Int
        package var windowBytes: Int
        /// The mean `{"signedPayload": …}` body (three JWS, each with its certificate chain).
        package var meanBodyBytes: Int
        /// First POST to the last answer, and answers with 200 over it.
        package var acceptSeconds: Double
        package var acceptedPerSecond: Double
        /// Answers by HTTP status (every one 200 in a good run).
        package var httpStatuses: [String: Int]
        /// First POST to the last verdict read, and notifications decided over it.
        package var decidedSeconds: Double
        package var decidedPerSecond: Double
        /// `decided_per_second / workers`. Notification jobs are keyed by purchase (original transaction), so they
        /// spread over the partitions and the workers' lanes.
        package var decidedPerSecondPerWorker: Double
        /// Drain mode: from the workers' assignment on the full topic to the last verdict, and the rate over it
        /// (total and per worker); nil in burst mode.
        package var drainSeconds: Double?
        package var drainedPerSecond: Double?
        package var drainedPerSecondPerWorker: Double?
        /// Notifications without a verdict (must be 0) and with more than one (redeliveries; 0 in a calm run).
        package var undecided: Int
        package var duplicated: Int
        /// Verdicts by `outcome` or `outcome/reason`.
        package var outcomes: [String: Int]
        /// Requests the simulator answered outside `/sim/` over the whole run (0: nothing was asked of Apple).
        package var appleCalls: Int
        /// From a notification's POST to its verdict read by the bench.
        package var latencyP50Ms: Double
        package var latencyP99Ms: Double
        /// Minting, granting and collecting the notifications (not part of the measure).
        package var setupSeconds: Double
        package var cores: Int
        /// The 1-minute load average at the end (other processes share the machine).
        package var loadAverage1m: Double?
    }

    /// Keeps the bodies the simulator would have POSTed, so the bench can send them in one burst at its own pace.
    final class CapturingTransport: NotificationTransport {
        let bodies = Mutex<[[UInt8]]>([])
        func post(url: String, body: [UInt8]) async -> NotificationAttemptResult {
            bodies.withLock { $0.append(body) }
            return .success
        }
    }

    /// One captured notification, as the bench sends it.
    struct Notification: Sendable {
        var body: [UInt8]
        var jobID: String
        var type: String
        var signedDate: Int64
    }

    static let subscriptionProduct = "com.example.verifyworker.monthly"

    package static func run(_ options: Options, progress: @Sendable (String) -> Void) async throws -> Result {
        var logger = Logger(label: "bench.notifications")
        logger.logLevel = .critical
        let clock = ContinuousClock()
        let setupStart = clock.now
        let cluster = try MockKafkaCluster(brokers: 1)
        for topic in [Topics.jobs, Topics.verdicts, Topics.deadLetters, Topics.control] {
            try cluster.createTopic(topic, partitions: options.partitions)
        }
        let transport = CapturingTransport()
        var configuration = AppleSimulatorConfiguration()
        configuration.logger.logLevel = .critical
        configuration.notificationTransport = transport
        let simulator = try AppleSimulator(configuration: configuration)
        let files = try DemoFiles(simulator: simulator)
        defer { files.remove() }
        // The demo's catalog sells no subscription: the burst is about one.
        var products = Array(DemoApp.catalog.products.values)
        products.append(.init(id: subscriptionProduct, type: .autoRenewable))
        let catalog = Catalog(bundleIDs: [DemoApp.bundleID], products: products)
        try JSONEncoder().encode(catalog).write(to: files.catalog)
        let verdicts = try VerdictClock(bootstrap: cluster.bootstrapServers, logger: logger)
        var gatewayConfiguration = GatewayConfiguration(
            host: "127.0.0.1", port: 0, brokers: cluster.bootstrapServers, jobsTopic: Topics.jobs,
            operations: .init(host: "127.0.0.1", port: 0), authentication: .disabled,
            trustAnchorFiles: files.anchors.map(\.path))
        gatewayConfiguration.drainTimeoutSeconds = 2
        let gateway = try ReceiptGateway(configuration: gatewayConfiguration, logger: logger)

        // The simulator, the verdict reader and the gateway are the run's services, stopped in reverse order once
        // the body returns; the workers are `verify-worker run`'s runtimes, each its own group, started and stopped
        // by the body (the drain starts them only after the burst).
        return try await HarnessServices.run(
            [
                SimulatorService(simulator), TaskService { try await verdicts.run() },
                TaskService { try await gateway.run(handlingSignals: false) },
            ], logger: logger
        ) {
            let port = try await simulator.waitUntilReady()
            let granters = try startWorkers(
                options, bootstrap: cluster.bootstrapServers, port: port, files: files,
                appAppleId: configuration.appAppleId, logger: logger)
            var workers = granters
            defer { for worker in workers { worker.task.cancel() } }
            try await poll("partitions assigned", limit: .seconds(60)) {
                granters.map(\.health.assignedPartitions).reduce(0, +) == options.partitions
                    && verdicts.consumer.assignment.count == options.partitions
            }

            guard let gatewayPort = await gateway.waitUntilListening() else {
                throw BenchmarkFailure("the gateway did not start listening")
            }

            let subscriptions = (options.notifications + 9) / 10
            progress("granting \(subscriptions) subscriptions through jobs")
            let originals = try await grant(
                subscriptions, simulator: simulator, bootstrap: cluster.bootstrapServers, verdicts: verdicts,
                logger: logger)
            progress("collecting \(options.notifications) notifications from the simulator")
            let notifications = try await collect(
                options.notifications, originals: originals, simulator: simulator, transport: transport)
            let setupSeconds = (clock.now - setupStart).seconds

            let meanBodyBytes = notifications.map(\.body.count).reduce(0, +) / max(1, notifications.count)
            if options.drain {
                // No worker while the gateway accepts: they drain the full topic afterwards.
                let totalKB = notifications.map(\.body.count).reduce(0, +) / 1_000
                guard totalKB <= options.partitions * 2_000 else {
                    throw BenchmarkFailure(
                        "--drain: \(totalKB) kB of notifications need at least \(totalKB / 2_000 + 1) partitions "
                            + "(the mock cluster keeps about 5 MB per partition)")
                }
                for worker in workers { worker.stop.resolve(()) }
                for worker in workers { _ = try? await worker.task.value }
                workers = []
            }
            progress("posting \(notifications.count) notifications, \(options.httpConcurrency) at a time")
            let window =
                options.windowBytes > 0 && !options.drain
                ? max(1, options.windowBytes / max(1, meanBodyBytes)) : Int.max
            let burst = try await post(
                notifications, url: "http://127.0.0.1:\(gatewayPort)/apple/notifications",
                concurrency: options.httpConcurrency, window: window, verdicts: verdicts)
            var drainStart: ContinuousClock.Instant?
            if options.drain {
                progress("starting \(options.workers) workers on the full topic")
                let drainers = try startWorkers(
                    options, bootstrap: cluster.bootstrapServers, port: port, files: files,
                    appAppleId: configuration.appAppleId, logger: logger)
                workers = drainers
                try await poll("partitions assigned to the drain's workers", limit: .seconds(60)) {
                    drainers.map(\.health.assignedPartitions).reduce(0, +) == options.partitions
                }
                drainStart = clock.now
            }
            let expected = Set(notifications.map(\.jobID))
            var lastCount = -1
            var lastProgress = clock.now
            while true {
                let count = verdicts.decidedCount(of: expected)
                if count == expected.count { break }
                if count != lastCount {
                    lastCount = count
                    lastProgress = clock.now
                } else if clock.now - lastProgress > options.stallLimit {
                    progress("no verdict for \(options.stallLimit): \(expected.count - count) undecided")
                    break
                }
                try await Task.sleep(for: .milliseconds(20))
            }

            let decided = verdicts.snapshot(of: expected)
            let lastVerdict = decided.values.map(\.first).max() ?? burst.start
            let decidedSeconds = (lastVerdict - burst.start).seconds
            var latencies = notifications.indices.compactMap { index -> Double? in
                guard let read = decided[notifications[index].jobID]?.first else { return nil }
                return (read - burst.sent[index]).seconds * 1_000
            }
            latencies.sort()
            var outcomes: [String: Int] = [:]
            for verdict in decided.values { outcomes[verdict.label, default: 0] += 1 }
            var types: [String: Int] = [:]
            for notification in notifications { types[notification.type, default: 0] += 1 }
            let appleCalls = simulator.stats.snapshot().requests.filter { !$0.key.hasPrefix("sim/") }.values
                .reduce(0, +)
            let decidedPerSecond = decidedSeconds > 0 ? Double(decided.count) / decidedSeconds : 0
            let drainSeconds = drainStart.map { (lastVerdict - $0).seconds }
            let drainedPerSecond = drainSeconds.map { $0 > 0 ? Double(decided.count) / $0 : 0 }

            for worker in workers { worker.stop.resolve(()) }
            for worker in workers { _ = try? await worker.task.value }
            // Ends the reader's loop; the group then stops the gateway, the reader and the simulator.
            await verdicts.consumer.close()
            return Result(
                notifications: notifications.count, subscriptions: subscriptions, types: types,
                workers: options.workers, partitions: options.partitions, httpConcurrency: options.httpConcurrency,
                windowBytes: options.windowBytes, meanBodyBytes: meanBodyBytes, acceptSeconds: burst.seconds,
                acceptedPerSecond: burst.seconds > 0 ? Double(burst.statuses["200"] ?? 0) / burst.seconds : 0,
                httpStatuses: burst.statuses, decidedSeconds: decidedSeconds, decidedPerSecond: decidedPerSecond,
                decidedPerSecondPerWorker: decidedPerSecond / Double(max(1, options.workers)),
                drainSeconds: drainSeconds, drainedPerSecond: drainedPerSecond,
                drainedPerSecondPerWorker: drainedPerSecond.map { $0 / Double(max(1, options.workers)) },
                undecided: expected.count - decided.count,
                duplicated: decided.values.filter { $0.count > 1 }.count, outcomes: outcomes,
                appleCalls: appleCalls,
                latencyP50Ms: percentile(latencies, 0.50), latencyP99Ms: percentile(latencies, 0.99),
                setupSeconds: setupSeconds, cores: ProcessInfo.processInfo.activeProcessorCount,
                loadAverage1m: PipelineBenchmark.loadAverage())
        }
    }

    struct Worker: Sendable {
        let task: Task<WorkerRuntime.Exit, any Error>
        let stop: OneShot<Void>
        let health: WorkerHealth
    }

    /// `verify-worker run`'s runtime, `workers` times in this process (one consumer group).
    static func startWorkers(
        _ options: Options, bootstrap: String, port: Int, files: DemoFiles, appAppleId: Int64, logger: Logger
    ) throws -> [Worker] {
        try (0..<options.workers).map { index in
            let configuration = try DemoRun.workerConfiguration(
                index: index, bootstrap: bootstrap, port: port, files: files, jobDeadline: .seconds(120),
                extra: ["apple_app_apple_id": String(appAppleId)])
            let runtime = WorkerRuntime(configuration: configuration, logger: logger, serveOperations: false)
            let stop = OneShot<Void>()
            let health = WorkerHealth()
            let task = Task { try await runtime.run(health: health) { _ = await stop.wait() } }
            return Worker(task: task, stop: stop, health: health)
        }
    }

    /// Mints `count` monthly subscriptions (no notification yet: the simulator has no target) and grants each to
    /// an account of its own through a job; returns their original transaction ids.
    static func grant(
        _ count: Int, simulator: AppleSimulator, bootstrap: String, verdicts: VerdictClock, logger: Logger
    ) async throws -> [String] {
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(bootstrapServers: bootstrap, clientID: "bench-frontend"),
            logger: logger)
        let expires = Int64(Date().timeIntervalSince1970 * 1_000) + 30 * 86_400_000
        var jobs: [ReceiptJob] = []
        var originals: [String] = []
        for index in 0..<count {
            let minted = try simulator.mint(
                MintRequest(
                    bundleId: DemoApp.bundleID, productId: subscriptionProduct, format: .signedTransaction,
                    environment: .production, expiresDateMs: expires))
            originals.append(minted.transaction.originalTransactionId)
            jobs.append(
                ReceiptJob(
                    jobID: "bench-grant-\(index)", accountID: "bench-account-\(index)",
                    proof: .signedTransaction(minted.receipt), bundleID: DemoApp.bundleID, submittedAt: Date()))
        }
        let codec = MessageCodec()
        let allJobs = jobs
        // Each grant a chain of its own (one job per account). Delivery reports come back in batches: 32 sends in
        // flight keep the setup short.
        try await JobSubmitter(producer: producer).submit(
            chains: allJobs.indices.map { [$0] }, spread: JobSubmitter.Spread(lanes: 32, chunk: 1)
        ) { index in
            (allJobs[index].messageKey, codec.encode(allJobs[index]))
        }
        await producer.shutdown()
        let grants = Set(jobs.map(\.jobID))
        try await poll("verdicts of \(count) grants", limit: .seconds(300)) {
            verdicts.decidedCount(of: grants) == grants.count
        }
        let granted = verdicts.snapshot(of: grants).values.filter { $0.label == "granted" }.count
        guard granted == count else { throw BenchmarkFailure("\(granted) of \(count) subscriptions were granted") }
        return originals
    }

    /// Ten lifecycle events per subscription, round by round, so Apple's order within a subscription holds; the
    /// simulator signs each as it sends it. Returns the first `count` notifications, ordered by `signedDate`.
    static func collect(
        _ count: Int, originals: [String], simulator: AppleSimulator, transport: CapturingTransport
    ) async throws -> [Notification] {
        try simulator.setNotificationTarget("http://127.0.0.1:9/bench-notifications")
        var latest = Dictionary(uniqueKeysWithValues: originals.map { ($0, $0) })
        let rounds: [(String) throws -> Void] = [
            { latest[$0] = try simulator.renew(originalTransactionId: $0).transactionId },
            { _ = try simulator.priceIncrease(originalTransactionId: $0, accepted: false) },
            { _ = try simulator.priceIncrease(originalTransactionId: $0, accepted: true) },
            { _ = try simulator.extend(originalTransactionId: $0, days: 7) },
            { _ = try simulator.requestConsumption(transactionId: latest[$0] ?? $0) },
            { _ = try simulator.declineRefund(transactionId: latest[$0] ?? $0) },
            { _ = try simulator.refund(transactionId: latest[$0] ?? $0) },
            { _ = try simulator.reverseRefund(transactionId: latest[$0] ?? $0) },
            // Auto-renew off now (DID_CHANGE_RENEWAL_STATUS): the period runs on, so its EXPIRED would come at its end.
            { _ = try simulator.expire(originalTransactionId: $0) },
            { latest[$0] = try simulator.renew(originalTransactionId: $0).transactionId },
        ]
        for (round, event) in rounds.enumerated() {
            for (index, original) in originals.enumerated() where index * rounds.count + round < count {
                try event(original)
            }
        }
        try await poll("\(count) notifications sent", limit: .seconds(120)) {
            transport.bodies.withLock { $0.count } >= count
        }
        let notifications = try transport.bodies.withLock { $0 }.map(notification(from:))
        return notifications.enumerated().sorted {
            ($0.element.signedDate, $0.offset) < ($1.element.signedDate, $1.offset)
        }.map(\.element)
    }

    /// Reads the captured body's payload for the job id the gateway will give it, its type and its date.
    static func notification(from body: [UInt8]) throws -> Notification {
        struct Body: Decodable { var signedPayload: String }
        struct Payload: Decodable {
            var notificationType: String
            var subtype: String?
            var notificationUUID: String
            var signedDate: Int64
        }
        let signed = try JSONDecoder().decode(Body.self, from: Data(body)).signedPayload
        let parts = signed.split(separator: ".")
        guard parts.count == 3, let json = Base64URL.decode(parts[1]) else {
            throw BenchmarkFailure("the simulator sent a notification that is not a compact JWS")
        }
        let payload = try JSONDecoder().decode(Payload.self, from: json)
        return Notification(
            body: body, jobID: NotificationJob.jobIDPrefix + payload.notificationUUID,
            type: payload.notificationType + (payload.subtype.map { "/" + $0 } ?? ""),
            signedDate: payload.signedDate)
    }

    struct Burst {
        var start: ContinuousClock.Instant
        /// When each notification's POST began, by index.
        var sent: [ContinuousClock.Instant]
        var seconds: Double
        var statuses: [String: Int]
    }

    /// POSTs every notification, `concurrency` at a time, as Apple does: `{"signedPayload": …}`, no token; never more
    /// than `window` of them undecided.
    static func post(
        _ notifications: [Notification], url: String, concurrency: Int, window: Int, verdicts: VerdictClock
    ) async throws -> Burst {
        let engine = try CurlHTTPEngine()
        defer { engine.shutdown() }
        let clock = ContinuousClock()
        let start = clock.now
        let record = BurstRecord(start: start, count: notifications.count)
        await withTaskGroup(of: Void.self) { posts in
            for _ in 0..<max(1, concurrency) {
                posts.addTask {
                    while true {
                        let index = record.next.take()
                        guard index < notifications.count else { return }
                        while index - verdicts.notificationsDecided >= window {
                            try? await Task.sleep(for: .milliseconds(2))
                        }
                        let began = clock.now
                        record.sent.withLock { $0[index] = began }
                        let status: String
                        do {
                            let response = try await engine.postJSON(
                                url, body: notifications[index].body, timeout: .seconds(30))
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
