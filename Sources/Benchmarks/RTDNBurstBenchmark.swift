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
    package typealias Options = NotificationBurst.Options
    package typealias Result = NotificationBurst.Result

    /// Keeps the pushes the simulator makes (headers with the OIDC token, and body) and acknowledges each, so the
    /// bench can send them in one burst at its own pace.
    final class CapturingPushTransport: PlayPushTransport {
        let pushes = Mutex<[NotificationBurst.Request]>([])
        func post(
            url: String, headers: [(name: String, value: String)], body: [UInt8], timeout: Duration
        ) async -> Int? {
            let authorization = headers.first { $0.name.lowercased() == "authorization" }?.value ?? ""
            pushes.withLock {
                $0.append(NotificationBurst.Request(body: body, headers: [("Authorization", authorization)]))
            }
            return 200
        }
    }

    /// One notification of the burst: its push, the job id the gateway gives it, its type and its purchase.
    struct Notification: Sendable {
        /// The push as Pub/Sub POSTs it: the envelope, and its OIDC token in a header.
        var push: NotificationBurst.Request
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
        let setup = try NotificationBurst.Setup(label: "bench.rtdn", partitions: options.partitions)
        let (logger, cluster, clock) = (setup.logger, setup.cluster, setup.clock)
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
            var gatewayConfiguration = setup.gatewayConfiguration(files: files)
            gatewayConfiguration.pubSubAudience = audience
            gatewayConfiguration.pubSubServiceAccount = playConfiguration.push.serviceAccountEmail
            gatewayConfiguration.pubSubJWKSURL = "http://127.0.0.1:\(playPort)/oauth2/v3/certs"
            gatewayConfiguration.googlePlayPackages = [DemoApp.playPackage]
            let gateway = try ReceiptGateway(configuration: gatewayConfiguration, logger: logger)
            return try await HarnessServices.run(
                [TaskService { try await gateway.run(handlingSignals: false) }], logger: logger
            ) {
                let workers = try NotificationBurst.startWorkers(options.workers, logger: logger) { index in
                    // The Apple URLs name a closed port: no App Store job is sent.
                    try DemoRun.workerConfiguration(
                        index: index, bootstrap: cluster.bootstrapServers, port: 9, playPort: playPort, files: files,
                        jobDeadline: .seconds(120),
                        extra: ["google_play_minute_quota": String(options.minuteQuota)])
                }
                defer { for worker in workers { worker.task.cancel() } }
                try await NotificationBurst.awaitAssignment(
                    of: workers, partitions: options.partitions, reader: verdicts)
                let gatewayPort = try await NotificationBurst.listeningPort(of: gateway)

                let purchaseCount = purchases(for: options.notifications)
                progress("granting \(purchaseCount) Play purchases through google_play jobs")
                let tokens = try await grant(
                    purchaseCount, play: play, bootstrap: cluster.bootstrapServers, verdicts: verdicts, logger: logger)
                progress("collecting \(options.notifications) notifications from the Play simulator")
                let notifications = try await collect(
                    options.notifications, tokens: tokens, play: play, transport: transport,
                    endpoint: "http://127.0.0.1:\(gatewayPort)/google-play/notifications")
                let setupSeconds = (clock.now - setup.start).seconds
                let readsBefore = reads(of: tokens, play: play)

                progress("posting \(notifications.count) notifications, \(options.httpConcurrency) at a time")
                let meanBodyBytes = notifications.map(\.push.body.count).reduce(0, +) / max(1, notifications.count)
                let burst = try await NotificationBurst.post(
                    notifications.map(\.push), url: "http://127.0.0.1:\(gatewayPort)/google-play/notifications",
                    concurrency: options.httpConcurrency,
                    window: NotificationBurst.window(windowBytes: options.windowBytes, meanBodyBytes: meanBodyBytes),
                    verdicts: verdicts)
                try await NotificationBurst.awaitVerdicts(
                    Set(notifications.map(\.jobID)), verdicts: verdicts, stallLimit: options.stallLimit,
                    progress: progress)

                let readsAfter = reads(of: tokens, play: play)
                let burstReads = tokens.map { readsAfter[$0, default: 0] - readsBefore[$0, default: 0] }
                let totalReads = burstReads.reduce(0, +)
                let oneTime = (0..<purchaseCount).filter(isOneTime).count
                var result = NotificationBurst.result(
                    options, jobIDs: notifications.map(\.jobID), types: notifications.map(\.type),
                    subscriptions: purchaseCount - oneTime, meanBodyBytes: meanBodyBytes, setupSeconds: setupSeconds,
                    burst: burst, verdicts: verdicts)
                result.purchases = purchaseCount
                result.oneTimeProducts = oneTime
                result.googlePlayMinuteQuota = options.minuteQuota
                result.developerAPIReads = totalReads
                result.readsPerNotification =
                    notifications.isEmpty
                    ? 0 : (Double(totalReads) / Double(notifications.count) * 1_000).rounded() / 1_000
                result.maxReadsPerPurchase = burstReads.max() ?? 0

                await NotificationBurst.finish(workers, verdicts: verdicts)
                return result
            }
        }
    }

    /// Mints `count` purchases (subscriptions, and every fifth a one-time product; no push yet: the simulator has no
    /// endpoint) and grants each to an account of its own through a `google_play` job, so the ledger knows the
    /// owners; returns their purchase tokens.
    static func grant(
        _ count: Int, play: PlaySimulator, bootstrap: String, verdicts: VerdictClock, logger: Logger
    ) async throws -> [String] {
        try await NotificationBurst.grant(
            count, what: "Play purchases", bootstrap: bootstrap, verdicts: verdicts, logger: logger
        ) { index in
            let (product, type): (String, ProductType) =
                isOneTime(index) ? (oneTimeProduct, .nonConsumable) : (subscriptionProduct, .autoRenewable)
            let minted = try play.mintPlayTrafficPurchase(
                packageName: DemoApp.playPackage, productID: product, type: type)
            let purchase = GooglePlayPurchase(
                packageName: DemoApp.playPackage, productID: product, purchaseToken: minted.purchaseToken,
                purchaseData: minted.purchaseData, signature: minted.signature)
            let job = ReceiptJob(
                jobID: "bench-play-grant-\(index)", accountID: "bench-play-account-\(index)",
                proof: .googlePlay(purchase), submittedAt: Date())
            return (job, minted.purchaseToken)
        }
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
        try await NotificationBurst.poll("\(published) pushes made", limit: .seconds(120)) {
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
}
