import Foundation
import Messages
import Operations

/// Everything `verify-worker reconcile` is configured with: the worker's keys (the same Kafka, ledger, catalog and
/// Server API settings as `run`, so one ConfigMap serves both) plus its own `reconcile_*` keys.
public struct ReconcileConfiguration: Sendable, TableConfiguration {
    public var worker: WorkerConfiguration
    public var reconciler: ReconcilerConfiguration
    /// Share of `server_api_rate` the sweeps may spend.
    public var rateShare: Double
    /// False when `reconcile_reread_interval_s` is 0: notification sweeps only.
    public var rereadsEnabled: Bool
    /// The Google Play sweeps and re-reads (the `reconcile_google_play_*` keys).
    public var googlePlay: GooglePlayReconcileSettings
    /// Share of `google_play_minute_quota` the Google Play sweeps and re-reads may spend.
    public var googlePlayQuotaShare: Double

    /// The Google Play calls per minute the reconciler may spend: its share of the per-minute quota, at least 1.
    public var googlePlayCallsPerMinute: Int {
        max(1, Int((googlePlayQuotaShare * Double(worker.googlePlayMinuteQuota)).rounded(.down)))
    }

    /// The reconciler's own keys, after the worker's in `--help` and the reference.
    public static let ownKeys: [ConfigurationKey] = [
        .init(
            "reconcile_interval_s", default: "60",
            "Seconds between the starts of two sweeps of Apple's notification history."),
        .init(
            "reconcile_rate_share", default: "0.2",
            "Share of server_api_rate the sweeps may spend (Get Notification History requests per second), so the "
                + "workers keep the rest."),
        .init(
            "reconcile_overlap_s", default: "600",
            "How far before the checkpoint each sweep starts again (a failed delivery may be recorded a little after "
                + "it happened)."),
        .init(
            "reconcile_first_lookback_h", default: "168",
            "How far back the first sweep looks when the ledger has no checkpoint (Apple retries for ~6.5 days)."),
        .init(
            "reconcile_lease_s", default: "30",
            "The reconciler's lease in the ledger: one replica sweeps; another takes over this long after it died."),
        .init(
            "reconcile_environments", default: "production",
            "Environments whose history is swept, comma-separated: production, sandbox."),
        .init(
            "reconcile_reread_interval_s", default: "3600",
            "Seconds before the transaction history of a subscription the ledger is unsure of (billing retry, grace "
                + "period, a recent refund) is re-read again; 0 turns re-reads off. They share the sweeps' rate "
                + "budget."),
        .init(
            "reconcile_notification_account", default: NotificationJob.defaultAccountID,
            "The account_id of recovered notification jobs; must be the gateway's gateway_notification_account."),
        .init(
            "reconcile_google_play_quota_share", default: "0.05",
            "Share of google_play_minute_quota the Google Play sweeps (one call per voided-purchases page) and "
                + "re-reads (the worker's read of each re-read job) may spend per wall-clock minute, above 0 and at "
                + "most 1."),
        .init(
            "reconcile_google_play_lookback_h", default: "720",
            "How far back the first voided-purchases sweep of a Play app looks when the ledger has no checkpoint; at "
                + "most 720 (Google keeps voided purchases 30 days)."),
        .init(
            "reconcile_google_play_reread_lead_s", default: "600",
            "Seconds before a Play subscription's expiry or grace end that it is re-read (a re-read job); they come "
                + "at most once per reconcile_reread_interval_s, which at 0 turns them off."),
    ]

    public static let keys = WorkerConfiguration.keys + ownKeys

    public static let table = ConfigurationTable(command: "verify-worker reconcile", keys: keys)

    /// The reconciler's own keys as a table, for its section of docs/CONFIGURATION.md (the worker's keys are
    /// documented once, above it).
    public static let ownTable = ConfigurationTable(command: "verify-worker reconcile", keys: ownKeys)

    public init(
        _ sources: ConfigurationSources, hostName: String = ProcessInfo.processInfo.hostName,
        readFile: @escaping (String) throws -> String = { try String(contentsOfFile: $0, encoding: .utf8) }
    ) throws(ConfigurationError) {
        worker = try WorkerConfiguration(sources, hostName: hostName, readFile: readFile)
        let reader = ConfigurationReader(sources: sources, readFile: readFile)
        var reconciler = ReconcilerConfiguration()
        reconciler.interval = .seconds(try reader.int("reconcile_interval_s", in: 1...86_400))
        rateShare = try reader.double("reconcile_rate_share", in: 0.001...1)
        reconciler.requestsPerSecond = rateShare * worker.serverAPIRatePerSecond
        reconciler.overlap = .seconds(try reader.int("reconcile_overlap_s", in: 0...86_400))
        reconciler.firstLookBack = .seconds(3_600 * (try reader.int("reconcile_first_lookback_h", in: 1...4_320)))
        reconciler.leaseDuration = .seconds(try reader.int("reconcile_lease_s", in: 5...3_600))
        var environments: [AppleEnvironment] = []
        for name in reader.list("reconcile_environments") {
            switch name.lowercased() {
            case "production": environments.append(.production)
            case "sandbox": environments.append(.sandbox)
            default:
                throw ConfigurationError(
                    key: "reconcile_environments", problem: "\(name): expected production or sandbox")
            }
        }
        guard !environments.isEmpty else {
            throw ConfigurationError(key: "reconcile_environments", problem: "name at least one environment")
        }
        reconciler.environments = environments
        reconciler.notificationAccountID = try reader.string("reconcile_notification_account")
        let rereadInterval = try reader.int("reconcile_reread_interval_s", in: 0...2_592_000)
        rereadsEnabled = rereadInterval > 0
        reconciler.rereadInterval = .seconds(max(rereadInterval, 1))
        self.reconciler = reconciler
        var googlePlay = GooglePlayReconcileSettings()
        googlePlayQuotaShare = try reader.double("reconcile_google_play_quota_share", in: 0.0001...1)
        googlePlay.firstLookBack = .seconds(3_600 * (try reader.int("reconcile_google_play_lookback_h", in: 1...720)))
        googlePlay.rereadLead = .seconds(try reader.int("reconcile_google_play_reread_lead_s", in: 0...86_400))
        googlePlay.overlap = reconciler.overlap
        googlePlay.leaseDuration = reconciler.leaseDuration
        googlePlay.rereadInterval = reconciler.rereadInterval
        self.googlePlay = googlePlay
        // Without a key there is no history to read: refused at start rather than idling. With apps in the catalog
        // each app names its own key; the start refuses an app without one.
        // A catalog of Play apps only needs no Server API key: there is only Google to sweep.
        guard
            worker.serverAPIKey != nil
                || WorkerConfiguration.catalogListsApps(worker.catalogFile, readFile: readFile)
                || Self.catalogIsPlayOnly(worker.catalogFile, readFile: readFile)
        else {
            throw ConfigurationError(
                key: "server_api_key",
                problem: "required by reconcile (Get Notification History is an App Store Server API call)")
        }
    }
}

extension ReconcileConfiguration {
    /// Whether the catalog at `path` sells on Google Play only (no App Store bundle id, at least one Play app).
    static func catalogIsPlayOnly(_ path: String, readFile: (String) throws -> String) -> Bool {
        guard let text = try? readFile(path), let catalog = try? Catalog.load(json: Data(text.utf8)) else {
            return false
        }
        return catalog.bundleIDs.isEmpty && catalog.apps.isEmpty && !catalog.playApps.isEmpty
    }
}
