import AppleSimulator
import Demo
import Foundation
import Gateway
import Kafka
import Logging
import Messages
import Operations
import PlaySimulator
import StoreHTTP
import Synchronization
import Traffic
import Worker

/// `verify-worker bench rtdn`: a burst of Google Play Real-time developer notifications, Pub/Sub pushes POSTed to a
/// running gateway (`POST /google-play/notifications`, its OIDC token checked against the Play simulator's JWK set)
/// and decided by workers that read each purchase again from the simulator (0 ms latency), all in this process over
/// one mock cluster and a SQLite ledger. The pushes are the simulator's own (envelope and OIDC token, made by its
/// lifecycle events), captured at its push transport and POSTed by the bench at its own pace: the figure is the
/// gateway's and the workers', not the simulator's push loop.
package enum RTDNBurstBenchmark {
    package struct Options: Sendable {
        package var notifications = 10_000
        package var workers = 1
        /// Requests the bench keeps in flight at the gateway (Pub/Sub pushes concurrently too).
        package var httpConcurrency = 32
        package var partitions = 4
        /// Each worker's `google_play_minute_quota`. Lifted by default so that the figure is the path's: Google's
        /// default (3,000 a minute per bucket) bounds a worker to 50 reads a second per bucket.
        package var minuteQuota = 1_000_000
        /// The most push bytes posted and not yet decided (0: no bound). librdkafka's mock cluster keeps only about
        /// 5 MB per partition: a larger backlog is deleted before the worker reads it (lost to the bench, not to a
        /// real broker).
        package var windowBytes = 3 << 20
        /// How long the run may go without a new verdict before it ends and reports the rest undecided.
        package var stallLimit: Duration = .seconds(60)

        package init() {}
    }

    /// The figures `bench rtdn` prints (snake_case JSON).
    package struct Result: Codable, Sendable {
        package var notifications: Int
        /// Purchases minted and granted through `google_play` jobs before the burst: subscriptions get ten lifecycle
        /// notifications each, one-time products two.
        package var purchases: Int
        package var subscriptions: Int
        package var oneTimeProducts: Int
        /// Notifications by Google's type (`SUBSCRIPTION_RENEWED`, `VOIDED_PURCHASE`, …).
        package var types: [String: Int]
        package var workers: Int
        package var partitions: Int
        package var httpConcurrency: Int
        package var googlePlayMinuteQuota: Int
        package var windowBytes: Int
        /// The mean push body (the envelope with the base64 notification; the OIDC token is a header).
        package var meanBodyBytes: Int
        /// First POST to the last answer, and answers with 200 over it.
        package var acceptSeconds: Double
        package var acceptedPerSecond: Double
        /// Answers by HTTP status (every one 200 in a good run).
        package var httpStatuses: [String: Int]
        /// First POST to the last verdict read, and notifications decided over it (the Developer API reads
        /// included: each notification job reads its purchase again).
        package var decidedSeconds: Double
        package var decidedPerSecond: Double
        /// `decided_per_second / workers`: the figure of the target (≥ 1,000 per worker).
        package var decidedPerSecondPerWorker: Double
        /// Notifications without a verdict (must be 0) and with more than one (redeliveries; 0 in a calm run).
        package var undecided: Int
        package var duplicated: Int
        /// Verdicts by `outcome` or `outcome/reason`.
        package var outcomes: [String: Int]
        /// Purchase reads (`subscriptionsv2.get`, `productsv2.getproductpurchasev2`) the simulator counted during the
        /// burst, per notification, and the most of one purchase. A purchase's notifications share one lane (their
        /// message key is the token), so each reads once: at most one read per notification.
        package var developerAPIReads: Int
        package var readsPerNotification: Double
        package var maxReadsPerPurchase: Int
        /// From a notification's POST to its verdict read by the bench.
        package var latencyP50Ms: Double
        package var latencyP99Ms: Double
        /// Minting, granting and collecting the notifications (not part of the measure).
        package var setupSeconds: Double
        package var cores: Int
        /// The 1-minute load average at the end (other processes share the machine).
        package var loadAverage1m: Double?
    }

    /// Keeps the pushes the simulator makes (headers with the OIDC token, and body) and acknowledges each, so the
    /// bench can send them in one burst at its own pace.
    final class CapturingPushTransport: PlayPushTransport {
        let pushes = Mutex<[Push]>([])
        func post(
            url: String, headers: [(name: String, value: String)], body: [UInt8], timeout: Duration
        ) async -> Int? {
            let authorization = headers.first { $0.name.lowercased() == "authorization" }?.value ?? ""
            pushes.withLock { $0.append(Push(authorization: authorization, body: body)) }
            return 200
        }
    }

    /// One captured push, as the bench sends it.
    struct Push: Sendable {
        var authorization: String
        var body: [UInt8]
    }

    /// One notification of the burst: its push, the job id the gateway gives it, its type and its purchase.
    struct Notification: Sendable {
        var push: Push
        var jobID: String
        var type: String
        var purchaseToken: String?
        var published: Date
    }

    static let subscriptionProduct = "gold"
    static let oneTimeProduct = "premium"
    static let audience = "https://verify-worker.bench.invalid/google-play/notifications"

    /// Ten lifecycle events of a subscription, each valid after the one before, ending active.
    static let subscriptionEvents: [PlayLifecycleEvent] = [
        .renew, .gracePeriod, .recover, .hold, .recover, .pause, .resume, .cancel, .restart, .renew,
    ]
    /// Two of a one-time product: a chargeback's refund review, then Google's refund of it.
    static let oneTimeEvents: [PlayLifecycleEvent] = [.chargeback, .chargebackResolve]
    /// One purchase in five is a one-time product.
    static let oneTimeEvery = 5

    static func isOneTime(_ index: Int) -> Bool { index % oneTimeEvery == oneTimeEvery - 1 }

    /// The fewest purchases whose events make `notifications`.
    static func purchases(for notifications: Int) -> Int {
        var count = 0
        var events = 0
        while events < notifications {
            events += isOneTime(count) ? oneTimeEvents.count : subscriptionEvents.count
            count += 1
        }
        return count
    }

    package static func run(_ options: Options, progress: @Sendable (String) -> Void) async throws -> Result {
        var logger = Logger(label: "bench.rtdn")
        logger.logLevel = .critical
        let clock = ContinuousClock()
        let setupStart = clock.now
        let cluster = try MockKafkaCluster(brokers: 1)
        for topic in [Topics.jobs, Topics.verdicts, Topics.deadLetters, Topics.control] {
            try cluster.createTopic(topic, partitions: options.partitions)
        }
        let transport = CapturingPushTransport()
        var playConfiguration = PlaySimulatorConfiguration()
        playConfiguration.logger.logLevel = .critical
        playConfiguration.push.transport = transport
        let play = PlaySimulator(configuration: playConfiguration)
        // The worker's files come with the demo's Apple trust anchors; the Apple simulator itself is never asked.
        var appleConfiguration = AppleSimulatorConfiguration()
        appleConfiguration.logger.logLevel = .critical
        let apple = try AppleSimulator(configuration: appleConfiguration)
        let files = try DemoFiles(simulator: apple, play: play)
        defer { files.remove() }
        let verdicts = try VerdictClock(bootstrap: cluster.bootstrapServers, logger: logger)

        return try await HarnessServices.run(
            [TaskService { try await play.run() }, TaskService { try await verdicts.run() }], logger: logger
        ) {
            let playPort = try await play.waitUntilReady()
            try files.writePlayServiceAccount(play)
            // The gateway fetches the simulator's key set as it would Google's, so it is made once the port is known.
            var gatewayConfiguration = GatewayConfiguration(
                host: "127.0.0.1", port: 0, brokers: cluster.bootstrapServers, jobsTopic: Topics.jobs,
                operations: .init(host: "127.0.0.1", port: 0), authentication: .disabled,
                trustAnchorFiles: files.anchors.map(\.path))
            gatewayConfiguration.drainTimeoutSeconds = 2
            gatewayConfiguration.pubSubAudience = audience
            gatewayConfiguration.pubSubServiceAccount = playConfiguration.push.serviceAccountEmail
            gatewayConfiguration.pubSubJWKSURL = "http://127.0.0.1:\(playPort)/oauth2/v3/certs"
            gatewayConfiguration.googlePlayPackages = [DemoApp.playPackage]
            let gateway = try ReceiptGateway(configuration: gatewayConfiguration, logger: logger)
            return try await HarnessServices.run(
                [TaskService { try await gateway.run(handlingSignals: false) }], logger: logger
            ) {
                let workers = try startWorkers(
                    options, bootstrap: cluster.bootstrapServers, playPort: playPort, files: files, logger: logger)
                defer { for worker in workers { worker.task.cancel() } }
                try await NotificationBurstBenchmark.poll("partitions assigned", limit: .seconds(60)) {
                    workers.map(\.health.assignedPartitions).reduce(0, +) == options.partitions
                        && verdicts.consumer.assignment.count == options.partitions
                }
                guard let gatewayPort = await gateway.waitUntilListening() else {
                    throw BenchmarkFailure("the gateway did not start listening")
                }

                let purchaseCount = purchases(for: options.notifications)
                progress("granting \(purchaseCount) Play purchases through google_play jobs")
                let tokens = try await grant(
                    purchaseCount, play: play, bootstrap: cluster.bootstrapServers, verdicts: verdicts, logger: logger)
                progress("collecting \(options.notifications) notifications from the Play simulator")
                let notifications = try await collect(
                    options.notifications, tokens: tokens, play: play, transport: transport,
                    endpoint: "http://127.0.0.1:\(gatewayPort)/google-play/notifications")
                let setupSeconds = (clock.now - setupStart).seconds
                let readsBefore = reads(of: tokens, play: play)

                progress("posting \(notifications.count) notifications, \(options.httpConcurrency) at a time")
                let meanBodyBytes = notifications.map(\.push.body.count).reduce(0, +) / max(1, notifications.count)
                let burst = try await post(
                    notifications, url: "http://127.0.0.1:\(gatewayPort)/google-play/notifications",
                    concurrency: options.httpConcurrency,
                    window: options.windowBytes > 0 ? max(1, options.windowBytes / max(1, meanBodyBytes)) : Int.max,
                    verdicts: verdicts)
                let expected = Set(notifications.map(\.jobID))
                try await awaitVerdicts(
                    expected, verdicts: verdicts, stallLimit: options.stallLimit, progress: progress)

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
                let readsAfter = reads(of: tokens, play: play)
                let burstReads = tokens.map { readsAfter[$0, default: 0] - readsBefore[$0, default: 0] }
                let totalReads = burstReads.reduce(0, +)
                let decidedPerSecond = decidedSeconds > 0 ? Double(decided.count) / decidedSeconds : 0
                let oneTime = (0..<purchaseCount).filter(isOneTime).count

                for worker in workers { worker.stop.resolve(()) }
                for worker in workers { _ = try? await worker.task.value }
                // Ends the reader's loop; the groups then stop the gateway, the reader and the simulator.
                await verdicts.consumer.close()
                return Result(
                    notifications: notifications.count, purchases: purchaseCount,
                    subscriptions: purchaseCount - oneTime, oneTimeProducts: oneTime, types: types,
                    workers: options.workers, partitions: options.partitions,
                    httpConcurrency: options.httpConcurrency, googlePlayMinuteQuota: options.minuteQuota,
                    windowBytes: options.windowBytes, meanBodyBytes: meanBodyBytes,
                    acceptSeconds: burst.seconds,
                    acceptedPerSecond: burst.seconds > 0 ? Double(burst.statuses["200"] ?? 0) / burst.seconds : 0,
                    httpStatuses: burst.statuses, decidedSeconds: decidedSeconds,
                    decidedPerSecond: decidedPerSecond,
                    decidedPerSecondPerWorker: decidedPerSecond / Double(max(1, options.workers)),
                    undecided: expected.count - decided.count,
                    duplicated: decided.values.filter { $0.count > 1 }.count, outcomes: outcomes,
                    developerAPIReads: totalReads,
                    readsPerNotification: notifications.isEmpty
                        ? 0 : (Double(totalReads) / Double(notifications.count) * 1_000).rounded() / 1_000,
                    maxReadsPerPurchase: burstReads.max() ?? 0,
                    latencyP50Ms: NotificationBurstBenchmark.percentile(latencies, 0.50),
                    latencyP99Ms: NotificationBurstBenchmark.percentile(latencies, 0.99),
                    setupSeconds: setupSeconds, cores: ProcessInfo.processInfo.activeProcessorCount,
                    loadAverage1m: PipelineBenchmark.loadAverage())
            }
        }
    }

    /// `verify-worker run`'s runtime against the Play simulator, `workers` times in this process (one group).
    static func startWorkers(
        _ options: Options, bootstrap: String, playPort: Int, files: DemoFiles, logger: Logger
    ) throws -> [NotificationBurstBenchmark.Worker] {
        try (0..<options.workers).map { index in
            // The Apple URLs name a closed port: no App Store job is sent.
            let configuration = try DemoRun.workerConfiguration(
                index: index, bootstrap: bootstrap, port: 9, playPort: playPort, files: files,
                jobDeadline: .seconds(120), extra: ["google_play_minute_quota": String(options.minuteQuota)])
            let runtime = WorkerRuntime(configuration: configuration, logger: logger, serveOperations: false)
            let stop = OneShot<Void>()
            let health = WorkerHealth()
            let task = Task { try await runtime.run(health: health) { _ = await stop.wait() } }
            return NotificationBurstBenchmark.Worker(task: task, stop: stop, health: health)
        }
    }

    /// Mints `count` purchases (subscriptions, and every fifth a one-time product; no push yet: the simulator has no
    /// endpoint) and grants each to an account of its own through a `google_play` job, so the ledger knows the
    /// owners; returns their purchase tokens.
    static func grant(
        _ count: Int, play: PlaySimulator, bootstrap: String, verdicts: VerdictClock, logger: Logger
    ) async throws -> [String] {
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(bootstrapServers: bootstrap, clientID: "bench-frontend"),
            logger: logger)
        var jobs: [ReceiptJob] = []
        var tokens: [String] = []
        for index in 0..<count {
            let (product, type): (String, ProductType) =
                isOneTime(index) ? (oneTimeProduct, .nonConsumable) : (subscriptionProduct, .autoRenewable)
            let minted = try play.mintPlayTrafficPurchase(
                packageName: DemoApp.playPackage, productID: product, type: type)
            tokens.append(minted.purchaseToken)
            let purchase = GooglePlayPurchase(
                packageName: DemoApp.playPackage, productID: product, purchaseToken: minted.purchaseToken,
                purchaseData: minted.purchaseData, signature: minted.signature)
            jobs.append(
                ReceiptJob(
                    jobID: "bench-play-grant-\(index)", accountID: "bench-play-account-\(index)",
                    proof: .googlePlay(purchase), submittedAt: Date()))
        }
        let codec = MessageCodec()
        let allJobs = jobs
        try await JobSubmitter(producer: producer).submit(
            chains: allJobs.indices.map { [$0] }, spread: JobSubmitter.Spread(lanes: 32, chunk: 1)
        ) { index in
            (allJobs[index].messageKey, codec.encode(allJobs[index]))
        }
        await producer.shutdown()
        let grants = Set(jobs.map(\.jobID))
        try await NotificationBurstBenchmark.poll("verdicts of \(count) grants", limit: .seconds(300)) {
            verdicts.decidedCount(of: grants) == grants.count
        }
        let granted = verdicts.snapshot(of: grants).values.filter { $0.label == "granted" }.count
        guard granted == count else { throw BenchmarkFailure("\(granted) of \(count) Play purchases were granted") }
        return tokens
    }

    /// Plays the purchases' lifecycle events round by round (so each purchase's notifications keep Google's order
    /// and those of one purchase are spread over the burst, as Pub/Sub's backlog would be) until `count`
    /// notifications are published, and returns the pushes the simulator made of them, in publish order.
    static func collect(
        _ count: Int, tokens: [String], play: PlaySimulator, transport: CapturingPushTransport, endpoint: String
    ) async throws -> [Notification] {
        play.configurePush {
            $0.endpoint = endpoint
            $0.audience = audience
        }
        var published = 0
        let rounds = max(subscriptionEvents.count, oneTimeEvents.count)
        for round in 0..<rounds {
            for (index, token) in tokens.enumerated() where published < count {
                let events = isOneTime(index) ? oneTimeEvents : subscriptionEvents
                guard round < events.count else { continue }
                published += try play.lifecycle(token, events[round]).messageIds.count
            }
        }
        try await NotificationBurstBenchmark.poll("\(published) pushes made", limit: .seconds(120)) {
            transport.pushes.withLock { $0.count } >= published
        }
        let records = Dictionary(play.pushRecords().map { ($0.messageId, $0) }) { first, _ in first }
        let notifications = try transport.pushes.withLock { $0 }.map { push -> Notification in
            let messageID = try messageID(of: push.body)
            guard let record = records[messageID] else {
                throw BenchmarkFailure("the Play simulator pushed a message it did not record")
            }
            return Notification(
                push: push, jobID: GooglePlayNotificationJob.jobID(messageID: messageID),
                type: record.notification.kind, purchaseToken: record.notification.purchaseToken,
                published: record.publishTime)
        }
        return Array(
            notifications.enumerated().sorted {
                ($0.element.published, $0.offset) < ($1.element.published, $1.offset)
            }.map(\.element).prefix(count))
    }

    /// The Pub/Sub `messageId` of a push body, from which the gateway makes the job id.
    static func messageID(of body: [UInt8]) throws -> String {
        struct Envelope: Decodable {
            struct Message: Decodable { var messageId: String }
            var message: Message
        }
        return try JSONDecoder().decode(Envelope.self, from: Data(body)).message.messageId
    }

    /// Each purchase's reads so far, as the simulator counts them.
    static func reads(of tokens: [String], play: PlaySimulator) -> [String: Int] {
        Dictionary(tokens.map { ($0, play.purchase($0)?.reads ?? 0) }) { first, _ in first }
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

    /// POSTs every push, `concurrency` at a time, as Pub/Sub does: the envelope with its OIDC token; never more than
    /// `window` of them undecided.
    static func post(
        _ notifications: [Notification], url: String, concurrency: Int, window: Int, verdicts: VerdictClock
    ) async throws -> NotificationBurstBenchmark.Burst {
        let engine = try CurlHTTPEngine()
        defer { engine.shutdown() }
        let clock = ContinuousClock()
        let start = clock.now
        let record = NotificationBurstBenchmark.BurstRecord(start: start, count: notifications.count)
        await withTaskGroup(of: Void.self) { posts in
            for _ in 0..<max(1, concurrency) {
                posts.addTask {
                    while true {
                        let index = record.next.take()
                        guard index < notifications.count else { return }
                        while index - verdicts.notificationsDecided >= window {
                            try? await Task.sleep(for: .milliseconds(2))
                        }
                        let push = notifications[index].push
                        record.sent.withLock { $0[index] = clock.now }
                        let status: String
                        do {
                            let response = try await engine.execute(
                                TransportRequest(
                                    method: .post, url: url,
                                    headers: [
                                        ("Content-Type", "application/json"), ("Authorization", push.authorization),
                                    ], body: push.body, timeout: .seconds(30)))
                            status = String(response.status)
                        } catch {
                            status = "transport_error"
                        }
                        record.statuses.withLock { $0[status, default: 0] += 1 }
                    }
                }
            }
        }
        return NotificationBurstBenchmark.Burst(
            start: start, sent: record.sent.withLock { $0 }, seconds: (clock.now - start).seconds,
            statuses: record.statuses.withLock { $0 })
    }
}
