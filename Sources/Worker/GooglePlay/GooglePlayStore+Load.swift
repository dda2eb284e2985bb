import Foundation
import GooglePlay
import GooglePlayClients
import Logging
import Messages
import RateLimiter
import StoreHTTP

/// Where and how much a worker asks Google (the `google_play_…` settings).
public struct GooglePlayAPISettings: Sendable {
    public var api: GooglePlayAPIConfiguration
    /// This worker's share of the Developer API's quotas (``QuotaBudget``).
    public var dailyQuota: Int
    public var minuteQuota: Int
    /// Names the worker in the gate's metrics.
    public var workerID: String

    public init(
        api: GooglePlayAPIConfiguration = GooglePlayAPIConfiguration(),
        dailyQuota: Int = QuotaBudget.googlePlayDailyQuota, minuteQuota: Int = QuotaBudget.googlePlayMinuteQuota,
        workerID: String = "worker"
    ) {
        self.api = api
        self.dailyQuota = dailyQuota
        self.minuteQuota = minuteQuota
        self.workerID = workerID
    }
}

extension GooglePlayStore {
    /// Google Play for the catalog's Play apps: every app's licensing key (local checks) and service account (its
    /// Developer API client) read now, and one call gate for Google (its per-endpoint limits and this worker's share
    /// of the daily and per-minute quotas). A file that cannot be read, or holds no key, is a
    /// ``PlayConfigurationError`` naming the app and the file, never the file's content.
    public static func load(
        catalog: Catalog, settings: GooglePlayAPISettings, transport: any HTTPTransport,
        configurationWatch: StoreConfigurationWatch, jobDeadline: Duration, logger: Logger
    ) throws(PlayConfigurationError) -> GooglePlayStore {
        let keys = try PlayLicensingKeys.load(catalog)
        let gate = AppleCallGate(
            configuration: .googlePlay(
                workerID: settings.workerID, dailyQuota: settings.dailyQuota, minuteQuota: settings.minuteQuota),
            clock: ContinuousClock())
        var clients: [String: any GooglePlayPurchaseReads] = [:]
        for (index, app) in catalog.playApps.enumerated() {
            let account: GooglePlayServiceAccount
            do {
                account = try GooglePlayServiceAccount(contentsOfFile: app.serviceAccountKeyFile)
            } catch {
                throw PlayConfigurationError(
                    "play_apps[\(index)] (\(app.packageName)).service_account_key_file: \(error.description)")
            }
            let tokens = GooglePlayAccessTokens(
                account: account, tokenURL: settings.api.tokenURL, transport: transport,
                admission: GooglePlayAccessTokens.admission(through: gate))
            clients[app.packageName] = GooglePlayAPIClient(
                configuration: settings.api, transport: transport, tokens: tokens, gate: gate,
                clock: ContinuousClock(), retryPolicy: RetryPolicy(maximumAttempts: 50), logger: logger)
        }
        return GooglePlayStore(
            reader: PlayPurchaseReader(licensingKeys: keys), clients: clients,
            subscriptionProducts: Set(catalog.playProducts.values.filter { $0.type == .autoRenewable }.map(\.id)),
            configurationWatch: configurationWatch, jobDeadline: jobDeadline,
            stageLimit: max(256, 2 * gate.configuration.concurrency.maximum), logger: logger)
    }
}
