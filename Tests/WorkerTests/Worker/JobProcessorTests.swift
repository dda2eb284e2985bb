import AppleClients
import Decision
import Foundation
import Ledger
import Logging
import Messages
import RateLimiter
import Receipts
import StoreHTTP
import Testing
import Worker

@Suite("Job processor", .timeLimit(.minutes(2)))
struct JobProcessorTests {
    static let catalog = Catalog(
        bundleIDs: ["com.example.verifyworker"], products: [.init(id: "com.example.coins", type: .consumable)])

    /// A processor of ``catalog`` over `ledger` whose verifyReceipt is unreachable (port 9, discard): a verifyReceipt
    /// call would end `unverifiable`.
    static func processor(
        ledger: any Ledger, engine: CurlHTTPEngine, serverAPI: AppStoreServerAPIClient? = nil,
        configuration: JobProcessor.Configuration = .init(
            catalog: catalog, allowSandbox: false, jobDeadline: .seconds(2)),
        health: WorkerHealth = WorkerHealth(), logger: Logger = Logger(label: "job-processor-test")
    ) -> JobProcessor {
        JobProcessor(
            analyzer: ReceiptAnalyzer(
                isWorthVerifying: ProofPolicy(catalog: configuration.catalog).isWorthVerifying(bundleID:)),
            ledger: ledger,
            apple: AppleCaller(
                gate: AppleCallGate(clock: ContinuousClock()), retryPolicy: RetryPolicy(maximumAttempts: 1),
                logger: logger),
            verifyReceipt: VerifyReceiptClient(
                transport: engine, configuration: .endpoints(base: "http://127.0.0.1:9"), logger: logger),
            serverAPI: serverAPI, configuration: configuration, health: health, logger: logger)
    }

    /// ``processor(ledger:engine:serverAPI:configuration:health:logger:)`` over a fresh SQLite ledger.
    static func withProcessor(_ body: @Sendable (JobProcessor, any Ledger) async throws -> Void) async throws {
        let url = try LedgerTestSupport.freshURL(.sqlite)
        defer { LedgerTestSupport.removeFiles(of: url) }
        let engine = try CurlHTTPEngine()
        defer { engine.shutdown() }
        try await LedgerFactory.withLedger(url: url, configuration: LedgerTestSupport.patient) { ledger in
            try await body(processor(ledger: ledger, engine: engine), ledger)
        }
    }

    @Test("a rejection the proof alone decides never touches the ledger, and a redelivery repeats it exactly")
    func statelessRejection() async throws {
        try await Self.withProcessor { processor, ledger in
            // A cracker's "receipt": base64 of a bare product id (seed 000).
            let job = ReceiptJob(
                jobID: "job-cracker", accountID: "acct-1", proof: .receipt("Y29tLnVydXMuaWFwLjk2NjU3Mjkw"))
            let recordedAt = Date(timeIntervalSince1970: 1_790_000_000.123)
            let first = try await processor.decide(job, recordedAt: recordedAt)
            let second = try await processor.decide(job, recordedAt: recordedAt)
            #expect(first.verdict == second.verdict)
            #expect(first.verdict.outcome == .rejected && first.verdict.reason == .malformed)
            #expect(!first.askedStore)
            #expect(abs(first.verdict.decidedAt.timeIntervalSince(recordedAt)) < 0.001)
            let snapshot = try await ledger.snapshot(jobID: job.jobID, transactionIDs: [], originalTransactionIDs: [])
            #expect(snapshot.priorVerdict == nil)
        }
    }
}
