import Foundation
import Messages

/// Settings of ``NotificationReconciler`` (the `reconcile_*` keys of docs/CONFIGURATION.md).
public struct ReconcilerConfiguration: Sendable {
    /// Environments whose history is swept, in order. Default: production.
    public var environments: [AppleEnvironment] = [.production]
    /// Time between the starts of two sweeps. Default: 60 s.
    public var interval: Duration = .seconds(60)
    /// How far back the first sweep looks, when the ledger has no checkpoint yet. Default: 7 days (Apple retries a
    /// notification for about 6.5 days, so a notification older than that was either delivered or lost for good).
    public var firstLookBack: Duration = .seconds(7 * 86_400)
    /// How far before the checkpoint each sweep starts again: a notification whose first attempt failed is listed
    /// under the time of that attempt, which may be recorded by Apple a little after it happened. Default: 10 min.
    public var overlap: Duration = .seconds(600)
    /// Requests per second to Get Notification History: a share of the Server API limit (default 20% of Apple's
    /// 50/s), so the workers' own Server API calls keep the rest.
    public var requestsPerSecond: Double = 10
    /// Length of the lease; renewed before each page, so at least a few pages' worth. Default: 30 s.
    public var leaseDuration: Duration = .seconds(30)
    /// The `account_id` of notification jobs: must be the gateway's (`gateway_notification_account`), or a
    /// recovered notification that did arrive would be another job under the same id. Default: `apple-notification`.
    public var notificationAccountID: String = NotificationJob.defaultAccountID
    /// The wait after Apple answered 429 or 5xx without a `Retry-After`: doubled per failure, from this, at most 64×.
    public var backoff: Duration = .seconds(1)
    /// How often one unsure subscription's transaction history is re-read at most. Default: 1 hour.
    public var rereadInterval: Duration = .seconds(3_600)
    /// How long after its period ended a subscription stays unsure: Apple's billing retry lasts up to 60 days.
    public var rereadWindow: Duration = .seconds(60 * 86_400)
    /// Subscriptions re-read per sweep at most, so a backlog never holds the lease for long. Default: 100.
    public var rereadBatch = 100
    /// Pages of one subscription's history read per re-read at most (Apple gives 20 transactions a page).
    public var rereadPages = 10
    /// The name of the lease and checkpoint row in the ledger. Default: `notification-history`; with several apps in
    /// the catalog, `notification-history/<bundle id>`, one row per app.
    public var name = "notification-history"
    /// The app this reconciler sweeps, when the catalog lists several: its metrics carry it as the `app` label.
    public var app: String?

    public init() {}
}
