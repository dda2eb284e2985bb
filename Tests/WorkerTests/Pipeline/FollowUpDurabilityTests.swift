import AppleClients
import Crypto
import Foundation
import Ledger
import Messages
import RateLimiter
import Testing

@testable import Pipeline

/// A Finish Transaction must survive a worker that dies between the grant and the call (found by the chaos
/// harness's notification family: a SIGKILL right after a grant left the transaction unfinished for good). The call
/// is claimed in the ledger while the job is still in hand, so its record outlives the worker and another worker's
/// sweep makes it once the claim has lapsed.
@Suite("Pipeline: follow-up calls outlive their worker", .timeLimit(.minutes(2)))
struct FollowUpDurabilityTests {
    static func followUps(
        base: String, ledger: any Ledger, holder: String, now: @escaping @Sendable () -> Date
    ) throws -> AppleFollowUps {
        let key = try AppStoreConnectKey(
            keyID: "KEY123", issuerID: "issuer-uuid", bundleID: "com.example",
            privateKeyPEM: P256.Signing.PrivateKey().pemRepresentation)
        let client = AppStoreServerAPIClient(
            transport: try CurlHTTPEngine(),
            configuration: AppStoreServerAPIConfiguration(productionBaseURL: base, sandboxBaseURL: base + "/sandbox"),
            signer: AppStoreTokenSigner(key: key), verifier: AppleClientsFakeVerifier(),
            logger: AppleClientsLogCapture().logger)
        let caller = AppleCaller(
            gate: AppleCallGate(configuration: AppleCallGateConfiguration(), clock: ContinuousClock()),
            retryPolicy: RetryPolicy(), logger: AppleClientsLogCapture().logger)
        let store = try #require(ledger as? any AppleCallRecordStore)
        return AppleFollowUps(
            client: client, caller: caller, store: store, ledger: ledger,
            configuration: AppleFollowUpsConfiguration(
                finishTransactions: true, holder: holder, claimLease: .seconds(300)),
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
                await dying.verdictDelivered(verdict, job: job)
                let store = try #require(ledger as? any AppleCallRecordStore)
                let recorded = try #require(
                    try await store.appleCallRecord(kind: .finishTransaction, key: "2000000000000001"))
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
                let after = try await store.appleCallRecord(kind: .finishTransaction, key: "2000000000000001")
                #expect(
                    server.received(path: "/inApps/v1/transactions/2000000000000001/finish").count == 1,
                    "\(server.received().map(\.path)) \(String(describing: after))")
                #expect(
                    try await store.appleCallRecord(kind: .finishTransaction, key: "2000000000000001")?.state == .sent)
            }
        }
    }
}
