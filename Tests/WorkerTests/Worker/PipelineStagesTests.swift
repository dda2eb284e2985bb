import Decision
import Foundation
import Kafka
import Messages
import Synchronization
import Testing

@testable import Worker

/// A worker's jobs that wait for the ledger or Apple are parked as data, and only its stages' runners run them: with
/// forty accounts' jobs all waiting for Apple, no more than the Apple stage's limit are ever inside the Apple step,
/// the rest wait parked (the lanes that read them have ended), and once Apple answers every job gets its verdict, in
/// its account's order, and is committed.
@Suite("Pipeline: a worker's stages", .timeLimit(.minutes(3)))
struct PipelineStagesTests {
    @Test("jobs waiting for Apple are parked: at most the stage's runners in the Apple step, none lost, in order")
    func parkedUntilApple() async throws {
        let setup = try PipelineSingleWorkerSetup(name: "stages")
        let decider = PipelineParkingDecider(ledgerStageLimit: 3, storeStageLimit: 4)
        let producer = try setup.producer()
        let worker = try setup.worker(producer: producer, decider: decider, logger: PipelineDeliveryTests.quietLogger)
        let run = Task { try await worker.run() }

        let accounts = (0..<40).map { "acct-stage-\($0)" }
        var submitted: [String: [String]] = [:]
        var jobs: [String: ReceiptJob] = [:]
        let codec = MessageCodec()
        for round in 0..<3 {
            for (index, account) in accounts.enumerated() {
                // Each round another proof: a receipt the stages keep decoded, one with line breaks they keep as it
                // came, a transaction id.
                let receipt = Data((0..<(2_000 + index)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) })
                let proof: ReceiptJob.Proof =
                    switch round {
                    case 0: .receipt(receipt.base64EncodedString())
                    case 1: .receipt(receipt.base64EncodedString(options: .lineLength76Characters))
                    default: .transactionID("2000000\(round)")
                    }
                let job = ReceiptJob(
                    jobID: "\(account)-\(round)", accountID: account, proof: proof, bundleID: "com.example.app",
                    submittedAt: Date())
                submitted[account, default: []].append(job.jobID)
                // As the worker reads it (`submitted_at` in milliseconds).
                jobs[job.jobID] = try codec.decodeJob(codec.encode(job))
                _ = try await producer.send(
                    KafkaProducerRecord(topic: setup.topics.jobs, key: job.messageKey, value: codec.encode(job)))
            }
        }
        // Every job read and held: forty at the head of their accounts (four in the Apple step, thirty-six parked
        // for it), eighty behind them.
        try await PipelineHarness.poll("120 jobs in flight, 4 in the Apple step, 36 parked for it") {
            worker.inFlight == 120 && decider.inAppleStep == 4 && decider.askedApple.count == 4
                && decider.passedLedger == 40
        }
        #expect(decider.mostInAppleStep == 4, "the Apple stage's limit")
        #expect(decider.mostInLedgerStep <= 3, "the ledger stage's limit")

        decider.answer()
        try await PipelineHarness.poll("every job committed", timeout: .seconds(90)) {
            try await setup.committedOffset() == 120
        }
        #expect(decider.mostInAppleStep == 4, "never more than the Apple stage's limit")
        #expect(decider.askedApple.count == 120, "each job once")
        for account in accounts {
            #expect(decider.askedApple.filter { $0.hasPrefix(account + "-") } == submitted[account], "\(account)")
        }
        // Parked twice, each job reached the ledger step and the Apple step as it was sent, proof and all.
        #expect(decider.seen(in: .ledger) == jobs)
        #expect(decider.seen(in: .apple) == jobs)
        await worker.drain(timeout: .seconds(5))
        try await run.value
        await producer.shutdown()
    }
}

/// Parks every job for the ledger, then for Apple, where each waits until the test lets Apple answer; counts how many
/// are in each step at once and the order the Apple step saw the jobs in.
final class PipelineParkingDecider: JobStepping {
    struct Unused: Error {}

    private struct State {
        var inLedgerStep = 0
        var mostInLedgerStep = 0
        var passedLedger = 0
        var inAppleStep = 0
        var mostInAppleStep = 0
        var askedApple: [String] = []
        var seen: [Step: [String: ReceiptJob]] = [:]
        var answered = false
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    let ledgerStageLimit: Int
    let storeStageLimit: Int
    private let state = Mutex(State())

    init(ledgerStageLimit: Int, storeStageLimit: Int) {
        self.ledgerStageLimit = ledgerStageLimit
        self.storeStageLimit = storeStageLimit
    }

    var inAppleStep: Int { state.withLock { $0.inAppleStep } }
    var mostInAppleStep: Int { state.withLock { $0.mostInAppleStep } }
    var mostInLedgerStep: Int { state.withLock { $0.mostInLedgerStep } }
    var passedLedger: Int { state.withLock { $0.passedLedger } }
    /// Job ids in the order they entered the Apple step.
    var askedApple: [String] { state.withLock { $0.askedApple } }

    enum Step { case ledger, apple }

    /// The jobs as `step` got them, by id.
    func seen(in step: Step) -> [String: ReceiptJob] { state.withLock { $0.seen[step, default: [:]] } }

    func advance(_ flow: JobFlow) async throws -> JobFlow {
        switch flow {
        case .readProof(let job, let recordedAt):
            return .consultLedger(LedgerBoundJob(job: job, local: Self.local, recordedAt: recordedAt))
        case .consultLedger(let pending): return await consultLedger(pending)
        case .askStore(let pending): return .decided(await askStore(pending))
        case .decided: throw Unused()
        }
    }

    func consultLedger(_ pending: LedgerBoundJob) async -> JobFlow {
        state.withLock { state in
            state.inLedgerStep += 1
            state.mostInLedgerStep = max(state.mostInLedgerStep, state.inLedgerStep)
            state.seen[.ledger, default: [:]][pending.job.jobID] = pending.job
        }
        // Lets other runners in while this one is in the step, as a ledger call would.
        await Task.yield()
        state.withLock { state in
            state.inLedgerStep -= 1
            state.passedLedger += 1
        }
        return .askStore(
            StoreBoundJob(
                job: pending.job, local: Self.local, recordedAt: pending.recordedAt,
                deadline: ContinuousClock.now.advanced(by: .seconds(600))))
    }

    func askStore(_ pending: StoreBoundJob) async -> JobProcessor.Decided {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                state.inAppleStep += 1
                state.mostInAppleStep = max(state.mostInAppleStep, state.inAppleStep)
                state.askedApple.append(pending.job.jobID)
                state.seen[.apple, default: [:]][pending.job.jobID] = pending.job
                if state.answered { return true }
                state.waiting.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
        state.withLock { $0.inAppleStep -= 1 }
        let verdict = Verdict(
            job: pending.job, outcome: .rejected, reason: .malformed, decidedBy: .prefilter, decidedAt: Date())
        return JobProcessor.Decided(verdict: verdict, askedStore: true)
    }

    /// Apple answers: the jobs waiting in the Apple step go on, and later ones pass it at once.
    func answer() {
        let waiting = state.withLock { state in
            state.answered = true
            defer { state.waiting = [] }
            return state.waiting
        }
        waiting.forEach { $0.resume() }
    }

    static let local = LocalEvidence(
        evidence: PurchaseEvidence(source: .prefilter, authenticity: .unknown), environment: nil)
}

/// A key's next job starts where the scheduler puts it, the proof stage, not on the store stage's runner that
/// finished the key's previous job: with one store runner, a slow proof step of `acct-a`'s second job must not keep
/// `acct-b`'s job from the store.
@Suite("Pipeline: where a key's next job runs", .timeLimit(.minutes(2)))
struct PipelineNextJobTests {
    @Test("a key's next job waits in the proof stage: the store stage's only runner goes on with another key's job")
    func nextJobInProofStage() async throws {
        let setup = try PipelineSingleWorkerSetup(name: "next-job")
        let decider = PipelineNextJobDecider()
        let producer = try setup.producer()
        let worker = try setup.worker(producer: producer, decider: decider, logger: PipelineDeliveryTests.quietLogger)
        let run = Task { try await worker.run() }
        let codec = MessageCodec()
        func send(_ jobID: String, account: String) async throws {
            let job = ReceiptJob(jobID: jobID, accountID: account, proof: .transactionID("2000000001"))
            _ = try await producer.send(
                KafkaProducerRecord(topic: setup.topics.jobs, key: job.messageKey, value: codec.encode(job)))
        }
        try await send("a-first", account: "acct-a")
        try await send("a-second", account: "acct-a")
        try await PipelineHarness.poll("a-first decided by the store, a-second held in its proof step") {
            decider.askedStore == ["a-first"] && decider.holdingProof
        }
        try await send("b-first", account: "acct-b")
        // On the store runner that finished `a-first`, `a-second` would hold the only runner until released.
        try await PipelineHarness.poll("b-first decided by the store while a-second still reads its proof") {
            decider.askedStore == ["a-first", "b-first"]
        }
        #expect(decider.holdingProof)
        decider.releaseProof()
        try await PipelineHarness.poll("every job committed") { try await setup.committedOffset() == 3 }
        #expect(decider.askedStore == ["a-first", "b-first"], "a-second was decided by its proof step")
        await worker.drain(timeout: .seconds(5))
        try await run.value
        await producer.shutdown()
    }
}

/// Sends every job to the store except `a-second`, whose proof step holds until the test releases it; one runner in
/// the ledger and store stages each.
final class PipelineNextJobDecider: JobStepping {
    private struct State {
        var askedStore: [String] = []
        var holding: CheckedContinuation<Void, Never>?
        var released = false
    }
    private let state = Mutex(State())

    let ledgerStageLimit = 1
    let storeStageLimit = 1

    var askedStore: [String] { state.withLock { $0.askedStore } }
    var holdingProof: Bool { state.withLock { $0.holding != nil } }

    func releaseProof() {
        let holding = state.withLock { state in
            state.released = true
            defer { state.holding = nil }
            return state.holding
        }
        holding?.resume()
    }

    func advance(_ flow: JobFlow) async throws -> JobFlow {
        switch flow {
        case .readProof(let job, let recordedAt):
            guard job.jobID == "a-second" else {
                return .consultLedger(
                    LedgerBoundJob(job: job, local: PipelineParkingDecider.local, recordedAt: recordedAt))
            }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.released { return true }
                    state.holding = continuation
                    return false
                }
                if now { continuation.resume() }
            }
            return .decided(Self.decided(job))
        case .consultLedger(let pending):
            return .askStore(
                StoreBoundJob(
                    job: pending.job, local: pending.local, recordedAt: pending.recordedAt,
                    deadline: ContinuousClock.now.advanced(by: .seconds(60))))
        case .askStore(let pending):
            state.withLock { $0.askedStore.append(pending.job.jobID) }
            return .decided(Self.decided(pending.job))
        case .decided:
            return flow
        }
    }

    private static func decided(_ job: ReceiptJob) -> JobProcessor.Decided {
        JobProcessor.Decided(
            verdict: Verdict(
                job: job, outcome: .rejected, reason: .malformed, decidedBy: .prefilter, decidedAt: Date()),
            askedStore: true)
    }
}
