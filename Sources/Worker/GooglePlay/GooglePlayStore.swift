import Decision
import Foundation
import GooglePlay
import GooglePlayClients
import Ledger
import Logging
import Messages
import Observability
import RateLimiter

/// Google Play behind the store boundary (``PurchaseStore``): a purchase is read locally by ``PlayPurchaseReader``
/// (the token's shape; the signed purchase data's signature against the app's licensing key and what it names), so
/// a forgery, another app's purchase or a malformed token is decided without a call to Google; the rest is read from
/// Google's Developer API (``GooglePlayAPIClient``: `subscriptionsv2.get` for a subscription, `productsv2` for a
/// one-time product), whose answer becomes facts (``GooglePlaySubscriptionPurchase/storeAnswer(packageName:token:now:)``)
/// for the decision rules.
///
/// While Google refuses an app's service account, its jobs wait undecided and uncommitted, `/readyz` names the fault
/// and one job probes every 30 s (``StoreConfigurationWatch``), as with a wrong App Store secret.
public struct GooglePlayStore: PurchaseStore {
    public let reader: PlayPurchaseReader
    /// Each Play app's Developer API client, by package name.
    let clients: [String: any GooglePlayPurchaseReads]
    /// The Play products sold as subscriptions: read with `subscriptionsv2.get`; every other with `productsv2`.
    let subscriptionProducts: Set<String>
    /// Holds back jobs while Google refuses a service account.
    public let configurationWatch: StoreConfigurationWatch?
    /// How long a job may wait for Google, counted again from each attempt after a configuration fault was fixed.
    let jobDeadline: Duration
    let logger: Logger
    let now: @Sendable () -> Date
    public let stageLimit: Int
    /// Jobs asking about one purchase at once share one read.
    let readFlights = GooglePlayReadFlights<Read>()
    /// The ledger's claims, read to tell a subscription's token from a one-time purchase's when a notification does
    /// not say (a refund review, a reconciler's re-read); nil: read as a subscription.
    let purchaseClaims: (any SubscriptionRereadStore)?

    /// A Google Play that reads purchases locally only (`clients` empty): a purchase the local checks let through is
    /// decided `unverifiable` / `google_play_unavailable` (tests, and deployments without Play apps, whose every Play
    /// purchase is another app's).
    public init(
        reader: PlayPurchaseReader = PlayPurchaseReader(licensingKeys: [:]),
        clients: [String: any GooglePlayPurchaseReads] = [:], subscriptionProducts: Set<String> = [],
        configurationWatch: StoreConfigurationWatch? = nil, jobDeadline: Duration = .seconds(600),
        stageLimit: Int = 256, logger: Logger = Logger(label: "verify.google-play"),
        now: @escaping @Sendable () -> Date = Date.init, purchaseClaims: (any SubscriptionRereadStore)? = nil
    ) {
        self.purchaseClaims = purchaseClaims
        self.reader = reader
        self.clients = clients
        self.subscriptionProducts = subscriptionProducts
        self.configurationWatch = configurationWatch
        self.jobDeadline = jobDeadline
        self.stageLimit = stageLimit
        self.logger = logger
        self.now = now
    }

    public func readProof(_ job: ReceiptJob) -> ProofReading {
        if case .googlePlayNotification(let notification) = job.proof {
            return ProofReading(facts: Self.facts(of: notification))
        }
        guard case .googlePlay(let purchase) = job.proof else {
            return ProofReading(facts: Self.anotherStoresProof)
        }
        return ProofReading(facts: reader.facts(of: purchase))
    }

    /// The facts of a proof of another store (an App Store proof): unreadable as a Google Play purchase.
    static let anotherStoresProof = ProofFacts(
        kind: .unreadable(reason: "an App Store proof is not a Google Play purchase"),
        signature: .notChecked(reason: "another store's proof"), store: .googlePlay)

    /// Google Play names apps by package name only.
    public func appIdentifier(for bundleID: String?) -> Int64? { nil }

    // MARK: Asking Google

    /// Reads the purchase from Google; while Google refuses the app's service account, waits (undecided) and reads
    /// again. The job's deadline counts from each attempt: a wait for an operator is not Google being unavailable.
    public func verify(
        _ job: ReceiptJob, local: LocalEvidence, deadline firstDeadline: ContinuousClock.Instant
    ) async throws -> PurchaseEvidence {
        if case .googlePlayNotification(let notification) = job.proof {
            return try await verify(job, notification: notification, local: local, deadline: firstDeadline)
        }
        guard case .googlePlay(let purchase) = job.proof, let client = clients[purchase.packageName] else {
            return local.unavailable
        }
        let purchaseRead = PurchaseRead(
            packageName: purchase.packageName, token: purchase.purchaseToken,
            isSubscription: subscriptionProducts.contains(purchase.productID))
        guard let (answer, _) = try await read(purchaseRead, for: job, client: client, deadline: firstDeadline) else {
            return local.unavailable
        }
        return EvidenceMapping.evidence(from: answer, local: local.evidence)
    }

    /// One purchase read: jobs asking the same read at once share it, whatever proof brought them (a verification, a
    /// notification), so a token costs one read however many jobs about it are in flight.
    struct PurchaseRead: Sendable, Hashable {
        var packageName: String
        var token: String
        /// `subscriptionsv2.get`, else `productsv2`.
        var isSubscription: Bool

        var flightKey: String {
            [packageName, isSubscription ? "subscriptionsv2" : "productsv2", token].joined(separator: "\n")
        }
    }

    /// Reads a purchase from Google (``verify(_:local:deadline:)``'s loop): Google's facts and the time of the read,
    /// or nil when Google could not be asked before the deadline.
    func read(
        _ purchaseRead: PurchaseRead, for job: ReceiptJob, client: any GooglePlayPurchaseReads,
        deadline firstDeadline: ContinuousClock.Instant
    ) async throws -> (StoreAnswer, Date)? {
        var deadline = firstDeadline
        while true {
            try await waitForTurn()
            let read = try await readFlights.value(for: purchaseRead.flightKey) { [self, deadline] in
                await self.read(purchaseRead, client: client, deadline: deadline)
            }
            // A cancelled call ends as a retryable one: the worker is draining, and the job stays undecided.
            try Task.checkCancellation()
            switch read {
            case .answer(let answer, let at):
                configurationWatch?.accepted(.googlePlayServiceAccount)
                return (answer, at)
            case .refused(let error):
                configurationWatch?.refused(.googlePlayServiceAccount)
                logger.debug(
                    "google play: refused the app's service account, the job waits undecided",
                    metadata: [LogKeys.jobID: "\(job.jobID)", LogKeys.error: "\(error)"])
                guard configurationWatch != nil else { return nil }
                deadline = ContinuousClock.now.advanced(by: jobDeadline)
            case .unavailable(let reason):
                logger.notice(
                    "google play: the purchase could not be read for the job",
                    metadata: [LogKeys.jobID: "\(job.jobID)", LogKeys.error: "\(reason)"])
                return nil
            }
        }
    }

    /// What one read gave.
    enum Read: Sendable {
        /// Google's facts about the purchase (its state, or that it knows none), and when it was read.
        case answer(StoreAnswer, at: Date)
        /// Google refused the app's service account.
        case refused(GooglePlayAPIError)
        /// Google could not be asked before the deadline, or answered what cannot be read.
        case unavailable(String)
    }

    /// Reads a purchase with the call its type needs.
    func read(
        _ purchaseRead: PurchaseRead, client: any GooglePlayPurchaseReads, deadline: ContinuousClock.Instant
    ) async -> Read {
        let at = now()
        let (packageName, token) = (purchaseRead.packageName, purchaseRead.token)
        if purchaseRead.isSubscription {
            let outcome = await client.subscription(packageName: packageName, token: token, deadline: deadline)
            return Self.read(outcome, at: at) { $0.storeAnswer(packageName: packageName, token: token, now: at) }
        }
        let outcome = await client.product(packageName: packageName, token: token, deadline: deadline)
        return Self.read(outcome, at: at) { $0.storeAnswer(packageName: packageName, token: token, now: at) }
    }

    /// Every outcome of a read as a ``Read``: Google's 404 and 410 are its word that no such purchase exists, its
    /// 400 a refusal of the request about the purchase; both are answers, decided by the rules.
    static func read<Answer>(
        _ outcome: GooglePlayOutcome<Answer>, at: Date, facts: (Answer) -> StoreAnswer
    ) -> Read {
        switch outcome {
        case .answered(let answer): .answer(facts(answer), at: at)
        case .purchaseNotFound(let status): .answer(StoreAnswer(status: .notFound, statusCode: status), at: at)
        case .rejected(let error):
            .answer(StoreAnswer(status: .rejected, statusCode: error.httpStatus ?? 400), at: at)
        case .configurationRefused(let error): .refused(error)
        case .retryable(let advice): .unavailable(advice.description)
        case .failed(let error): .unavailable(error.description)
        }
    }

    /// Waits while Google refuses the service account; a held job steps aside from the worker's store stage.
    private func waitForTurn() async throws {
        guard let configurationWatch, configurationWatch.isStanding(.googlePlayServiceAccount) else { return }
        try await JobStageSlot.whileWaitingElsewhere {
            try await configurationWatch.waitForTurn(.googlePlayServiceAccount)
        }
    }
}

/// The two purchase reads of the Developer API, as ``GooglePlayStore`` makes them (``GooglePlayAPIClient``; tests
/// give scripted ones).
public protocol GooglePlayPurchaseReads: Sendable {
    func subscription(
        packageName: String, token: String, deadline: ContinuousClock.Instant?
    ) async -> GooglePlayOutcome<GooglePlaySubscriptionPurchase>
    func product(
        packageName: String, token: String, deadline: ContinuousClock.Instant?
    ) async -> GooglePlayOutcome<GooglePlayProductPurchase>
}

extension GooglePlayAPIClient: GooglePlayPurchaseReads where C == ContinuousClock {}
