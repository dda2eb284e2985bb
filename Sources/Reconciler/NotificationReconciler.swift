import AppleClients
import Foundation
import Ledger
import Logging
import Messages
import Metrics
import Observability
import RateLimiter
import Synchronization

/// Recovers the App Store Server Notifications that Apple failed to deliver.
///
/// Apple retries a failed notification five times over about six and a half days in production and once in the
/// sandbox (reportedly not at all after an HTTP 400 since 2026-03); after that it is only in Get Notification
/// History. Each sweep reads that history with `onlyFailures` from the checkpoint (less ``ReconcilerConfiguration/
/// overlap``) to now, page by page at the configured share of the Server API rate, and publishes each notification
/// as the job the gateway would have made of it (``NotificationJob``): same `job_id`, same content, so one that did
/// arrive, or arrives later by Apple's own retry, is decided once. The checkpoint moves to the sweep's end only when
/// every page was read and every job published; a sweep cut short (Apple failing, Kafka down, a crash) is done again.
///
/// Any number of replicas may run: the ledger's lease lets one sweep at a time, renewed before every page, and only
/// its holder can move the checkpoint.
public final class NotificationReconciler<Clock: GateClock>: Sendable where Clock.Instant: Sendable {
    public let configuration: ReconcilerConfiguration
    let store: any ReconcilerStateStore
    let source: any NotificationHistorySource
    let sink: any RecoveredJobSink
    let clock: Clock
    /// This replica's name in the lease (host name and process id by default).
    public let holder: String
    let logger: Logger
    let metrics: ReconcilerMetrics
    /// Where unsure subscriptions are listed and their history read; nil: no re-reads (notification sweeps only).
    let rereadStore: (any SubscriptionRereadStore)?
    let historySource: (any TransactionHistorySource)?
    private let bucket: Mutex<TokenBucket<Clock.Instant>>
    /// The jobs this replica published, with the wall time of their first publication: a notification stays in
    /// Apple's history of failures, and the sweeps' windows overlap, so one notification is published by several
    /// sweeps (the same job id each time, harmless downstream) and must be counted as recovered once. An entry goes
    /// when a sweep's window starts after it: a notification is never older than its first publication, so no later
    /// window can hold it.
    private let published = Mutex<[String: Date]>([:])

    /// Apple answers history requests for the last 180 days only.
    static var historyLimit: Duration { .seconds(180 * 86_400) }
    /// Retryable answers in a row before a sweep gives up (it is tried again next interval).
    static var retriesPerPage: Int { 8 }

    public init(
        configuration: ReconcilerConfiguration, store: any ReconcilerStateStore, source: any NotificationHistorySource,
        sink: any RecoveredJobSink, clock: Clock, holder: String, logger: Logger,
        rereadStore: (any SubscriptionRereadStore)? = nil, historySource: (any TransactionHistorySource)? = nil,
        metricsFactory: (any MetricsFactory)? = nil
    ) {
        self.rereadStore = rereadStore
        self.historySource = historySource
        self.configuration = configuration
        metrics = ReconcilerMetrics(app: configuration.app, factory: metricsFactory ?? MetricsSystem.factory)
        self.store = store
        self.source = source
        self.sink = sink
        self.clock = clock
        self.holder = holder
        self.logger = logger
        // A burst of 1: the share is a ceiling on every one-second window, not an average.
        bucket = Mutex(TokenBucket(ratePerSecond: max(0.001, configuration.requestsPerSecond), burst: 1))
    }

    /// Sweeps every ``ReconcilerConfiguration/interval`` until cancelled, then gives the lease up.
    public func run() async {
        while !Task.isCancelled {
            let started = clock.now
            let result = await sweep()
            if case .failed(let why) = result {
                logger.warning(
                    "reconcile: sweep failed; tried again next interval", metadata: [LogKeys.error: "\(why)"])
            }
            // Re-reads follow the sweep on the same lease and rate budget; another replica's lease means not ours.
            if result != .notLeader && result != .leaseLost, case .stopped(let why) = await rereadUnsure() {
                logger.warning(
                    "reconcile: re-reads stopped; tried again next interval", metadata: [LogKeys.error: "\(why)"])
            }
            do {
                try await clock.sleep(until: started.advanced(by: configuration.interval), tolerance: nil)
            } catch {
                break
            }
        }
        metrics.leaseHeld.record(0)
        try? await store.releaseReconcilerLease(name: configuration.name, holder: holder, now: wallNow)
    }

    /// One sweep over every configured environment.
    public func sweep() async -> ReconcilerSweepResult {
        let now = wallNow
        let lease: ReconcilerLease?
        do {
            lease = try await store.acquireReconcilerLease(
                name: configuration.name, holder: holder, now: now, duration: configuration.leaseDuration)
        } catch {
            metrics.sweepsFailed.increment()
            return .failed("ledger: \(error)")
        }
        guard let lease else {
            metrics.leaseHeld.record(0)
            return .notLeader
        }
        metrics.leaseHeld.record(1)
        let window = Self.window(checkpoint: lease.checkpoint, now: now, configuration: configuration)
        published.withLock { $0 = $0.filter { $0.value >= window.start } }
        var pages = 0
        var recovered = 0
        var leaseEnd = lease.expiresAt
        for environment in configuration.environments {
            let query = NotificationHistoryQuery(startDate: window.start, endDate: window.end, onlyFailures: true)
            var paginationToken: String?
            var failures = 0
            while true {
                do {
                    try await pace()
                    // Renewed before each request once half of it is gone, so a page is never read on a lease that
                    // may already be another replica's.
                    if leaseEnd.timeIntervalSince(wallNow) < configuration.leaseDuration.secondsValue / 2 {
                        guard
                            let renewed = try await store.acquireReconcilerLease(
                                name: configuration.name, holder: holder, now: wallNow,
                                duration: configuration.leaseDuration)
                        else {
                            metrics.sweepsAbandoned.increment()
                            metrics.leaseHeld.record(0)
                            return .leaseLost
                        }
                        leaseEnd = renewed.expiresAt
                    }
                    let outcome = try await source.notificationHistory(
                        query, paginationToken: paginationToken, environment: environment)
                    // Each case either `continue`s (the next page, or this one again) or leaves the switch, and the
                    // `break` after the `do` ends this environment.
                    switch outcome {
                    case .answered(let page):
                        metrics.requests("answered").increment()
                        failures = 0
                        pages += 1
                        recovered += try await publish(page.notifications.map(\.signedPayload))
                        guard page.hasMore else { break }
                        guard let token = page.paginationToken, !token.isEmpty, token != paginationToken else {
                            metrics.sweepsFailed.increment()
                            return .failed("Apple said more pages follow but gave no new pagination token")
                        }
                        paginationToken = token
                        continue
                    case .retryable(let advice):
                        metrics.requests("retryable").increment()
                        failures += 1
                        guard failures <= Self.retriesPerPage else {
                            metrics.sweepsFailed.increment()
                            return .failed("Apple: \(advice) \(failures) times in a row")
                        }
                        let wait = advice.retryAfter ?? configuration.backoff * (1 << min(failures - 1, 6))
                        try await clock.sleep(until: clock.now.advanced(by: wait), tolerance: nil)
                        continue
                    case .failed(let error):
                        metrics.requests("failed").increment()
                        metrics.sweepsFailed.increment()
                        return .failed("Apple: \(error)")
                    }
                } catch is CancellationError {
                    return .failed("cancelled")
                } catch {
                    metrics.sweepsFailed.increment()
                    return .failed("\(error)")
                }
                break
            }
        }
        do {
            guard
                try await store.advanceReconcilerCheckpoint(
                    name: configuration.name, holder: holder, checkpoint: window.end, now: wallNow)
            else {
                metrics.sweepsAbandoned.increment()
                metrics.leaseHeld.record(0)
                return .leaseLost
            }
        } catch {
            metrics.sweepsFailed.increment()
            return .failed("ledger: \(error)")
        }
        metrics.sweepsCompleted.increment()
        metrics.checkpoint.record(window.end.timeIntervalSince1970)
        return .completed(
            window: window, pages: pages, published: recovered, logging: "reconcile: sweep completed", to: logger)
    }

    /// The span a sweep reads: from the checkpoint less the overlap (or the first look-back), never more than
    /// Apple's 180 days, to now.
    static func window(
        checkpoint: Date?, now: Date, configuration: ReconcilerConfiguration
    ) -> (start: Date, end: Date) {
        let oldest = now.addingTimeInterval(-historyLimit.secondsValue + 3_600)
        let wanted =
            checkpoint.map { $0.addingTimeInterval(-configuration.overlap.secondsValue) }
            ?? now.addingTimeInterval(-configuration.firstLookBack.secondsValue)
        return (max(oldest, min(wanted, now)), now)
    }

    /// Publishes the job of each notification; returns how many. A payload without a readable `notificationUUID`
    /// makes no job (the gateway refuses it too): counted and skipped, never a reason to stop the sweep.
    private func publish(_ signedPayloads: [String]) async throws -> Int {
        var published = 0
        for payload in signedPayloads {
            let job: ReceiptJob
            do {
                job = try NotificationJob.job(
                    signedPayload: payload, accountID: configuration.notificationAccountID, submittedAt: wallNow)
            } catch {
                metrics.unreadable.increment()
                logger.warning(
                    "reconcile: a notification in Apple's history makes no job; skipped",
                    metadata: [LogKeys.error: "\(error)"])
                continue
            }
            try await sink.publish(job)
            let now = wallNow
            let first = self.published.withLock { $0.updateValue($0[job.jobID] ?? now, forKey: job.jobID) == nil }
            if first { metrics.recovered.increment() }
            published += 1
        }
        return published
    }

    /// Waits for the rate budget's next request (sweeps and re-reads share it).
    func pace() async throws {
        while true {
            let now = clock.now
            let admitted = bucket.withLock { bucket in
                bucket.tryAcquire(now: now) ? nil : bucket.earliestAdmission(now: now)
            }
            guard let admitted else { return }
            try await clock.sleep(until: admitted, tolerance: nil)
        }
    }

    var wallNow: Date { Date(epochMilliseconds: clock.unixMillisecondsNow) }
}

extension Duration {
    var secondsValue: Double {
        Double(components.seconds) + Double(components.attoseconds) * 1e-18
    }
}
