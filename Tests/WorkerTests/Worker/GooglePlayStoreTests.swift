import AppleClients
import Decision
import Foundation
import GooglePlay
import Ledger
import Logging
import Messages
import RateLimiter
import Receipts
import StoreHTTP
import Testing
import Worker

/// The job flow with two stores behind its boundary: a Google Play purchase goes to ``GooglePlayStore`` and is judged
/// by the same rules, an App Store proof still goes to the App Store; junk is decided without a call or a ledger
/// write, and a purchase that passes the local checks is never granted without Google.
@Suite("Pipeline: Google Play beside the App Store", .timeLimit(.minutes(2)))
struct GooglePlayStoreTests {
    /// The App Store catalog of ``JobProcessorTests`` with the Play fixtures' apps and products.
    static let catalog = Catalog(
        bundleIDs: JobProcessorTests.catalog.bundleIDs, products: [.init(id: "com.example.coins", type: .consumable)],
        playApps: GooglePlayReadingTests.catalog.playApps,
        playProducts: [.init(id: GooglePlayReadingTests.productA, type: .nonConsumable)])

    static func withProcessor(_ body: @Sendable (JobProcessor, any Ledger) async throws -> Void) async throws {
        let url = try LedgerTestSupport.freshURL(.sqlite)
        defer { LedgerTestSupport.removeFiles(of: url) }
        let engine = try CurlHTTPEngine()
        defer { engine.shutdown() }
        let logger = Logger(label: "google-play-store-test")
        let configuration = JobProcessor.Configuration(catalog: catalog, allowSandbox: false, jobDeadline: .seconds(2))
        let reader = PlayPurchaseReader(licensingKeys: try PlayLicensingKeys.load(catalog))
        try await LedgerFactory.withLedger(url: url, configuration: LedgerTestSupport.patient) { ledger in
            let processor = JobProcessor(
                analyzer: ReceiptAnalyzer(
                    isWorthVerifying: ProofPolicy(catalog: catalog).isWorthVerifying(bundleID:)),
                ledger: ledger,
                apple: AppleCaller(
                    gate: AppleCallGate(clock: ContinuousClock()), retryPolicy: RetryPolicy(maximumAttempts: 1),
                    logger: logger),
                verifyReceipt: VerifyReceiptClient(
                    transport: engine, configuration: .endpoints(base: "http://127.0.0.1:9"), logger: logger),
                serverAPI: nil, configuration: configuration, health: WorkerHealth(), logger: logger,
                googlePlay: GooglePlayStore(reader: reader))
            try await body(processor, ledger)
        }
    }

    static func job(_ id: String, _ purchase: GooglePlayPurchase) -> ReceiptJob {
        ReceiptJob(jobID: id, accountID: "acct-1", proof: .googlePlay(purchase))
    }

    @Test("each job goes to the store of its proof")
    func routing() async throws {
        try await Self.withProcessor { processor, _ in
            let stores = try #require(processor.store as? PurchaseStores)
            let play = Self.job("play", try GooglePlayReadingTests.purchaseA())
            let receipt = ReceiptJob(jobID: "receipt", accountID: "acct-1", proof: .receipt("Y29t"))
            #expect(stores.store(of: play) is GooglePlayStore)
            #expect(stores.store(of: receipt) is AppStore)
            #expect(stores.readProof(play).facts?.store == .googlePlay)
            #expect(stores.readProof(receipt).facts?.store == .appStore)
        }
    }

    @Test("forged, foreign and malformed Play purchases are rejected without Google and without a ledger write")
    func junkIsDecidedLocally() async throws {
        try await Self.withProcessor { processor, ledger in
            let genuine = try GooglePlayReadingTests.purchaseA()
            var forged = genuine
            forged.purchaseToken += "_BROKEN_INPUT"
            var foreign = genuine
            foreign.packageName = "com.other.app"
            foreign.purchaseData = nil
            foreign.signature = nil
            var malformed = genuine
            malformed.purchaseToken = "not a token!"
            malformed.purchaseData = nil
            malformed.signature = nil
            let cases: [(GooglePlayPurchase, Verdict.Reason, Verdict.DecidedBy)] = [
                (forged, .notAuthenticated, .signature),
                (foreign, .wrongBundle, .prefilter),
                (malformed, .malformed, .prefilter),
            ]
            for (index, (purchase, reason, decidedBy)) in cases.enumerated() {
                let job = Self.job("junk-\(index)", purchase)
                let decided = try await processor.decide(job, recordedAt: Date(timeIntervalSince1970: 1_790_000_000))
                #expect(decided.verdict.outcome == .rejected, "\(job.jobID)")
                #expect(decided.verdict.reason == reason, "\(job.jobID)")
                #expect(decided.verdict.decidedBy == decidedBy, "\(job.jobID)")
                #expect(decided.verdict.store == .googlePlay, "\(job.jobID)")
                #expect(!decided.askedStore, "\(job.jobID)")
                let snapshot = try await ledger.snapshot(
                    jobID: job.jobID, transactionIDs: [], originalTransactionIDs: [])
                #expect(snapshot.priorVerdict == nil, "\(job.jobID): a local rejection writes nothing")
            }
        }
    }

    @Test("a genuine Play purchase goes on to the store, and without Google's answer it is never granted")
    func genuineIsNeverGrantedLocally() async throws {
        try await Self.withProcessor { processor, _ in
            let decided = try await processor.decide(
                Self.job("genuine", try GooglePlayReadingTests.purchaseA()),
                recordedAt: Date(timeIntervalSince1970: 1_790_000_000))
            #expect(decided.askedStore)
            #expect(decided.verdict.outcome == .unverifiable)
            #expect(decided.verdict.reason == .googlePlayUnavailable)
            #expect(decided.verdict.decidedBy == .googlePlay)
            #expect(decided.verdict.store == .googlePlay)
        }
    }
}
