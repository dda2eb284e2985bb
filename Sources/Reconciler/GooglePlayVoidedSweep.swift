import Foundation
import GooglePlayClients
import Ledger
import Logging
import Messages
import Metrics
import Observability
import RateLimiter

/// Where a voided-purchases sweep reads Google: ``GooglePlayAPIClient`` in production (one page, one call through
/// the gate, retried there on 429 and 5xx), a stub in tests and the benchmark.
public protocol VoidedPurchaseSource: Sendable {
    func listVoidedPurchases(
        _ query: GooglePlayVoidedPurchasesQuery
    ) async -> GooglePlayOutcome<GooglePlayVoidedPurchasesPage>
}

extension GooglePlayAPIClient: VoidedPurchaseSource {
    public func listVoidedPurchases(
        _ query: GooglePlayVoidedPurchasesQuery
    ) async -> GooglePlayOutcome<GooglePlayVoidedPurchasesPage> {
        await voidedPurchases(query, deadline: nil)
    }
}

/// Settings of the Google Play half of `verify-worker reconcile` (the `reconcile_google_play_*` keys).
public struct GooglePlayReconcileSettings: Sendable {
    /// How far before the checkpoint each sweep starts again: Google lists a purchase under the time its systems saw
    /// it voided, which may be recorded a little after. Default: 10 min (`reconcile_overlap_s`).
    public var overlap: Duration = .seconds(600)
    /// How far back the first sweep of a package looks: at most Google's 30 days. Default: 30 days.
    public var firstLookBack: Duration = .seconds(30 * 86_400)
    /// Purchases per page (Google's largest: 1,000).
    public var pageSize = GooglePlayVoidedPurchasesQuery.largestPage
    /// The lease of one package's sweep. Default: 30 s.
    public var leaseDuration: Duration = .seconds(30)
    /// The `account_id` of the jobs. Default: `google-play-notification`.
    public var notificationAccountID = GooglePlayNotificationJob.defaultAccountID
    /// How long before a Play subscription's expiry or grace end it is re-read. Default: 10 min.
    public var rereadLead: Duration = .seconds(600)
    /// How long after its expiry or grace end a Play subscription is still re-read. Default: 3 days.
    public var rereadAfter: Duration = .seconds(3 * 86_400)
    /// How often one Play subscription is re-read at most. Default: 1 hour (`reconcile_reread_interval_s`).
    public var rereadInterval: Duration = .seconds(3_600)
    /// Re-read jobs per pass at most. Default: 100.
    public var rereadBatch = 100

    public init() {}

    /// The ledger row of one package's sweep (lease and checkpoint).
    public static func leaseName(package: String) -> String { "google-play-voided/" + package }
    /// The ledger row of the re-reads' lease (one for every package: they share one query).
    public static let rereadLeaseName = "google-play-rereads"
}

/// Sweeps Google Play's Voided Purchases API, one package at a time, and publishes each voided purchase as the job a
/// real-time `voidedPurchaseNotification` would have made (``GooglePlayNotificationJob``): job id
/// `google-play-voided-<orderId>`, so one voided order is one job however often the overlapping windows see it, and
/// the workers re-read Google and revoke once.
///
/// Google keeps voided purchases 30 days, so what a lost notification leaves is only there. Each sweep reads the
/// window from the package's checkpoint (less the overlap; the first: the look-back) to now, clamped to Google's 30
/// days, every page, each page one call of the reconciler's quota share (``GooglePlayQuotaShare``). The checkpoint
/// moves to the window's end only once every job of every page has a delivery report with an offset; a sweep cut
/// short (Google failing, Kafka down, a crash) reads the same window again. Replicas: the ledger's lease per package.
public final class GooglePlayVoidedSweep<Clock: GateClock>: Sendable where Clock.Instant: Sendable {
    public let packageName: String
    let settings: GooglePlayReconcileSettings
    let store: any ReconcilerStateStore
    let source: any VoidedPurchaseSource
    let sink: any RecoveredJobSink
    let quota: GooglePlayQuotaShare<Clock>
    let clock: Clock
    let holder: String
    let logger: Logger
    /// The product type a token's claims state (1 subscription, 2 one-time), nil when the ledger has none.
    let productType: @Sendable (String) async -> Int?
    let metrics: GooglePlayReconcileMetrics

    public init(
        packageName: String, settings: GooglePlayReconcileSettings, store: any ReconcilerStateStore,
        source: any VoidedPurchaseSource, sink: any RecoveredJobSink, quota: GooglePlayQuotaShare<Clock>, clock: Clock,
        holder: String, logger: Logger, productType: @escaping @Sendable (String) async -> Int? = { _ in nil },
        metricsFactory: (any MetricsFactory)? = nil
    ) {
        self.packageName = packageName
        self.settings = settings
        self.store = store
        self.source = source
        self.sink = sink
        self.quota = quota
        self.clock = clock
        self.holder = holder
        self.logger = logger
        self.productType = productType
        metrics = GooglePlayReconcileMetrics(app: packageName, factory: metricsFactory ?? MetricsSystem.factory)
    }

    var leaseName: String { GooglePlayReconcileSettings.leaseName(package: packageName) }
    var wallNow: Date { Date(timeIntervalSince1970: Double(clock.unixMillisecondsNow) / 1000) }

    /// The window a sweep reads at `now`: from the checkpoint less the overlap (the first sweep: the look-back), to
    /// now, clamped to what Google accepts (30 days back at most, never in the future).
    public static func window(
        checkpoint: Date?, now: Date, settings: GooglePlayReconcileSettings
    ) -> (start: Date, end: Date) {
        let wanted =
            checkpoint.map { $0.addingTimeInterval(-settings.overlap.secondsValue) }
            ?? now.addingTimeInterval(-settings.firstLookBack.secondsValue)
        return GooglePlayVoidedPurchasesQuery.clamp(start: wanted, end: now, now: now)
    }

    /// One sweep of this package.
    public func sweep() async -> ReconcilerSweepResult {
        let result = await sweepOnce()
        switch result {
        case .completed: metrics.sweeps("completed").increment()
        case .failed: metrics.sweeps("failed").increment()
        case .leaseLost: metrics.sweeps("lease_lost").increment()
        case .notLeader: break
        }
        return result
    }

    private func sweepOnce() async -> ReconcilerSweepResult {
        let lease: ReconcilerLease?
        do {
            lease = try await store.acquireReconcilerLease(
                name: leaseName, holder: holder, now: wallNow, duration: settings.leaseDuration)
        } catch {
            return .failed("ledger: \(error)")
        }
        guard let lease else { return .notLeader }
        let window = Self.window(checkpoint: lease.checkpoint, now: wallNow, settings: settings)
        var leaseEnd = lease.expiresAt
        var pageToken: String?
        var pages = 0
        var published = 0
        // Job ids delivered in this sweep: an order Google lists twice (on two pages) is sent once.
        var delivered = Set<String>()
        do {
            while true {
                try await quota.spend()
                metrics.quotaSpent("voided_list").increment()
                // Renewed before a page once half of it is gone, so a page is never read on a lease that may be
                // another replica's already.
                if leaseEnd.timeIntervalSince(wallNow) < settings.leaseDuration.secondsValue / 2 {
                    guard
                        let renewed = try await store.acquireReconcilerLease(
                            name: leaseName, holder: holder, now: wallNow, duration: settings.leaseDuration)
                    else { return .leaseLost }
                    leaseEnd = renewed.expiresAt
                }
                let query = GooglePlayVoidedPurchasesQuery(
                    packageName: packageName, startTime: window.start, endTime: window.end,
                    maxResults: settings.pageSize, pageToken: pageToken)
                let page: GooglePlayVoidedPurchasesPage
                switch await source.listVoidedPurchases(query) {
                case .answered(let answer): page = answer
                case .retryable(let advice): return .failed("Google Play: \(advice)")
                case .purchaseNotFound(let status): return .failed("Google Play: HTTP \(status) for the package")
                case .rejected(let error), .configurationRefused(let error), .failed(let error):
                    return .failed("\(error)")
                }
                pages += 1
                metrics.pages.increment()
                metrics.found.increment(by: page.voidedPurchases.count)
                published += try await publish(page.voidedPurchases, skipping: &delivered)
                guard let next = page.nextPageToken else { break }
                guard next != pageToken else {
                    return .failed("Google Play gave the same page token twice")
                }
                pageToken = next
            }
            guard
                try await store.advanceReconcilerCheckpoint(
                    name: leaseName, holder: holder, checkpoint: window.end, now: wallNow)
            else { return .leaseLost }
        } catch is CancellationError {
            return .failed("cancelled")
        } catch {
            return .failed("\(error)")
        }
        metrics.checkpointAge.record(max(0, wallNow.timeIntervalSince(window.end)))
        return .completed(
            window: window, pages: pages, published: published, logging: "reconcile: voided purchases swept",
            to: logger)
    }

    /// Publishes one page's jobs side by side and returns once every one has a delivery report (throws the first
    /// failure: the checkpoint then stays). A record without an order id or a usable token makes no job: counted,
    /// logged without its token, skipped.
    private func publish(_ records: [GooglePlayVoidedPurchase], skipping seen: inout Set<String>) async throws -> Int {
        var jobs: [ReceiptJob] = []
        for record in records {
            let type: Int? =
                if let token = record.purchaseToken, !token.isEmpty { await productType(token) } else { nil }
            do {
                let job = try GooglePlayReconcileJobs.voided(
                    record, packageName: packageName, productType: type, accountID: settings.notificationAccountID,
                    submittedAt: wallNow)
                if seen.insert(job.jobID).inserted { jobs.append(job) }
            } catch {
                metrics.jobs("unusable").increment()
                logger.warning(
                    "reconcile: a voided purchase makes no job; skipped",
                    metadata: [LogKeys.error: "\(error)"])
            }
        }
        let sink = self.sink
        try await withThrowingTaskGroup(of: Void.self) { group in
            for job in jobs { group.addTask { try await sink.publish(job) } }
            try await group.waitForAll()
        }
        metrics.jobs("published").increment(by: jobs.count)
        return jobs.count
    }
}
