import Foundation
import Ledger
import Logging
import Messages
import Metrics
import Observability
import RateLimiter

/// What the Play re-reads need from the ledger: their lease, the Play subscriptions to re-read, the record of re-reads.
public typealias GooglePlayRereadStore = ReconcilerStateStore & PlaySubscriptionRereadStore & SubscriptionRereadStore

/// Re-reads the Play subscriptions whose state the ledger may hold wrongly soon: each subscription whose expiry or
/// grace end is within ``GooglePlayReconcileSettings/rereadLead`` (or passed less than
/// ``GooglePlayReconcileSettings/rereadAfter`` ago) gets a plain re-read job (a `google_play_notification` without
/// `notification`), which a worker answers by reading Google and applying what it says: a renewal the ledger missed
/// extends, a hold or an expiry ends the entitlement. At most one per subscription per
/// ``GooglePlayReconcileSettings/rereadInterval``, each one call of the quota share (the worker's read).
///
/// The ledger holds the expiry and the grace end of a Play claim; until it also holds Play's states (hold, pause),
/// those are found by their dates: an account hold or a pause starts when the ledger's expiry passes.
public final class GooglePlayRereads<Clock: GateClock>: Sendable where Clock.Instant: Sendable {
    /// How a pass ended.
    public enum Result: Sendable, Hashable {
        case completed(published: Int)
        /// Another replica holds the re-reads' lease.
        case notLeader
        case failed(String)
    }

    public let packages: [String]
    let settings: GooglePlayReconcileSettings
    let store: any GooglePlayRereadStore
    let sink: any RecoveredJobSink
    let quota: GooglePlayQuotaShare<Clock>
    let clock: Clock
    let holder: String
    let logger: Logger
    let metrics: [String: GooglePlayReconcileMetrics]

    public init(
        packages: [String], settings: GooglePlayReconcileSettings, store: any GooglePlayRereadStore,
        sink: any RecoveredJobSink, quota: GooglePlayQuotaShare<Clock>, clock: Clock, holder: String, logger: Logger,
        metricsFactory: (any MetricsFactory)? = nil
    ) {
        self.packages = packages
        self.settings = settings
        self.store = store
        self.sink = sink
        self.quota = quota
        self.clock = clock
        self.holder = holder
        self.logger = logger
        let factory = metricsFactory ?? MetricsSystem.factory
        metrics = Dictionary(
            packages.map { ($0, GooglePlayReconcileMetrics(app: $0, factory: factory)) },
            uniquingKeysWith: { first, _ in first })
    }

    var wallNow: Date { Date(timeIntervalSince1970: Double(clock.unixMillisecondsNow) / 1000) }

    /// The date the ledger's state of `subscription` changes next, and its name in the job id: the grace end once
    /// the expiry has passed (a grace period), else the expiry.
    static func change(of subscription: UnsurePlaySubscription, now: Date) -> (state: String, at: Date)? {
        if let grace = subscription.gracePeriodExpiresDate, let expiry = subscription.expiresDate, grace > expiry,
            expiry <= now
        {
            return ("grace_period", grace)
        }
        if let expiry = subscription.expiresDate { return ("expiry", expiry) }
        return subscription.gracePeriodExpiresDate.map { ("grace_period", $0) }
    }

    /// One pass: lists the subscriptions due and publishes a re-read job for each, recorded once delivered.
    public func pass() async -> Result {
        guard !packages.isEmpty else { return .completed(published: 0) }
        let now = wallNow
        let due: [UnsurePlaySubscription]
        do {
            guard
                try await store.acquireReconcilerLease(
                    name: GooglePlayReconcileSettings.rereadLeaseName, holder: holder, now: now,
                    duration: settings.leaseDuration) != nil
            else { return .notLeader }
            due = try await store.unsurePlaySubscriptions(
                packages: packages, from: now.addingTimeInterval(-settings.rereadAfter.secondsValue),
                to: now.addingTimeInterval(settings.rereadLead.secondsValue),
                rereadBefore: now.addingTimeInterval(-settings.rereadInterval.secondsValue), limit: settings.rereadBatch
            )
        } catch {
            return .failed("ledger: \(error)")
        }
        var published = 0
        for subscription in due {
            guard let change = Self.change(of: subscription, now: now) else { continue }
            do {
                let job = try GooglePlayReconcileJobs.reread(
                    packageName: subscription.packageName, purchaseToken: subscription.purchaseToken,
                    expiresDate: subscription.expiresDate ?? change.at, state: change.state,
                    accountID: settings.notificationAccountID, submittedAt: wallNow)
                // The worker's read of the token is a call of the share: taken before the job exists.
                try await quota.spend()
                metrics[subscription.packageName]?.quotaSpent("reread").increment()
                try await sink.publish(job)
                try await store.recordSubscriptionReread(
                    originalTransactionID: subscription.purchaseToken, revision: nil, at: wallNow)
                metrics[subscription.packageName]?.rereads.increment()
                published += 1
            } catch is CancellationError {
                return .failed("cancelled")
            } catch let error as MessageError {
                // A token the contract refuses (it came from the ledger, so it was once accepted): skipped, logged
                // without it.
                logger.warning(
                    "reconcile: a Play subscription makes no re-read job; skipped",
                    metadata: [LogKeys.error: "\(error)"])
            } catch {
                return .failed("\(error)")
            }
        }
        return .completed(published: published)
    }
}
