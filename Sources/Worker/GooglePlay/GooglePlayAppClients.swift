import Foundation
import GooglePlay
import GooglePlayClients
import Ledger
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

/// Each Play app's Developer API client, by package name, as `run` builds them from the catalog: every app's service
/// account read at start, and one call gate for Google (its per-endpoint limits and this worker's share of the daily
/// and per-minute quotas) in front of all of them. The purchase reads of ``GooglePlayStore`` and the acknowledgements
/// of ``GooglePlayFollowUps`` go through them.
public struct GooglePlayAppClients: GooglePlayPurchaseCalls {
    public let clients: [String: GooglePlayAPIClient<ContinuousClock>]
    public let gate: AppleCallGate<ContinuousClock>

    /// Reads every Play app's service account. A file that cannot be read, or holds no key, is a
    /// ``PlayConfigurationError`` naming the app and the file, never the file's content.
    public static func load(
        catalog: Catalog, settings: GooglePlayAPISettings, transport: any HTTPTransport, logger: Logger
    ) throws(PlayConfigurationError) -> GooglePlayAppClients {
        let gate = AppleCallGate(
            configuration: .googlePlay(
                workerID: settings.workerID, dailyQuota: settings.dailyQuota, minuteQuota: settings.minuteQuota),
            clock: ContinuousClock())
        var clients: [String: GooglePlayAPIClient<ContinuousClock>] = [:]
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
        return GooglePlayAppClients(clients: clients, gate: gate)
    }

    public func acknowledge(
        packageName: String, productID: String, token: String, subscription: Bool, deadline: ContinuousClock.Instant
    ) async -> GooglePlayOutcome<GooglePlayAccepted> {
        guard let client = clients[packageName] else { return Self.noClient(packageName) }
        return await client.acknowledge(
            packageName: packageName, productID: productID, token: token, subscription: subscription, deadline: deadline
        )
    }

    public func consume(
        packageName: String, productID: String, token: String, deadline: ContinuousClock.Instant
    ) async -> GooglePlayOutcome<GooglePlayAccepted> {
        guard let client = clients[packageName] else { return Self.noClient(packageName) }
        return await client.consume(packageName: packageName, productID: productID, token: token, deadline: deadline)
    }

    public func isDone(
        packageName: String, token: String, subscription: Bool, consumed: Bool, deadline: ContinuousClock.Instant
    ) async -> Bool {
        guard let client = clients[packageName] else { return false }
        return await client.isDone(
            packageName: packageName, token: token, subscription: subscription, consumed: consumed, deadline: deadline)
    }

    public func reviewRefund(
        packageName: String, orderID: String, review: GooglePlayRefundReview, deadline: ContinuousClock.Instant
    ) async -> GooglePlayOutcome<GooglePlayAccepted> {
        guard let client = clients[packageName] else { return Self.noClient(packageName) }
        return await client.reviewRefund(packageName: packageName, orderID: orderID, review: review, deadline: deadline)
    }

    /// A call for an app this worker has no service account for (the catalog changed since the grant): put back
    /// for a worker that has one, never failed.
    static func noClient<Answer>(_ packageName: String) -> GooglePlayOutcome<Answer> {
        .configurationRefused(
            GooglePlayAPIError(code: .accessDenied, detail: "no service account for \(packageName) in the catalog"))
    }
}

extension GooglePlayStore {
    /// Google Play for the catalog's Play apps: every app's licensing key (local checks) read now, and `clients` to
    /// read what the local checks let through. A licensing key file that cannot be read, or holds no key, is a
    /// ``PlayConfigurationError`` naming the app and the file, never the file's content.
    public static func load(
        catalog: Catalog, clients: GooglePlayAppClients, configurationWatch: StoreConfigurationWatch,
        jobDeadline: Duration, logger: Logger, purchaseClaims: (any SubscriptionRereadStore)? = nil
    ) throws(PlayConfigurationError) -> GooglePlayStore {
        GooglePlayStore(
            reader: PlayPurchaseReader(licensingKeys: try PlayLicensingKeys.load(catalog)),
            clients: clients.clients.mapValues { $0 as any GooglePlayPurchaseReads },
            subscriptionProducts: Set(catalog.playProducts.values.filter { $0.type == .autoRenewable }.map(\.id)),
            configurationWatch: configurationWatch, jobDeadline: jobDeadline,
            stageLimit: clients.gate.storeStageLimit, logger: logger, purchaseClaims: purchaseClaims)
    }
}
