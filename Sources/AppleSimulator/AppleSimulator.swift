import CodedErrors
import Crypto
import Foundation
import Hummingbird
import Logging
import Messages
import Operations
import Synchronization

/// How an `AppleSimulator` runs. Each key has a flag of `verify-worker apple-sim`.
public struct AppleSimulatorConfiguration: Sendable {
    /// Interface to listen on (`--host`). Default: `127.0.0.1`.
    public var host: String = "127.0.0.1"
    /// Port to listen on; 0 picks a free one, reported by `waitUntilReady()` (`--port`). Default: 0.
    public var port: Int = 0
    /// Where keys, certificates and minted transactions persist across restarts (`--state-dir`); nil keeps
    /// everything in memory and issues a fresh PKI per process. Default: nil.
    public var stateDirectory: URL?
    /// The app's shared secret; a verifyReceipt `password` that differs answers 21004
    /// (`--shared-secret-file`, `VERIFY_SIM_SHARED_SECRET`). Never logged. Default: nil (any password).
    public var sharedSecret: String?
    /// The `appAppleId` in App Store Server API answers (`--app-apple-id`). Default: 1234567890.
    public var appAppleId: Int64 = 1_234_567_890
    /// Apps with their own credentials, by bundle id: a receipt of a listed app needs that app's shared
    /// secret, a Server API token must carry a listed app's `bid` (and that app's key signs it, when one is given),
    /// and a token of one app asking for another app's transaction gets Apple's 404 4040010. Default: empty (one
    /// app, configured by the keys above).
    public var apps: [SimulatedApp] = []
    /// When set, the signature of Server API bearer tokens is verified with this key
    /// (`--api-public-key-file`, PEM). Default: nil (structure and claims only).
    public var apiPublicKey: P256.Signing.PublicKey?
    /// A PKI to use instead of issuing one, when there is no state directory; lets tests share one PKI, since
    /// three RSA-2048 key generations are slow in debug builds. Default: nil (issue a fresh one).
    public var pki: SimulatorPKI?
    /// How many receipts (and, separately, exact request bodies) the verifyReceipt caches hold; each empties
    /// when full. About 11 KB per entry and cache for a subscription receipt. Default: 4096.
    public var maximumVerifyCacheEntries: Int = 4096
    /// The largest request body accepted (bytes). Default: 8 MiB.
    public var maximumBodyBytes: Int = 8 << 20
    /// Random numbers for fault injection. Default: the system generator.
    public var random: any SimulatorRandomSource = SystemRandomSource()
    /// The clock for dates in receipts and fault durations. Default: the system clock.
    public var now: @Sendable () -> Date = { Date() }
    /// Where App Store Server Notifications V2 are posted (`--notification-url`; `POST /sim/notifications/target`
    /// changes it at run time). Nil sends none, as Apple does without a URL. Default: nil.
    public var notificationURL: String?
    /// How much faster than Apple's the notification retry schedule runs (`--notification-time-scale`): 3600 turns
    /// the 1, 12, 24, 48 and 72 hours into as many seconds. Default: 1 (Apple's hours).
    public var notificationTimeScale: Double = 1
    /// Posts notifications. Default: the project's curl engine, created at the first send.
    public var notificationTransport: any NotificationTransport = CurlNotificationTransport()
    /// Runs notification attempts later (first attempts, delays, retries). Default: a sleeping task per attempt.
    public var notificationScheduler: any NotificationScheduler = TaskNotificationScheduler()
    /// The logger. Default: label `apple-sim`, level `notice`.
    public var logger: Logger = {
        var logger = Logger(label: "apple-sim")
        logger.logLevel = .notice
        return logger
    }()

    public init() {}

    /// Sets `apiPublicKey` from a PEM P-256 public key.
    public mutating func setAPIPublicKey(pem: String) throws {
        apiPublicKey = try P256.Signing.PublicKey(pemRepresentation: pem)
    }
}

/// A faithful Apple for tests, benchmarks and the demo: mints receipts signed by its own test PKI, answers
/// verifyReceipt and the App Store Server API for them, injects faults on demand and counts every call.
/// See docs/APPLE-SIMULATOR.md for the HTTP interface.
///
/// Use in-process: `let task = Task { try await simulator.run() }`, then `try await simulator.waitUntilReady()`
/// for the bound port; cancel the task to stop.
public final class AppleSimulator: Sendable {
    public let configuration: AppleSimulatorConfiguration
    public let pki: SimulatorPKI
    public let stats = SimulatorStats()
    let registry: TransactionRegistry
    let faults: FaultInjector
    let verifyReceipt: VerifyReceiptService
    let serverAPI: ServerAPIService
    let notifications: NotificationDispatcher
    private let readiness = PortReadiness()

    public init(configuration: AppleSimulatorConfiguration = .init()) throws {
        self.configuration = configuration
        let now = configuration.now
        if let directory = configuration.stateDirectory {
            pki = try SimulatorPKI.loadOrGenerate(directory: directory, now: now())
            registry = try TransactionRegistry(journalURL: directory.appendingPathComponent("transactions.jsonl"))
        } else {
            pki = try configuration.pki ?? SimulatorPKI.generate(now: now())
            registry = try TransactionRegistry(journalURL: nil)
        }
        faults = FaultInjector(random: configuration.random, now: now)
        verifyReceipt = VerifyReceiptService(
            pki: pki, registry: registry, sharedSecret: configuration.sharedSecret, apps: configuration.apps,
            maximumCacheEntries: max(1, configuration.maximumVerifyCacheEntries), now: now)
        serverAPI = ServerAPIService(
            pki: pki, registry: registry, appAppleId: configuration.appAppleId,
            apiPublicKey: configuration.apiPublicKey, apps: configuration.apps, now: now)
        notifications = NotificationDispatcher(
            target: configuration.notificationURL, pki: pki, appAppleId: configuration.appAppleId,
            appAppleIds: Dictionary(
                configuration.apps.map { ($0.bundleId, $0.appAppleId) }, uniquingKeysWith: { first, _ in first }),
            timeScale: configuration.notificationTimeScale, faults: faults, stats: stats,
            transport: configuration.notificationTransport, scheduler: configuration.notificationScheduler, now: now)
    }

    // MARK: Running

    /// Serves until the task is cancelled.
    public func run() async throws {
        try await readiness.serve(
            stoppedEarly: AppleSimulatorError(.server, "the simulator stopped before it listened")
        ) {
            try await makeApplication().run()
        }
    }

    /// The bound port, once the server listens. Throws if it failed to start.
    public func waitUntilReady() async throws -> Int {
        try await readiness.wait()
    }

    private func makeApplication() -> some ApplicationProtocol {
        let readiness = self.readiness
        return Application(
            router: makeRouter(),
            configuration: .init(
                address: .hostname(configuration.host, port: configuration.port), serverName: nil, backlog: 1024),
            onServerRunning: { channel in
                readiness.ready(port: channel.localAddress?.port ?? 0)
            },
            logger: configuration.logger)
    }

    // MARK: In-process operations (also behind /sim/*)

    /// Mints one receipt. Ids must be Apple-like (letters, digits, `.`, `-`, `_`; at most 200 characters).
    public func mint(_ request: MintRequest) throws -> MintedReceipt {
        for (name, value) in [("bundle_id", request.bundleId), ("product_id", request.productId)] {
            guard Self.isIdentifier(value) else {
                throw AppleSimulatorError(.invalidRequest, "\(name) must be 1-200 of [A-Za-z0-9._-]")
            }
        }
        if let original = request.originalTransactionId, !Self.isIdentifier(original) {
            throw AppleSimulatorError(.invalidRequest, "original_transaction_id must be 1-200 of [A-Za-z0-9._-]")
        }
        guard (1...1000).contains(request.quantity) else {
            throw AppleSimulatorError(.invalidRequest, "quantity must be 1...1000")
        }
        // StoreKit's appAccountToken came with iOS 7's receipts: an iOS 6 transaction receipt, and Apple's answer
        // for one, carry none, so a token asked for here could never be checked by anyone.
        if request.format == .transactionReceipt, request.appAccountToken != nil {
            throw AppleSimulatorError(
                .invalidRequest, "app_account_token: an iOS 6 transaction receipt carries no appAccountToken")
        }
        let nowMs = AppleDates.nowMs(configuration.now())
        let isRenewal = request.originalTransactionId.map { !registry.family($0).isEmpty } ?? false
        let transaction = try registry.mint(request, nowMs: nowMs)
        try notifyPurchase(transaction, isRenewal: isRenewal)
        let receipt: String
        switch request.format {
        case .appReceipt:
            // A receipt refreshed after a renewal lists the whole family, as Apple's do.
            let purchases =
                request.originalTransactionId == nil
                ? [transaction] : registry.family(transaction.originalTransactionId)
            var opaque = [UInt8](repeating: 0, count: 16)
            for index in opaque.indices { opaque[index] = UInt8.random(in: 0...255) }
            let appReceipt = SimulatedAppReceipt(
                environment: request.environment, bundleId: request.bundleId, appVersion: "1",
                originalAppVersion: "1.0", creationDateMs: nowMs, opaque: opaque,
                sha1Hash: Array(Insecure.SHA1.hash(data: opaque + Array(request.bundleId.utf8))),
                purchases: purchases)
            receipt = Data(try appReceipt.signedDER(pki: pki)).base64EncodedString()
        case .transactionReceipt:
            receipt = try SimulatedTransactionReceipt.encode(transaction, pki: pki)
        case .signedTransaction:
            receipt = try SimulatedJWS.signTransaction(transaction, pki: pki, nowMs: nowMs)
        }
        return MintedReceipt(receipt: receipt, transaction: transaction)
    }

    /// Marks a minted transaction refunded (revoked) at `date` and sends REFUND: `REFUND_FULL`, or with
    /// `percentage` (milliunits, 1...100000) `REFUND_PRORATED` with that `revocationPercentage`; either way the
    /// transaction is revoked at `date`, as Apple's are. The family members it was shared with lose access too: each
    /// member's transaction is revoked (`FAMILY_REVOKE`, the purchaser's reason) and gets its own REVOKE. Nil when
    /// the id is unknown.
    public func refund(
        transactionId: String, at date: Date? = nil, reason: Int = 0, percentage: Int? = nil
    ) throws -> SimulatedTransaction? {
        if let percentage, !(1...100_000).contains(percentage) {
            throw AppleSimulatorError(.invalidRequest, "percentage must be 1...100000 (milliunits)")
        }
        let atMs = AppleDates.nowMs(date ?? configuration.now())
        let reason = reason == 1 ? 1 : 0
        guard
            let refunded = try registry.revoke(
                transactionId, atMs: atMs, reason: reason,
                type: percentage == nil ? "REFUND_FULL" : "REFUND_PRORATED", percentage: percentage)
        else { return nil }
        try notify("REFUND", nil, about: refunded)
        for member in registry.members(sharedFrom: transactionId) where member.revocationDateMs == nil {
            if let revoked = try registry.revoke(
                member.transactionId, atMs: atMs, reason: reason, type: "FAMILY_REVOKE")
            {
                try notify("REVOKE", nil, about: revoked)
            }
        }
        return refunded
    }

    /// Replaces the fault plan.
    public func setFaults(_ plan: FaultPlan) { faults.set(plan) }

    /// A transaction the simulator minted.
    public func transaction(_ id: String) -> SimulatedTransaction? { registry.transaction(id) }

    static func isIdentifier(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 200
            && text.utf8.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
            }
    }
}
/// One app the simulator acts as Apple for, with its own credentials (``AppleSimulatorConfiguration/apps``).
public struct SimulatedApp: Sendable {
    public var bundleId: String
    /// The `appAppleId` in this app's answers and notifications.
    public var appAppleId: Int64
    /// This app's shared secret; a verifyReceipt request for its receipt must send it. Nil: any password.
    public var sharedSecret: String?
    /// Verifies the signature of this app's Server API tokens. Nil: the configuration's `apiPublicKey`.
    public var apiPublicKey: P256.Signing.PublicKey?

    public init(
        bundleId: String, appAppleId: Int64, sharedSecret: String? = nil, apiPublicKey: P256.Signing.PublicKey? = nil
    ) {
        self.bundleId = bundleId
        self.appAppleId = appAppleId
        self.sharedSecret = sharedSecret
        self.apiPublicKey = apiPublicKey
    }
}

extension SimulatedApp {
    /// The apps a worker's catalog lists, as the simulator plays Apple for them (`apple-sim --apps-catalog`): each
    /// app's shared secret from its file, its API public key derived from its private key file (Apple holds the
    /// public half), and its `app_apple_id` or, when absent, `defaultAppAppleId`. Errors name the file, never its
    /// content.
    public static func apps(
        of catalog: Catalog, defaultAppAppleId: Int64,
        readFile: (String) throws -> String = { try String(contentsOfFile: $0, encoding: .utf8) }
    ) throws(AppleSimulatorError) -> [SimulatedApp] {
        var apps: [SimulatedApp] = []
        for entry in catalog.apps {
            var app = SimulatedApp(bundleId: entry.bundleID, appAppleId: entry.appAppleID ?? defaultAppAppleId)
            if let path = entry.sharedSecretFile {
                guard let text = try? readFile(path) else {
                    throw AppleSimulatorError(.invalidRequest, "cannot read the shared secret file \(path)")
                }
                app.sharedSecret = text.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            if let path = entry.serverAPI?.privateKeyFile {
                guard let text = try? readFile(path), let key = try? P256.Signing.PrivateKey(pemRepresentation: text)
                else {
                    throw AppleSimulatorError(.invalidRequest, "\(path) is not a readable P-256 private key in PEM")
                }
                app.apiPublicKey = key.publicKey
            }
            apps.append(app)
        }
        return apps
    }
}
