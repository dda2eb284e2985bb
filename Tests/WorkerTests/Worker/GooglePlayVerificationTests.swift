import AppleClients
import Decision
import Foundation
import GooglePlay
import GooglePlayClients
import Ledger
import Logging
import Messages
import RateLimiter
import Receipts
import StoreHTTP
import Testing
import Worker

@testable import PlaySimulator

/// The job flow asking Google: each rule of docs/LEDGER.md's Google Play table, on the real Developer API client
/// talking to the Play simulator, with a real SQLite ledger.
@Suite("Google Play: verified with Google, rule by rule", .timeLimit(.minutes(3)))
struct GooglePlayVerificationTests {
    static let package = "com.example.play"
    static let coins = "coins_100"
    static let premium = "premium_unlock"
    static let gold = "gold_monthly"

    /// Everything one test needs: the simulator, the processor and its ledger.
    struct Harness: Sendable {
        let simulator: PlaySimulator
        let processor: JobProcessor
        let ledger: any Ledger
        let health: WorkerHealth

        /// Mints a purchase and returns it as a job's proof (with its signed purchase data when `signed`).
        func mint(
            _ productID: String, _ type: ProductType, signed: Bool = true,
            _ adjust: (inout PlayMintRequest) -> Void = {
                _ in
            }
        ) throws -> (proof: GooglePlayPurchase, purchase: PlayPurchase) {
            var request = PlayMintRequest(
                packageName: GooglePlayVerificationTests.package, productId: productID, type: type)
            adjust(&request)
            let (purchase, data) = try simulator.mint(request)
            return (
                GooglePlayPurchase(
                    packageName: purchase.packageName, productID: productID, purchaseToken: purchase.purchaseToken,
                    purchaseData: signed ? data.purchaseJSON : nil, signature: signed ? data.signature : nil),
                purchase
            )
        }

        func decide(_ jobID: String, account: String = "acct-1", _ proof: GooglePlayPurchase) async throws -> Verdict {
            try await processor.decide(ReceiptJob(jobID: jobID, accountID: account, proof: .googlePlay(proof))).verdict
        }

        /// Reads of the purchase Google answered.
        func reads(_ token: String) -> Int { simulator.purchase(token)?.reads ?? -1 }
    }

    static func withHarness(
        allowSandbox: Bool = false, accountPackages: Set<String> = [], jobDeadline: Duration = .seconds(20),
        clock: PlaySimulatorClock = PlaySimulatorClock(), _ body: @Sendable (Harness) async throws -> Void
    ) async throws {
        var simulatorConfiguration = PlaySimulatorConfiguration()
        simulatorConfiguration.clock = clock
        let simulator = PlaySimulator(configuration: simulatorConfiguration)
        let task = Task { try await simulator.run() }
        defer { task.cancel() }
        let port = try await simulator.waitUntilReady()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "play-verification-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let accountFile = directory.appendingPathComponent("sa.json")
        try simulator.issueServiceAccount(packages: accountPackages).writeKeyFile(to: accountFile)
        let keyFile = directory.appendingPathComponent("licensing.txt")
        try Data(try simulator.licensingKey(packageName: package).utf8).write(to: keyFile)
        let catalog = Catalog(
            playApps: [
                .init(packageName: package, licensingKeyFile: keyFile.path, serviceAccountKeyFile: accountFile.path)
            ],
            playProducts: [
                .init(id: coins, type: .consumable), .init(id: premium, type: .nonConsumable),
                .init(id: gold, type: .autoRenewable, basePlans: ["monthly"]),
            ])
        let url = try LedgerTestSupport.freshURL(.sqlite)
        defer { LedgerTestSupport.removeFiles(of: url) }
        let engine = try CurlHTTPEngine()
        defer { engine.shutdown() }
        let logger = Logger(label: "google-play-verification-test")
        let health = WorkerHealth()
        let clients = try GooglePlayAppClients.load(
            catalog: catalog,
            settings: GooglePlayAPISettings(
                api: GooglePlayAPIConfiguration(baseURL: "http://127.0.0.1:\(port)", tokenURL: simulator.tokenURI)),
            transport: engine, logger: logger)
        let googlePlay = try GooglePlayStore.load(
            catalog: catalog, clients: clients,
            configurationWatch: StoreConfigurationWatch(
                health: health, logger: logger, probeInterval: .seconds(30), pollInterval: .milliseconds(20)),
            jobDeadline: jobDeadline, logger: logger)
        try await LedgerFactory.withLedger(url: url, configuration: LedgerTestSupport.patient) { ledger in
            let processor = JobProcessor(
                analyzer: ReceiptAnalyzer(),
                ledger: ledger,
                apple: AppleCaller(
                    gate: AppleCallGate(clock: ContinuousClock()), retryPolicy: RetryPolicy(maximumAttempts: 1),
                    logger: logger),
                verifyReceipt: VerifyReceiptClient(
                    transport: engine, configuration: .endpoints(base: "http://127.0.0.1:9"), logger: logger),
                serverAPI: nil,
                configuration: JobProcessor.Configuration(
                    catalog: catalog, allowSandbox: allowSandbox, jobDeadline: jobDeadline),
                health: health, logger: logger, googlePlay: googlePlay)
            try await body(Harness(simulator: simulator, processor: processor, ledger: ledger, health: health))
        }
    }

    @Test(
        "a one-time purchase is granted on Google's answer, once, by its order id; the owner's repeat and another account's replay are decided by the ledger without a read"
    )
    func oneTimePurchase() async throws {
        try await Self.withHarness { play in
            let (proof, purchase) = try play.mint(Self.premium, .nonConsumable)
            let granted = try await play.decide("p-1", proof)
            #expect(granted.outcome == .granted)
            #expect(granted.decidedBy == .googlePlay)
            #expect(granted.store == .googlePlay)
            #expect(granted.environment == "Production")
            #expect(granted.appleStatus == nil)
            let transaction = try #require(granted.transactions.first)
            #expect(transaction.transactionID == purchase.orderId)
            #expect(transaction.orderID == purchase.orderId)
            #expect(transaction.purchaseToken == proof.purchaseToken)
            #expect(transaction.originalTransactionID == proof.purchaseToken)
            #expect(play.reads(proof.purchaseToken) == 1)

            #expect(try await play.decide("p-1", proof) == granted, "a redelivery repeats the verdict")
            let repeated = try await play.decide("p-2", proof)
            #expect(repeated.outcome == .alreadyGranted)
            #expect(repeated.reason == .alreadyOwned)
            #expect(repeated.decidedBy == .ledger)
            let replayed = try await play.decide("p-3", account: "acct-2", proof)
            #expect(replayed.outcome == .rejected)
            #expect(replayed.reason == .replayed)
            #expect(replayed.decidedBy == .ledger)
            #expect(play.reads(proof.purchaseToken) == 1, "one read per genuine purchase")
            let claims = try await play.ledger.claims(ownedBy: "acct-1")
            #expect(claims.map(\.transactionID) == [purchase.orderId])
            #expect(try await play.ledger.claims(ownedBy: "acct-2").isEmpty)
        }
    }

    @Test(
        "a subscription is granted by its token: its order id is the latest successful order; a consumable is read with productsv2"
    )
    func subscriptionAndConsumable() async throws {
        try await Self.withHarness { play in
            let (subscription, minted) = try play.mint(Self.gold, .autoRenewable, signed: false)
            let granted = try await play.decide("s-1", subscription)
            #expect(granted.outcome == .granted)
            let transaction = try #require(granted.transactions.first)
            #expect(transaction.transactionID == minted.latestOrderId)
            #expect(transaction.purchaseToken == subscription.purchaseToken)
            #expect(transaction.expiresDate != nil)
            let stats = try #require(play.simulator.purchase(subscription.purchaseToken))
            #expect(stats.reads == 1)

            let (coins, _) = try play.mint(Self.coins, .consumable) { $0.quantity = 3 }
            let coinsGranted = try await play.decide("c-1", coins)
            #expect(coinsGranted.outcome == .granted)
            #expect(coinsGranted.transactions.first?.quantity == 3)
        }
    }

    @Test("a subscription its user cancelled entitles until its expiry; once expired (or on hold) it is expired")
    func cancelledAndExpiredSubscriptions() async throws {
        let clock = PlaySimulatorClock.manual(start: Date())
        try await Self.withHarness(clock: clock) { play in
            let (cancelled, _) = try play.mint(Self.gold, .autoRenewable, signed: false) { $0.periodSeconds = 3_600 }
            _ = try play.simulator.cancelSubscription(purchaseToken: cancelled.purchaseToken)
            let stillOn = try await play.decide("cancelled", cancelled)
            #expect(stillOn.outcome == .granted, "SUBSCRIPTION_STATE_CANCELED: access until expiryTime")

            let (lapsed, _) = try play.mint(Self.gold, .autoRenewable, signed: false) { $0.periodSeconds = 60 }
            _ = try play.simulator.cancelSubscription(purchaseToken: lapsed.purchaseToken)
            clock.advance(by: 120)
            let expired = try await play.decide("lapsed", lapsed)
            #expect(expired.outcome == .rejected)
            #expect(expired.reason == .expired)
            #expect(expired.decidedBy == .googlePlay)
            let ended = try #require(expired.transactions.first?.expiresDate)
            #expect(ended <= Date(), "a state that does not entitle never reads as current")
        }
    }

    @Test("an upgrade (linkedPurchaseToken) carries the entitlement to the replaced subscription's owner only")
    func linkedPurchaseToken() async throws {
        try await Self.withHarness { play in
            let (old, _) = try play.mint(Self.gold, .autoRenewable, signed: false)
            #expect(try await play.decide("old", old).outcome == .granted)
            let (upgrade, _) = try play.mint(Self.gold, .autoRenewable, signed: false) {
                $0.linkedPurchaseToken = old.purchaseToken
            }
            let stolen = try await play.decide("upgrade-other", account: "acct-2", upgrade)
            #expect(stolen.outcome == .rejected)
            #expect(stolen.reason == .replayed)
            #expect(try await play.ledger.claims(ownedBy: "acct-2").isEmpty)
            let carried = try await play.decide("upgrade-owner", upgrade)
            #expect(carried.outcome == .granted)
        }
    }

    @Test(
        "obfuscatedExternalAccountId binds the purchase: the derived id of the job's account is granted, another is account_token_mismatch"
    )
    func obfuscatedAccountID() async throws {
        try await Self.withHarness { play in
            let (mine, _) = try play.mint(Self.premium, .nonConsumable) {
                $0.obfuscatedAccountId = AppAccountToken.derived(fromAccountID: "acct-1")
            }
            #expect(try await play.decide("mine", mine).outcome == .granted)
            let (theirs, _) = try play.mint(Self.premium, .nonConsumable) {
                $0.obfuscatedAccountId = AppAccountToken.derived(fromAccountID: "acct-9")
            }
            let mismatch = try await play.decide("theirs", theirs)
            #expect(mismatch.outcome == .rejected)
            #expect(mismatch.reason == .accountTokenMismatch)
            #expect(mismatch.decidedBy == .googlePlay)
            #expect(try await play.ledger.claims(ownedBy: "acct-1").count == 1, "nothing claimed for the mismatch")
        }
    }

    @Test(
        "a pending purchase is unverifiable / purchase_pending with nothing claimed; once paid, a new job grants it; a cancelled one is revoked"
    )
    func pendingPurchases() async throws {
        try await Self.withHarness { play in
            let (pending, _) = try play.mint(Self.premium, .nonConsumable, signed: false) { $0.isPending = true }
            let waiting = try await play.decide("pending", pending)
            #expect(waiting.outcome == .unverifiable)
            #expect(waiting.reason == .purchasePending)
            #expect(waiting.decidedBy == .googlePlay)
            #expect(try await play.ledger.claims(ownedBy: "acct-1").isEmpty)
            _ = try play.simulator.completePending(purchaseToken: pending.purchaseToken)
            #expect(try await play.decide("paid", pending).outcome == .granted)

            let (subscription, _) = try play.mint(Self.gold, .autoRenewable, signed: false) { $0.isPending = true }
            #expect(try await play.decide("pending-sub", subscription).reason == .purchasePending)

            let (abandoned, _) = try play.mint(Self.coins, .consumable, signed: false) { $0.isPending = true }
            _ = try play.simulator.cancelPending(purchaseToken: abandoned.purchaseToken)
            let cancelled = try await play.decide("abandoned", abandoned)
            #expect(cancelled.outcome == .rejected)
            #expect(cancelled.reason == .revoked)
        }
    }

    @Test("a test purchase is Sandbox: refused where sandbox is not allowed, granted where it is")
    func testPurchases() async throws {
        try await Self.withHarness { play in
            let (test, _) = try play.mint(Self.premium, .nonConsumable) { $0.isTest = true }
            let refused = try await play.decide("test", test)
            #expect(refused.outcome == .rejected)
            #expect(refused.reason == .environmentNotAllowed)
            #expect(refused.decidedBy == .googlePlay)
        }
        try await Self.withHarness(allowSandbox: true) { play in
            let (test, _) = try play.mint(Self.premium, .nonConsumable) { $0.isTest = true }
            let granted = try await play.decide("test", test)
            #expect(granted.outcome == .granted)
            #expect(granted.environment == "Sandbox")
        }
    }

    @Test(
        "Google knows no such token (404): purchase_not_found, never a grant; a token of another product: product_mismatch"
    )
    func unknownTokenAndProductMismatch() async throws {
        try await Self.withHarness { play in
            let (genuine, _) = try play.mint(Self.premium, .nonConsumable, signed: false)
            var invented = genuine
            invented.purchaseToken = String(genuine.purchaseToken.reversed())
            let notFound = try await play.decide("invented", invented)
            #expect(notFound.outcome == .rejected)
            #expect(notFound.reason == .purchaseNotFound)
            #expect(notFound.decidedBy == .googlePlay)

            let (coins, _) = try play.mint(Self.coins, .consumable, signed: false)
            var renamed = coins
            renamed.productID = Self.premium
            let mismatch = try await play.decide("renamed", renamed)
            #expect(mismatch.outcome == .rejected)
            #expect(mismatch.reason == .productMismatch)
            #expect(try await play.ledger.claims(ownedBy: "acct-1").isEmpty)
        }
    }

    @Test("Google unavailable (503 until the deadline): unverifiable / google_play_unavailable, nothing claimed")
    func googleUnavailable() async throws {
        try await Self.withHarness(jobDeadline: .seconds(1)) { play in
            let (proof, _) = try play.mint(Self.premium, .nonConsumable, signed: false)
            try play.simulator.setFaults(PlayFaultPlan(rules: [PlayFaultRule(route: "api", fault: .http503)]))
            let verdict = try await play.decide("storm", proof)
            #expect(verdict.outcome == .unverifiable)
            #expect(verdict.reason == .googlePlayUnavailable)
            #expect(verdict.decidedBy == .googlePlay)
            #expect(try await play.ledger.claims(ownedBy: "acct-1").isEmpty)
        }
    }

    @Test(
        "a service account Google refuses holds the job undecided and names the fault in /readyz; nothing is recorded")
    func refusedServiceAccount() async throws {
        try await Self.withHarness(accountPackages: ["com.example.other"]) { play in
            let (proof, _) = try play.mint(Self.premium, .nonConsumable, signed: false)
            let job = Task { try await play.decide("held", proof) }
            try await ProcessTest.eventually("the fault in readiness", within: .seconds(30)) {
                play.health.notReadyReasons.contains("google_play_service_account_rejected")
            }
            job.cancel()
            await #expect(throws: CancellationError.self) { _ = try await job.value }
            let snapshot = try await play.ledger.snapshot(jobID: "held", transactionIDs: [], originalTransactionIDs: [])
            #expect(snapshot.priorVerdict == nil)
        }
    }
}

/// Google's other answers, scripted: what the simulator does not produce on a read.
@Suite("Google Play: Google's refusals, scripted", .timeLimit(.minutes(2)))
struct GooglePlayScriptedAnswerTests {
    struct Scripted: GooglePlayPurchaseReads {
        let product: GooglePlayOutcome<GooglePlayProductPurchase>

        func subscription(
            packageName: String, token: String, deadline: ContinuousClock.Instant?
        ) async -> GooglePlayOutcome<GooglePlaySubscriptionPurchase> {
            .failed(GooglePlayAPIError(code: .malformedResponse, detail: "not scripted"))
        }

        func product(
            packageName: String, token: String, deadline: ContinuousClock.Instant?
        ) async -> GooglePlayOutcome<GooglePlayProductPurchase> { product }
    }

    static func verdict(_ answer: GooglePlayOutcome<GooglePlayProductPurchase>) async throws -> Verdict {
        let store = GooglePlayStore(
            clients: [GooglePlayVerificationTests.package: Scripted(product: answer)], jobDeadline: .seconds(1))
        let catalog = Catalog(
            playApps: [
                .init(packageName: GooglePlayVerificationTests.package, licensingKeyFile: "", serviceAccountKeyFile: "")
            ],
            playProducts: [.init(id: "p", type: .nonConsumable)])
        let url = try LedgerTestSupport.freshURL(.sqlite)
        defer { LedgerTestSupport.removeFiles(of: url) }
        return try await LedgerFactory.withLedger(url: url, configuration: LedgerTestSupport.patient) { ledger in
            let processor = JobProcessor(
                store: PurchaseStores(appStore: store, googlePlay: store), ledger: ledger,
                configuration: JobProcessor.Configuration(catalog: catalog, allowSandbox: false),
                health: WorkerHealth(), logger: Logger(label: "scripted"))
            let proof = GooglePlayPurchase(
                packageName: GooglePlayVerificationTests.package, productID: "p", purchaseToken: "token.abc-1")
            return try await processor.decide(ReceiptJob(jobID: "j", accountID: "a", proof: .googlePlay(proof))).verdict
        }
    }

    @Test("400: google_play_rejected; 410: purchase_not_found; a body that is not Google's: google_play_unavailable")
    func refusals() async throws {
        let rejected = try await Self.verdict(
            .rejected(GooglePlayAPIError(code: .badRequest, httpStatus: 400, detail: "invalid")))
        #expect(rejected.outcome == .rejected)
        #expect(rejected.reason == .googlePlayRejected)
        #expect(rejected.decidedBy == .googlePlay)
        let gone = try await Self.verdict(.purchaseNotFound(status: 410))
        #expect(gone.reason == .purchaseNotFound)
        let garbled = try await Self.verdict(
            .failed(GooglePlayAPIError(code: .malformedResponse, httpStatus: 200, detail: "not JSON")))
        #expect(garbled.outcome == .unverifiable)
        #expect(garbled.reason == .googlePlayUnavailable)
    }
}
