import CodedErrors
import Foundation
import Hummingbird
import Logging
import Operations
import Synchronization
import _CryptoExtras

/// How a `PlaySimulator` runs. Each key with a flag is set by `verify-worker play-sim`.
public struct PlaySimulatorConfiguration: Sendable {
    /// Interface to listen on (`--host`). Default: `127.0.0.1`.
    public var host: String = "127.0.0.1"
    /// Port to listen on; 0 picks a free one, reported by `waitUntilReady()` (`--port`). Default: 0.
    public var port: Int = 0
    /// The clock of every date the simulator writes or judges. Default: the system clock at real speed
    /// (`--time-scale` speeds it up).
    public var clock = PlaySimulatorClock()
    /// How long an access token lives, in seconds of the simulator's clock (`--access-token-lifetime`), 1 to
    /// 31536000. Default: 3599, Google's `expires_in`.
    public var accessTokenLifetime: TimeInterval = 3599
    /// Licensing keys by package name, instead of a fresh RSA-2048 key made at the package's first use; lets
    /// tests share keys. Default: empty.
    public var licensingKeys: [String: _RSA.Signing.PrivateKey] = [:]
    /// Random numbers for fault ratios. Default: the system generator.
    public var random: any PlayRandomSource = PlaySystemRandom()
    /// Real-time developer notifications: the push endpoint, subscription, OIDC token and retry policy.
    /// Default: no endpoint (nothing is pushed).
    public var push = PlayPushConfiguration()
    /// The largest request body accepted (bytes). Default: 1 MiB.
    public var maximumBodyBytes: Int = 1 << 20
    /// The logger. Default: label `play-sim`, level `notice`.
    public var logger: Logger = {
        var logger = Logger(label: "play-sim")
        logger.logLevel = .notice
        return logger
    }()

    public init() {}
}

/// A faithful Google Play for tests, benchmarks and the demo: Google's OAuth token endpoint for the service
/// accounts it issues, the Android Publisher API's purchase reads, acknowledgements and consumption for the
/// purchases it mints (each with its signed purchase data), faults on demand, and counts of every call. See
/// docs/PLAY-SIMULATOR.md for the HTTP interface.
///
/// Use in-process: `let task = Task { try await simulator.run() }`, then `try await simulator.waitUntilReady()` for
/// the bound port; cancel the task to stop.
public final class PlaySimulator: Sendable {
    public let configuration: PlaySimulatorConfiguration
    public let stats = PlaySimulatorStats()
    public var clock: PlaySimulatorClock { configuration.clock }
    let registry = PlayPurchaseRegistry()
    let oauth: PlayOAuthService
    let faults: PlayFaultInjector
    let licensingKeys: PlayLicensingKeys
    let pushes: PlayPushDispatcher
    let voided = PlayVoidedPurchases()
    let reviews = PlayRefundReviews()
    private let readiness = PortReadiness()

    public init(configuration: PlaySimulatorConfiguration = .init()) {
        self.configuration = configuration
        // One second to one year: `expires_in` is written as a whole number of seconds.
        let lifetime = configuration.accessTokenLifetime
        oauth = PlayOAuthService(
            clock: configuration.clock,
            accessTokenLifetime: lifetime.isFinite ? min(max(1, lifetime), 31_536_000) : 3599)
        faults = PlayFaultInjector(random: configuration.random, clock: configuration.clock)
        licensingKeys = PlayLicensingKeys(preset: configuration.licensingKeys)
        pushes = PlayPushDispatcher(
            configuration: configuration.push, clock: configuration.clock, random: configuration.random)
    }

    // MARK: Running

    /// Serves until the task is cancelled.
    public func run() async throws {
        let readiness = self.readiness
        let application = Application(
            router: makeRouter(),
            configuration: .init(
                address: .hostname(configuration.host, port: configuration.port), serverName: nil, backlog: 256),
            onServerRunning: { channel in readiness.ready(port: channel.localAddress?.port ?? 0) },
            logger: configuration.logger)
        try await readiness.serve(stoppedEarly: PlaySimulatorError(.server, "the simulator stopped before it listened"))
        {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await application.run() }
                // Pushes are delivered on a task of their own; on a manual clock the test calls `deliverDue()`.
                if !self.clock.isManual {
                    group.addTask {
                        while !Task.isCancelled {
                            await self.pushes.deliverDue()
                            try await Task.sleep(for: self.pushes.configuration.deliveryInterval)
                        }
                    }
                }
                try await group.next()
                group.cancelAll()
            }
        }
    }

    /// The bound port, once the server listens. Throws if it failed to start.
    public func waitUntilReady() async throws -> Int {
        try await readiness.wait()
    }

    /// The token URI service accounts carry: this simulator's `/token` (the configured host and the bound port).
    public var tokenURI: String {
        "http://\(configuration.host):\(readiness.port ?? configuration.port)/token"
    }

    // MARK: In-process operations (also behind /sim/*)

    /// Issues a service account with a fresh RSA-2048 key (`key` to reuse one). `packages`: the apps it may read
    /// (empty: all). Call after `waitUntilReady()`, so that its `token_uri` names the bound port.
    public func issueServiceAccount(
        clientEmail: String? = nil, packages: Set<String> = [], key: _RSA.Signing.PrivateKey? = nil
    ) throws -> PlayServiceAccount {
        try oauth.issue(clientEmail: clientEmail, packages: packages, tokenURI: tokenURI, key: key)
    }

    /// The package's licensing key as the Play Console shows it (base64 SubjectPublicKeyInfo).
    public func licensingKey(packageName: String) throws -> String {
        guard PlayIdentifiers.isName(packageName) else {
            throw PlaySimulatorError(.invalidRequest, "package_name must be 1-200 of [A-Za-z0-9._-]")
        }
        return try licensingKeys.publicKeyBase64(for: packageName)
    }

    /// Mints a purchase, and returns it with the purchase data Play Billing would hand the app; a completed one is
    /// announced (`SUBSCRIPTION_PURCHASED`, `ONE_TIME_PRODUCT_PURCHASED`).
    public func mint(
        _ request: PlayMintRequest, push: PlayPushOptions = .init()
    ) throws -> (purchase: PlayPurchase, signed: PlaySignedPurchase) {
        let now = clock.now()
        let purchase = try registry.mint(request, now: now)
        let signed = try PlayAPIAnswers.sign(purchase, keys: licensingKeys)
        if purchase.completedAt != nil {
            pushes.publish(
                PlayDeveloperNotification(
                    packageName: purchase.packageName, eventTime: now, content: Self.purchasedNotification(purchase)),
                options: push)
        }
        return (purchase, signed)
    }

    /// Renews a subscription: same token, the next order id (`<orderId>..n`), the period extended from the later of
    /// its end and now.
    public func renew(purchaseToken: String) throws -> PlayPurchase {
        try lifecycle(purchaseToken, .renew).purchase
    }

    /// The user turns auto-renew off: the subscription stays until its period's end (`SUBSCRIPTION_STATE_CANCELED`).
    public func cancelSubscription(purchaseToken: String) throws -> PlayPurchase {
        try lifecycle(purchaseToken, .cancel).purchase
    }

    /// A pending purchase's payment arrives: it gets its order id now, and its three days to be acknowledged start.
    public func completePending(purchaseToken: String) throws -> (purchase: PlayPurchase, signed: PlaySignedPurchase) {
        let result = try lifecycle(purchaseToken, .pendingComplete)
        guard let signed = result.signed else { throw PlaySimulatorError(.server, "the purchase was not signed") }
        return (result.purchase, signed)
    }

    /// A pending purchase's payment never arrives.
    public func cancelPending(purchaseToken: String) throws -> PlayPurchase {
        try lifecycle(purchaseToken, .pendingCancel).purchase
    }

    /// Replaces the fault plan.
    public func setFaults(_ plan: PlayFaultPlan) throws { try faults.set(plan) }

    /// A purchase the simulator minted.
    public func purchase(_ token: String) -> PlayPurchase? { registry.purchase(token) }

    /// The simulator's truth about a purchase (`GET /sim/purchases/{token}`).
    public func truth(_ token: String) -> [String: Any]? {
        registry.purchase(token).map { PlayAPIAnswers.truth($0, now: clock.now()) }
    }
}
