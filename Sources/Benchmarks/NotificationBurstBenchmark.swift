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
    package typealias Options = NotificationBurst.Options
    package typealias Result = NotificationBurst.Result

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
        let setup = try NotificationBurst.Setup(label: "bench.notifications", partitions: options.partitions)
        let (logger, cluster, clock) = (setup.logger, setup.cluster, setup.clock)
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
        let gateway = try ReceiptGateway(configuration: setup.gatewayConfiguration(files: files), logger: logger)

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
            let startWorkers = {
                try NotificationBurst.startWorkers(options.workers, logger: logger) { index in
                    try DemoRun.workerConfiguration(
                        index: index, bootstrap: cluster.bootstrapServers, port: port, files: files,
                        jobDeadline: .seconds(120), extra: ["apple_app_apple_id": String(configuration.appAppleId)])
                }
            }
            let granters = try startWorkers()
            var workers = granters
            defer { for worker in workers { worker.task.cancel() } }
            try await NotificationBurst.awaitAssignment(
                of: granters, partitions: options.partitions, reader: verdicts)
            let gatewayPort = try await NotificationBurst.listeningPort(of: gateway)

            let subscriptions = (options.notifications + 9) / 10
            progress("granting \(subscriptions) subscriptions through jobs")
            let originals = try await grant(
                subscriptions, simulator: simulator, bootstrap: cluster.bootstrapServers, verdicts: verdicts,
                logger: logger)
            progress("collecting \(options.notifications) notifications from the simulator")
            let notifications = try await collect(
                options.notifications, originals: originals, simulator: simulator, transport: transport)
            let setupSeconds = (clock.now - setup.start).seconds

            let meanBodyBytes = notifications.map(\.body.count).reduce(0, +) / max(1, notifications.count)
            if options.drain {
                // No worker while the gateway accepts: they drain the full topic afterwards.
                let totalKB = notifications.map(\.body.count).reduce(0, +) / 1_000
                guard totalKB <= options.partitions * 2_000 else {
                    throw BenchmarkFailure(
                        "--drain: \(totalKB) kB of notifications need at least \(totalKB / 2_000 + 1) partitions "
                            + "(the mock cluster keeps about 5 MB per partition)")
                }
                await NotificationBurst.stop(workers)
                workers = []
            }
            progress("posting \(notifications.count) notifications, \(options.httpConcurrency) at a time")
            // Apple POSTs `{"signedPayload": …}` with no token.
            let burst = try await NotificationBurst.post(
                notifications.map { NotificationBurst.Request(body: $0.body) },
                url: "http://127.0.0.1:\(gatewayPort)/apple/notifications", concurrency: options.httpConcurrency,
                window: options.drain
                    ? Int.max
                    : NotificationBurst.window(windowBytes: options.windowBytes, meanBodyBytes: meanBodyBytes),
                verdicts: verdicts)
            var drainStart: ContinuousClock.Instant?
            if options.drain {
                progress("starting \(options.workers) workers on the full topic")
                let drainers = try startWorkers()
                workers = drainers
                try await NotificationBurst.awaitAssignment(
                    of: drainers, partitions: options.partitions, what: "partitions assigned to the drain's workers")
                drainStart = clock.now
            }
            try await NotificationBurst.awaitVerdicts(
                Set(notifications.map(\.jobID)), verdicts: verdicts, stallLimit: options.stallLimit, progress: progress)

            var result = NotificationBurst.result(
                options, jobIDs: notifications.map(\.jobID), types: notifications.map(\.type),
                subscriptions: subscriptions, meanBodyBytes: meanBodyBytes, setupSeconds: setupSeconds, burst: burst,
                drainStart: drainStart, verdicts: verdicts)
            result.appleCalls = simulator.stats.snapshot().requests.filter { !$0.key.hasPrefix("sim/") }.values
                .reduce(0, +)

            await NotificationBurst.finish(workers, verdicts: verdicts)
            return result
        }
    }

    /// Mints `count` monthly subscriptions (no notification yet: the simulator has no target) and grants each to
    /// an account of its own through a job; returns their original transaction ids.
    static func grant(
        _ count: Int, simulator: AppleSimulator, bootstrap: String, verdicts: VerdictClock, logger: Logger
    ) async throws -> [String] {
        let expires = Int64(Date().timeIntervalSince1970 * 1_000) + 30 * 86_400_000
        return try await NotificationBurst.grant(
            count, what: "subscriptions", bootstrap: bootstrap, verdicts: verdicts, logger: logger
        ) { index in
            let minted = try simulator.mint(
                MintRequest(
                    bundleId: DemoApp.bundleID, productId: subscriptionProduct, format: .signedTransaction,
                    environment: .production, expiresDateMs: expires))
            let job = ReceiptJob(
                jobID: "bench-grant-\(index)", accountID: "bench-account-\(index)",
                proof: .signedTransaction(minted.receipt), bundleID: DemoApp.bundleID, submittedAt: Date())
            return (job, minted.transaction.originalTransactionId)
        }
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
        try await NotificationBurst.poll("\(count) notifications sent", limit: .seconds(120)) {
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
}
