import AppleClients
import CodedErrors
import Crypto
import Foundation
import Ledger
import Messages
import RateLimiter
import StoreHTTP
import Synchronization
import Testing

@testable import Worker

/// A Finish Transaction must survive a worker that dies between the grant and the call (found by the chaos
/// harness's notification family: a SIGKILL right after a grant left the transaction unfinished for good). The call
/// is claimed in the ledger while the job is still in hand, so its record outlives the worker and another worker's
/// sweep makes it once the claim has lapsed.
@Suite("Pipeline: follow-up calls outlive their worker", .timeLimit(.minutes(2)))
struct FollowUpDurabilityTests {
    static func followUps(
        base: String, ledger: any Ledger, holder: String, store: (any FollowUpRecordStore)? = nil,
        now: @escaping @Sendable () -> Date
    ) throws -> AppleFollowUps {
        try followUps(
            base: base, ledger: ledger, store: store,
            configuration: AppleFollowUpsConfiguration(
                finishTransactions: true, holder: holder, claimLease: .seconds(300),
                claimRetryBackoff: .milliseconds(1) ... .milliseconds(5)),
            now: now)
    }

    /// App Store follow-ups configured by `configuration`, calling the fake server at `base` through the real Server
    /// API client and call gate, keeping their records in `store` (default: the ledger).
    static func followUps(
        base: String, bundleID: String = "com.example", ledger: any Ledger, store: (any FollowUpRecordStore)? = nil,
        configuration: AppleFollowUpsConfiguration, now: @escaping @Sendable () -> Date
    ) throws -> AppleFollowUps {
        let key = try AppStoreConnectKey(
            keyID: "KEY123", issuerID: "issuer-uuid", bundleID: bundleID,
            privateKeyPEM: P256.Signing.PrivateKey().pemRepresentation)
        let client = AppStoreServerAPIClient(
            transport: try CurlHTTPEngine(),
            configuration: AppStoreServerAPIConfiguration(productionBaseURL: base, sandboxBaseURL: base + "/sandbox"),
            signer: AppStoreTokenSigner(key: key), verifier: AppleClientsFakeVerifier(),
            logger: AppleClientsLogCapture().logger)
        let caller = AppleCaller(
            gate: AppleCallGate(configuration: AppleCallGateConfiguration(), clock: ContinuousClock()),
            retryPolicy: RetryPolicy(), logger: AppleClientsLogCapture().logger)
        return AppleFollowUps(
            client: client, caller: caller, store: store ?? ledger, ledger: ledger, configuration: configuration,
            logger: AppleClientsLogCapture().logger, now: now)
    }

    @Test("the call is recorded before the job completes; a second worker's sweep makes it after the claim lapses")
    func recordedBeforeTheJobCompletes() async throws {
        try await AppleClientsFakeServer.withRunning { server, base in
            server.setFallback("/inApps/v1/transactions/2000000000000001/finish", .init(status: 200))
            try await LedgerTestSupport.withLedger(.sqlite) { ledger, _ in
                let start = Date()
                let job = ReceiptJob(
                    jobID: "job-1", accountID: "acc2000000000000001", proof: .transactionID("2000000000000001"))
                let verdict = Verdict(
                    job: job, outcome: .granted, decidedBy: .apple, environment: "Production",
                    transactions: [.init(transactionID: "2000000000000001", productID: "com.example.premium")],
                    decidedAt: start)

                // The first worker hands over the delivered verdict, then dies before its background part runs.
                let dying = try Self.followUps(base: base, ledger: ledger, holder: "worker-a") { start }
                #expect(await dying.verdictDelivered(verdict, job: job))
                let store = ledger
                let recorded = try #require(
                    try await store.followUpRecord(kind: .finishTransaction, key: "2000000000000001"))
                #expect(recorded.state == .pending)
                #expect(recorded.holder == "worker-a")
                #expect(server.received(path: "/inApps/v1/transactions/2000000000000001/finish").isEmpty)

                // Within the claim's lease another worker leaves it alone; after it, its sweep makes the call.
                let early = try Self.followUps(base: base, ledger: ledger, holder: "worker-b") {
                    start.addingTimeInterval(60)
                }
                await early.sweep()
                #expect(server.received(path: "/inApps/v1/transactions/2000000000000001/finish").isEmpty)
                let late = try Self.followUps(base: base, ledger: ledger, holder: "worker-b") {
                    start.addingTimeInterval(301)
                }
                await late.sweep()
                let after = try await store.followUpRecord(kind: .finishTransaction, key: "2000000000000001")
                #expect(
                    server.received(path: "/inApps/v1/transactions/2000000000000001/finish").count == 1,
                    "\(server.received().map(\.path)) \(String(describing: after))")
                #expect(
                    try await store.followUpRecord(kind: .finishTransaction, key: "2000000000000001")?.state == .sent)
            }
        }
    }

    @Test("a call whose claim is about to end is not made: the next sweep, whose own claim it then is, makes it")
    func callEndsWithItsClaim() async throws {
        try await AppleClientsFakeServer.withRunning { server, base in
            let path = "/inApps/v1/transactions/2000000000000007/finish"
            server.setFallback(path, .init(status: 200))
            try await LedgerTestSupport.withLedger(.sqlite) { ledger, _ in
                let start = Date()
                let followUps = try Self.followUps(base: base, ledger: ledger, holder: "worker-a") { start }
                let call = FollowUpRecord.Call(
                    kind: .finishTransaction, key: "2000000000000007", transactionID: "2000000000000007",
                    environment: "Production")
                #expect(
                    try await ledger.claimFollowUp(call, holder: "worker-a", now: start, lease: .seconds(300))
                        == .claimed)
                // A fifth of the 300 s lease is more than 5 s, so the call needs more than 5 s of its claim left.
                await followUps.make(call, claimEnds: ContinuousClock.now.advanced(by: .seconds(4)))
                #expect(server.received(path: path).isEmpty)
                #expect(try await ledger.followUpRecord(kind: .finishTransaction, key: call.key)?.state == .pending)
                await followUps.make(call, claimEnds: ContinuousClock.now.advanced(by: .seconds(300)))
                #expect(server.received(path: path).count == 1)
            }
        }
    }

    static func grant(_ transactionID: String) -> (ReceiptJob, Verdict) {
        let job = ReceiptJob(jobID: "job-\(transactionID)", accountID: "acc", proof: .transactionID(transactionID))
        let verdict = Verdict(
            job: job, outcome: .granted, decidedBy: .apple, environment: "Production",
            transactions: [.init(transactionID: transactionID, productID: "com.example.premium")], decidedAt: Date())
        return (job, verdict)
    }

    @Test("a claim the ledger cannot record (an outage) is asked again until it is recorded; the job waits for it")
    func claimRetriedThroughAnOutage() async throws {
        // Found by `verify-worker chaos`: a PostgreSQL outage right after seven grants lost their Finish Transactions
        // for good (the claim failed, the job completed, its offset was committed).
        try await AppleClientsFakeServer.withRunning { _, base in
            try await LedgerTestSupport.withLedger(.sqlite) { ledger, _ in
                let real = ledger
                let outage = FailingCallRecordStore(real, failures: 3)
                let followUps = try Self.followUps(base: base, ledger: ledger, holder: "worker-a", store: outage) {
                    Date()
                }
                let (job, verdict) = Self.grant("2000000000000002")
                #expect(await followUps.verdictDelivered(verdict, job: job))
                #expect(outage.claimAttempts == 4)
                let record = try await real.followUpRecord(kind: .finishTransaction, key: "2000000000000002")
                #expect(record?.state == .pending)
                #expect(record?.holder == "worker-a")
            }
        }
    }

    @Test("cancelled while the ledger cannot record the claim: reported as not recorded, so the job stays uncommitted")
    func cancelledDuringAnOutage() async throws {
        try await AppleClientsFakeServer.withRunning { _, base in
            try await LedgerTestSupport.withLedger(.sqlite) { ledger, _ in
                let real = ledger
                let outage = FailingCallRecordStore(real, failures: .max)
                let followUps = try Self.followUps(base: base, ledger: ledger, holder: "worker-a", store: outage) {
                    Date()
                }
                let (job, verdict) = Self.grant("2000000000000003")
                let delivery = Task { await followUps.verdictDelivered(verdict, job: job) }
                // Cancelled once the ledger has refused the claim twice: the job is then waiting for it.
                for await attempts in outage.attempts where attempts >= 2 { break }
                delivery.cancel()
                #expect(await delivery.value == false)
                #expect(try await real.followUpRecord(kind: .finishTransaction, key: "2000000000000003") == nil)
            }
        }
    }
}

/// A call record store whose claims fail as a PostgreSQL outage does (`LedgerError.unavailable`) the first `failures`
/// times, then go to the real store. Every attempt is announced on `attempts`.
final class FailingCallRecordStore: ForwardingCallRecordStore {
    let callRecords: any FollowUpRecordStore
    private let failures: Int
    private let count = Mutex(0)
    let attempts: AsyncStream<Int>
    private let announce: AsyncStream<Int>.Continuation

    init(_ real: any FollowUpRecordStore, failures: Int) {
        self.callRecords = real
        self.failures = failures
        (attempts, announce) = AsyncStream.makeStream(of: Int.self)
    }

    var claimAttempts: Int { count.withLock { $0 } }

    func claimFollowUp(
        _ call: FollowUpRecord.Call, holder: String, now: Date, lease: Duration
    ) async throws -> FollowUpClaim {
        let attempt = count.withLock { count in
            count += 1
            return count
        }
        announce.yield(attempt)
        guard attempt > failures else { throw LedgerError(.unavailable, "the test's outage") }
        return try await callRecords.claimFollowUp(call, holder: holder, now: now, lease: lease)
    }
}
