import AppleClients
import CodedErrors
import Decision
import Foundation
import Kafka
import Ledger
import Logging
import Messages
import RateLimiter
import Receipts
import SQLiteStorage
import StoreHTTP
import Synchronization
import Testing
import Worker

/// An error the ledger will refuse again and again is never retried for ever: the job becomes a dead letter
/// `ledger_refused` and its account's next job is decided. A transient fault is retried, and a job retried past
/// `ledger_retry_overdue_s` makes `/readyz` and a metric say so until it ends.
@Suite("Pipeline: a job the ledger refuses, a job the ledger keeps failing", .timeLimit(.minutes(2)))
struct LedgerRefusalTests {
    static let catalog = JobProcessorTests.catalog

    static func processor(
        ledger: any Ledger, health: WorkerHealth, engine: CurlHTTPEngine, overdue: Duration = .seconds(120)
    ) -> JobProcessor {
        var logger = Logger(label: "ledger-refusal-test")
        logger.logLevel = .critical
        return JobProcessorTests.processor(
            ledger: ledger, engine: engine,
            configuration: JobProcessor.Configuration(
                catalog: catalog, allowSandbox: false, jobDeadline: .seconds(2),
                ledgerInitialBackoff: .milliseconds(1), ledgerMaximumBackoff: .milliseconds(20),
                ledgerRetryOverdue: overdue),
            health: health, logger: logger)
    }

    /// A job that passes the codec's checks only when built in code: the frontends' entrances now refuse it.
    static func nulJob() -> ReceiptJob {
        ReceiptJob(jobID: "job-nul-\u{0}-1", accountID: "acct-nul\u{0}", proof: .transactionID("2000000000000001"))
    }

    @Test(
        "PostgreSQL refusing a NUL in an id is ledger_refused at once: no retry, the ledger still counts as reachable")
    func postgresRefusesNul() async throws {
        let engine = try CurlHTTPEngine()
        defer { engine.shutdown() }
        try await LedgerTestSupport.withLedger(.postgres) { ledger, _ in
            let health = WorkerHealth()
            let processor = Self.processor(ledger: ledger, health: health, engine: engine)
            await #expect(throws: LedgerRefusedJob.self) { _ = try await processor.decide(Self.nulJob()) }
            #expect(!health.notReadyReasons.contains("ledger_unreachable"))
            #expect(health.ledgerRetries.retrying == 0 && health.ledgerRetries.overdue == 0)
            // A snapshot read of the same id, straight from the ledger: the database's own refusal, classified.
            do {
                _ = try await ledger.snapshot(jobID: "a\u{0}b", transactionIDs: [], originalTransactionIDs: [])
                Issue.record("PostgreSQL stored a NUL")
            } catch let error as LedgerError {
                #expect(error.code == .refused, "\(error)")
                #expect(!error.isRetryable)
            }
        }
    }

    @Test("SQLite's refusals of values (constraints, a parameter out of range) are refused for good")
    func sqliteClassification() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("refusal-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let connection = try SQLiteConnection<LedgerError>(
            path: directory.appendingPathComponent("t.sqlite").path, busyTimeout: .milliseconds(100), setup: [])
        try connection.execute("CREATE TABLE t (id TEXT PRIMARY KEY NOT NULL, n INTEGER CHECK (n >= 0))")
        for statement in ["INSERT INTO t VALUES (NULL, 1)", "INSERT INTO t VALUES ('a', -1)"] {
            #expect(throws: LedgerError.self) { try connection.execute(statement) }
            do { try connection.execute(statement) } catch { #expect(error.code == .refused, "\(error)") }
        }
        do {
            try connection.query("SELECT ?1", [.text("x"), .text("y")])
            Issue.record("a parameter out of range was bound")
        } catch {
            #expect(error.code == .refused, "\(error)")
        }
        // Text with a NUL inside is stored whole, not cut at the NUL into another id.
        try connection.query("INSERT INTO t VALUES (?, 1)", [.text("acct\u{0}b")])
        try connection.query("INSERT INTO t VALUES (?, 1)", [.text("acct")])
        #expect(
            try connection.query("SELECT length(CAST(id AS BLOB)) FROM t ORDER BY 1") == [[.integer(4)], [.integer(6)]])
    }

    @Test("a transient fault is retried; past the bound /readyz says ledger_retry_overdue until the job ends")
    func overdueRetries() async throws {
        let engine = try CurlHTTPEngine()
        defer { engine.shutdown() }
        try await LedgerTestSupport.withLedger(.sqlite) { real, _ in
            let ledger = OutageLedger(real)
            let health = WorkerHealth()
            let processor = Self.processor(ledger: ledger, health: health, engine: engine, overdue: .zero)
            let job = ReceiptJob(
                jobID: "job-outage-1", accountID: "acct-outage", proof: .transactionID("2000000000000002"))
            let decided = Task { try await processor.decide(job) }
            try await PipelineHarness.poll("the job retried past the bound") {
                health.notReadyReasons.contains("ledger_retry_overdue") && ledger.failures >= 3
            }
            #expect(health.ledgerRetries == (retrying: 1, overdue: 1))
            ledger.end()
            let verdict = try await decided.value.verdict
            #expect(verdict.jobID == job.jobID)
            #expect(!health.notReadyReasons.contains("ledger_retry_overdue"))
            #expect(health.ledgerRetries == (retrying: 0, overdue: 0))
        }
    }

    @Test("through a worker: the refused job is a dead letter ledger_refused, its account's next job is decided")
    func refusedJobDoesNotHoldItsLane() async throws {
        let engine = try CurlHTTPEngine()
        defer { engine.shutdown() }
        try await LedgerTestSupport.withLedger(.sqlite) { real, _ in
            let ledger = OutageLedger(real, refusing: "job-refused-")
            let health = WorkerHealth()
            let processor = Self.processor(ledger: ledger, health: health, engine: engine)
            let setup = try PipelineSingleWorkerSetup(name: "ledger-refused")
            let producer = try setup.producer()
            let worker = try setup.worker(
                producer: producer, decider: processor, health: health, logger: PipelineDeliveryTests.quietLogger)
            let deadLetters = try PipelineVerdictLog(
                bootstrap: setup.cluster.bootstrapServers, topic: setup.topics.deadLetters, group: "dlq-reader",
                logger: PipelineDeliveryTests.quietLogger)
            let verdicts = try PipelineVerdictLog(
                bootstrap: setup.cluster.bootstrapServers, topic: setup.topics.verdicts, group: "verdict-reader",
                logger: PipelineDeliveryTests.quietLogger)
            let readers = [Task { try await deadLetters.run() }, Task { try await verdicts.run() }]
            let run = Task { try await worker.run() }

            let codec = MessageCodec()
            let refused = ReceiptJob(
                jobID: "job-refused-1", accountID: "acct-lane", proof: .transactionID("2000000000000003"))
            // The same account's next job: a cracker's receipt, decided from its proof once the lane moves on.
            let next = ReceiptJob(
                jobID: "job-after-1", accountID: "acct-lane", proof: .receipt("Y29tLnVydXMuaWFwLjk2NjU3Mjkw"))
            for job in [refused, next] {
                _ = try await producer.send(
                    KafkaProducerRecord(topic: setup.topics.jobs, key: job.messageKey, value: codec.encode(job)))
            }
            try await verdicts.waitForVerdicts(of: [next.jobID])
            try await deadLetters.waitForCount(1)
            let letter = try #require(deadLetters.all.first)
            #expect(letter.headers[DeadLetter.Header.reason] == "ledger_refused")
            #expect(letter.key == Array("acct-lane".utf8))
            #expect(try codec.decodeJob(letter.value) == refused)
            #expect(verdicts.verdicts.map(\.jobID) == [next.jobID], "no verdict for the refused job")
            try await PipelineHarness.poll("both jobs committed") { try await setup.committedOffset() == 2 }
            #expect(ledger.refusals == 1, "asked once, never retried")
            #expect(health.notReadyReasons.isEmpty || health.notReadyReasons == ["not_in_group"])

            await worker.drain(timeout: .seconds(5))
            try await run.value
            for reader in readers { reader.cancel() }
            await deadLetters.close()
            await verdicts.close()
            await producer.shutdown()
        }
    }
}

/// A ledger that fails every snapshot with an outage (`unavailable`) until ``end()``, and refuses for good the jobs
/// whose id starts with `refusing`; everything else goes to the real ledger.
final class OutageLedger: ForwardingLedger {
    private struct State {
        var outage: Bool
        var failures = 0
        var refusals = 0
    }

    let base: any Ledger
    private let refusing: String?
    private let state: Mutex<State>

    init(_ base: any Ledger, refusing: String? = nil) {
        self.base = base
        self.refusing = refusing
        state = Mutex(State(outage: refusing == nil))
    }

    var failures: Int { state.withLock { $0.failures } }
    var refusals: Int { state.withLock { $0.refusals } }

    func end() { state.withLock { $0.outage = false } }

    func snapshot(
        jobID: String, transactionIDs: [String], originalTransactionIDs: [String]
    ) async throws
        -> LedgerSnapshot
    {
        if let refusing, jobID.hasPrefix(refusing) {
            state.withLock { $0.refusals += 1 }
            throw LedgerError(.refused, "the test's refusal (SQLSTATE 22021)")
        }
        let outage = state.withLock { state in
            if state.outage { state.failures += 1 }
            return state.outage
        }
        if outage { throw LedgerError(.unavailable, "the test's outage") }
        return try await base.snapshot(
            jobID: jobID, transactionIDs: transactionIDs, originalTransactionIDs: originalTransactionIDs)
    }
}
