import AppleClients
import AppleSimulator
import Crypto
import Decision
import Foundation
import Ledger
import Logging
import Messages
import Operations
import RateLimiter
import Receipts
import StoreHTTP
import Synchronization
import Testing

@testable import Worker

/// One Apple call per receipt: jobs of many accounts carrying one receipt at once share one answer,
/// within a worker (single flight) and across workers (the ledger's verification lease), with the verdicts the
/// rules give anyway: one grant, the rest `replayed`. Real ledgers (SQLite, and PostgreSQL where named), the
/// simulator as Apple, and a transport in front of it that counts the requests and holds them until the test lets
/// them go, so "every job is waiting" is a fact, not a guess.
@Suite("Apple call coalescing", .timeLimit(.minutes(3)))
struct AppleCoalescingTests {
    typealias S = LedgerTestSupport

    static let bundleID = "com.example.verifyworker"
    static let product = "com.example.verifyworker.coins100"
    static let catalog = Catalog(bundleIDs: [bundleID], products: [.init(id: product, type: .consumable)])

    @Test("50 jobs with one receipt on one worker: one verifyReceipt call, one grant, 49 replayed")
    func oneWorker() async throws {
        try await Rig.with(.sqlite) { rig in
            // No lease: the worker's single flight alone.
            let processor = rig.processor(rig.ledgers[0], coalescing: .init(leaseDuration: .zero))
            let receipt = try rig.mint()
            let jobs = (0..<50).map { Self.job(receipt, account: "acct-\($0)") }
            let verdicts = try await Self.decideAll(jobs, with: [processor]) {
                // One request out and 49 jobs waiting for it: only then does Apple answer.
                rig.transport.sent == 1 && processor.appStore.coalescer.followerCount == 49
            } release: {
                rig.transport.release()
            }
            #expect(rig.transport.sent == 1)
            #expect(rig.simulatorCalls == ["verifyReceipt": 1])
            #expect(Self.tally(verdicts) == ["granted": 1, "rejected/replayed": 49])
        }
    }

    @Test("the same account twice among them: its second job is already_granted, not a second grant")
    func sameAccountTwice() async throws {
        try await Rig.with(.sqlite) { rig in
            let processor = rig.processor(rig.ledgers[0])
            let receipt = try rig.mint()
            var jobs = (0..<8).map { Self.job(receipt, account: "acct-\($0)") }
            jobs.append(Self.job(receipt, account: "acct-0"))
            let verdicts = try await Self.decideAll(jobs, with: [processor]) {
                rig.transport.sent == 1 && processor.appStore.coalescer.followerCount == 8
            } release: {
                rig.transport.release()
            }
            #expect(rig.simulatorCalls == ["verifyReceipt": 1])
            let grants = verdicts.filter { $0.outcome == .granted }
            #expect(grants.count == 1)
            let winner = grants.first?.accountID
            var account0: [String] = []
            for verdict in verdicts where verdict.accountID == "acct-0" { account0.append(verdict.outcome.rawValue) }
            // acct-0's two jobs: granted and already granted when acct-0 won, else both replayed.
            #expect(
                account0.sorted() == (winner == "acct-0" ? ["already_granted", "granted"] : ["rejected", "rejected"]),
                "\(verdicts.map { "\($0.accountID) \($0.outcome.rawValue)" })")
        }
    }

    @Test("Apple answering 21007 at production: the hop to sandbox is part of the one call, for every job")
    func sandboxHop() async throws {
        try await Rig.with(.sqlite, apple: .production21007) { rig in
            let processor = rig.processor(rig.ledgers[0])
            let receipt = try rig.mint()
            let jobs = (0..<20).map { Self.job(receipt, account: "acct-\($0)") }
            let verdicts = try await Self.decideAll(jobs, with: [processor]) {
                rig.transport.sent == 1 && processor.appStore.coalescer.followerCount == 19
            } release: {
                rig.transport.release()
            }
            // 21007 from production, then the sandbox endpoint: two requests for twenty jobs.
            #expect(rig.transport.sent == 2)
            #expect(rig.transport.production21007 == 1)
            #expect(Self.tally(verdicts) == ["granted": 1, "rejected/replayed": 19])
        }
    }

    @Test("a leader cancelled mid-call: a follower calls instead, and every other job still gets its verdict")
    func cancelledLeader() async throws {
        try await Rig.with(.sqlite) { rig in
            let processor = rig.processor(rig.ledgers[0])
            let receipt = try rig.mint()
            let leader = Task { try await processor.decide(Self.job(receipt, account: "acct-leader")) }
            try await Self.poll("the leader's request") { rig.transport.sent == 1 }
            let followers = (0..<9).map { index in
                Task { try await processor.decide(Self.job(receipt, account: "acct-\(index)")) }
            }
            try await Self.poll("9 followers") { processor.appStore.coalescer.followerCount == 9 }
            leader.cancel()
            await #expect(throws: CancellationError.self) { try await leader.value }
            // The successor's request: let it through.
            try await Self.poll("the successor's request") { rig.transport.sent == 2 }
            rig.transport.release()
            var verdicts: [Verdict] = []
            for follower in followers { verdicts.append(try await follower.value.verdict) }
            #expect(rig.simulatorCalls == ["verifyReceipt": 1])
            #expect(Self.tally(verdicts) == ["granted": 1, "rejected/replayed": 8])
            #expect(processor.appStore.coalescer.flightCount == 0)
        }
    }

    @Test("two workers sharing one ledger: one call between them", arguments: LedgerBackend.allCases)
    func twoWorkers(backend: LedgerBackend) async throws {
        try await Rig.with(backend, ledgers: 2) { rig in
            let workers = rig.ledgers.map { rig.processor($0) }
            let receipt = try rig.mint()
            let jobs = (0..<40).map { Self.job(receipt, account: "acct-\($0)") }
            let verdicts = try await Self.decideAll(jobs, with: workers) {
                // One worker holds the lease and calls; the other's leader waits on the lease; 19 + 19 follow.
                rig.transport.sent == 1 && workers.map(\.appStore.coalescer.followerCount).reduce(0, +) == 38
            } release: {
                rig.transport.release()
            }
            #expect(rig.transport.sent == 1)
            #expect(rig.simulatorCalls == ["verifyReceipt": 1])
            #expect(Self.tally(verdicts) == ["granted": 1, "rejected/replayed": 39])
        }
    }

    @Test("Apple's rejection is shared across workers too: a receipt Apple refuses costs one call")
    func sharedRejection() async throws {
        try await Rig.with(.sqlite, ledgers: 2, holdRequests: false, apple: .answer(#"{"status":21003}"#)) { rig in
            let workers = rig.ledgers.map { rig.processor($0) }
            let receipt = try rig.mint()
            let jobs = (0..<10).map { Self.job(receipt, account: "acct-\($0)") }
            let first = try await workers[0].decide(jobs[0])
            #expect(first.verdict.outcome == .rejected && first.verdict.reason == .notAuthenticated)
            // A rejection claims nothing: without the lease's answer each of these would ask Apple again.
            let rest = try await Self.decideAll(Array(jobs.dropFirst()), with: [workers[1], workers[0]]) {
                true
            } release: {
            }
            #expect(rig.transport.sent == 1)
            #expect(Self.tally(rest) == ["rejected/not_authenticated": 9])
        }
    }

    @Test(
        "a crashed holder's lease: jobs wait for its expiry (not before), then one of them calls; none is lost",
        arguments: LedgerBackend.allCases)
    func crashedHolder(backend: LedgerBackend) async throws {
        try await Rig.with(backend, holdRequests: false) { rig in
            let wall = ManualWallClock(Date(timeIntervalSince1970: 1_800_000_000))
            let counting = LeaseCountingLedger(rig.ledgers[0])
            let processor = rig.processor(
                counting, coalescing: .init(leaseDuration: .seconds(10), wallClock: wall.now), jobDeadline: .seconds(60)
            )
            let receipt = try rig.mint()
            let key = try #require(processor.appStore.appleBound(receipt)?.coalescingKey)
            // A worker took the lease and died: nobody will record an answer or release it.
            let leases = rig.ledgers[0]
            _ = try await leases.acquireVerificationLease(
                key: key, holder: "crashed-worker", now: wall.now(), duration: .seconds(10))
            let started = ContinuousClock.now
            let jobs = (0..<10).map { Self.job(receipt, account: "acct-\($0)") }
            let verdicts = try await Self.decideAll(jobs, with: [processor]) {
                // The leader found the lease held three times, and the rest wait for it.
                counting.acquisitions >= 3 && processor.appStore.coalescer.followerCount == 9
            } release: {
                // Nobody asked Apple while the lease lived.
                #expect(rig.transport.sent == 0)
                wall.advance(by: 10)
            }
            #expect(rig.transport.sent == 1)
            #expect(Self.tally(verdicts) == ["granted": 1, "rejected/replayed": 9])
            #expect(started.duration(to: .now) < .seconds(60))

            // A lease that expired long ago holds nobody back.
            let second = try rig.mint()
            let secondKey = try #require(processor.appStore.appleBound(second)?.coalescingKey)
            _ = try await leases.acquireVerificationLease(
                key: secondKey, holder: "crashed-worker", now: wall.now().addingTimeInterval(-60),
                duration: .seconds(10))
            let decided = try await processor.decide(Self.job(second, account: "acct-x"))
            #expect(decided.verdict.outcome == .granted)
            #expect(rig.transport.sent == 2)
        }
    }

    @Test("a lease that outlives a job's deadline ends the job at its deadline, unverifiable, not later")
    func leaseNeverPushesPastDeadline() async throws {
        try await Rig.with(.sqlite, holdRequests: false) { rig in
            let processor = rig.processor(rig.ledgers[0], jobDeadline: .seconds(1))
            let receipt = try rig.mint()
            let key = try #require(processor.appStore.appleBound(receipt)?.coalescingKey)
            let leases = rig.ledgers[0]
            _ = try await leases.acquireVerificationLease(
                key: key, holder: "stuck-worker", now: Date(), duration: .seconds(600))
            let clock = ContinuousClock()
            let started = clock.now
            let decided = try await processor.decide(Self.job(receipt, account: "acct-1"))
            let elapsed = started.duration(to: clock.now)
            #expect(decided.verdict.outcome == .unverifiable && decided.verdict.reason == .appleUnavailable)
            // At the 1 s deadline, far from the lease's 600 s (the bound leaves room for a loaded machine: 5 s was
            // exceeded once in a CI run beside a build).
            #expect(elapsed >= .seconds(1) && elapsed < .seconds(60), "\(elapsed)")
            #expect(rig.transport.sent == 0)
        }
    }

    @Test("coalescing off: every job asks Apple itself (the figure `bench replay-storm --no-coalescing` shows)")
    func coalescingOff() async throws {
        try await Rig.with(.sqlite) { rig in
            let processor = rig.processor(rig.ledgers[0], coalescing: .init(enabled: false))
            let receipt = try rig.mint()
            let jobs = (0..<5).map { Self.job(receipt, account: "acct-\($0)") }
            let verdicts = try await Self.decideAll(jobs, with: [processor]) {
                rig.transport.sent == 5
            } release: {
                rig.transport.release()
            }
            #expect(rig.simulatorCalls == ["verifyReceipt": 5])
            #expect(Self.tally(verdicts) == ["granted": 1, "rejected/replayed": 4])
        }
    }

    // MARK: Helpers

    static func job(_ receipt: String, account: String) -> ReceiptJob {
        ReceiptJob(
            jobID: "job-" + UUID().uuidString.lowercased(), accountID: account, proof: .receipt(receipt),
            bundleID: bundleID, submittedAt: Date())
    }

    /// Outcomes counted as `outcome` or `outcome/reason`.
    static func tally(_ verdicts: [Verdict]) -> [String: Int] {
        verdicts.reduce(into: [:]) { counts, verdict in
            let name = verdict.reason.map { "\(verdict.outcome.rawValue)/\($0.rawValue)" } ?? verdict.outcome.rawValue
            counts[name, default: 0] += 1
        }
    }

    /// Decides `jobs` at once, spread over `workers` in turn; once `ready` holds, runs `release`.
    static func decideAll(
        _ jobs: [ReceiptJob], with workers: [JobProcessor], until ready: @escaping @Sendable () -> Bool,
        release: () -> Void
    ) async throws -> [Verdict] {
        try await withThrowingTaskGroup(of: Verdict.self) { group in
            for (index, job) in jobs.enumerated() {
                let worker = workers[index % workers.count]
                group.addTask { try await worker.decide(job).verdict }
            }
            try await poll("every job waiting for the answer", ready)
            release()
            return try await group.reduce(into: []) { $0.append($1) }
        }
    }

    /// Polls `condition` every 5 ms, for at most 60 s.
    static func poll(_ what: String, _ condition: @Sendable () -> Bool) async throws {
        let limit = ContinuousClock.now.advanced(by: .seconds(60))
        while !condition() {
            guard ContinuousClock.now < limit else {
                Issue.record("timed out waiting for \(what)")
                throw CancellationError()
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}

/// The simulator, the ledgers of the workers (one URL, a connection each) and the counting transport.
struct AppleCoalescingRig: Sendable {
    let simulator: AppleSimulator
    let base: URL
    let transport: CountingTransport
    let ledgers: [any Ledger]
    let trust: TrustStore

    /// Requests the simulator counted at its verification endpoints.
    var simulatorCalls: [String: Int] { simulator.stats.snapshot().requests.filter { !$0.key.hasPrefix("sim/") } }

    func mint() throws -> String {
        try simulator.mint(
            MintRequest(
                bundleId: AppleCoalescingTests.bundleID, productId: AppleCoalescingTests.product,
                format: .appReceipt, environment: .production)
        ).receipt
    }

    func processor(
        _ ledger: any Ledger, coalescing: AppleCoalescingConfiguration = .init(),
        jobDeadline: Duration = .seconds(30)
    ) -> JobProcessor {
        var logger = Logger(label: "apple-coalescing-test")
        logger.logLevel = .error
        let catalog = AppleCoalescingTests.catalog
        return JobProcessor(
            analyzer: ReceiptAnalyzer(
                trust: trust, isWorthVerifying: ProofPolicy(catalog: catalog).isWorthVerifying(bundleID:)),
            ledger: ledger,
            apple: AppleCaller(
                gate: AppleCallGate(clock: ContinuousClock()), retryPolicy: RetryPolicy(maximumAttempts: 1),
                logger: logger),
            verifyReceipt: VerifyReceiptClient(
                transport: transport, configuration: .endpoints(base: base.absoluteString), logger: logger),
            serverAPI: nil,
            configuration: JobProcessor.Configuration(
                catalog: catalog, allowSandbox: true,
                jobDeadline: jobDeadline),
            health: WorkerHealth(), logger: logger, coalescing: coalescing)
    }
}

extension AppleCoalescingTests {
    typealias Rig = AppleCoalescingRig
}

extension AppleCoalescingRig {
    /// Runs `body` with a simulator and `ledgers` running ledgers on one fresh URL of `backend`.
    static func with(
        _ backend: LedgerBackend, ledgers count: Int = 1, holdRequests: Bool = true,
        apple: CountingTransport.Apple = .simulator, _ body: @Sendable (AppleCoalescingRig) async throws -> Void
    ) async throws {
        let url = try LedgerTestSupport.freshURL(backend)
        defer { LedgerTestSupport.removeFiles(of: url) }
        let engine = try CurlHTTPEngine()
        defer { engine.shutdown() }
        try await AppleSimHarness.with { sim in
            let ledgers = try (0..<count).map { _ in
                try LedgerFactory.make(url: url, configuration: LedgerTestSupport.patient)
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for ledger in ledgers { group.addTask { try await ledger.run() } }
                defer { group.cancelAll() }
                try await ledgers[0].migrate()
                sim.simulator.stats.reset()
                let rig = AppleCoalescingRig(
                    simulator: sim.simulator, base: sim.base,
                    transport: CountingTransport(engine, holding: holdRequests, apple: apple),
                    ledgers: ledgers, trust: try AppleEndToEndTests.trust(sim.simulator))
                try await body(rig)
                rig.transport.release()
            }
        }
    }
}

/// The Apple clients' transport in front of the simulator: counts requests, and (when holding) keeps each one
/// until ``release()`` (a cancelled request ends at once).
final class CountingTransport: HTTPTransport {
    /// Who answers.
    enum Apple: Sendable {
        /// The simulator.
        case simulator
        /// The production endpoint answers `{"status":21007}` itself, as Apple does for a sandbox receipt; sandbox
        /// requests go to the simulator's production endpoint (the receipt is a production one there).
        case production21007
        /// Every request is answered with this JSON.
        case answer(String)
    }

    private let inner: any HTTPTransport
    private let gate = OneShot<Void>()
    private let counts = Mutex((sent: 0, production21007: 0))
    private let apple: Apple

    init(_ inner: any HTTPTransport, holding: Bool, apple: Apple) {
        self.inner = inner
        self.apple = apple
        if !holding { gate.resolve(()) }
    }

    var sent: Int { counts.withLock { $0.sent } }
    var production21007: Int { counts.withLock { $0.production21007 } }

    func release() { gate.resolve(()) }

    func execute(_ request: TransportRequest) async throws -> TransportResponse {
        counts.withLock { $0.sent += 1 }
        guard await gate.wait() != nil else { throw CancellationError() }
        switch apple {
        case .simulator:
            return try await inner.execute(request)
        case .answer(let json):
            return TransportResponse(status: 200, body: Array(json.utf8))
        case .production21007:
            if !request.url.contains("/sandbox/") {
                counts.withLock { $0.production21007 += 1 }
                return TransportResponse(status: 200, body: Array(#"{"status":21007}"#.utf8))
            }
            var forwarded = request
            forwarded.url = request.url.replacingOccurrences(of: "/sandbox/", with: "/")
            return try await inner.execute(forwarded)
        }
    }
}

/// A wall clock that moves only when told to.
final class ManualWallClock: Sendable {
    private let current: Mutex<Date>

    init(_ start: Date) { current = Mutex(start) }

    var now: @Sendable () -> Date { { self.current.withLock { $0 } } }

    func advance(by seconds: TimeInterval) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }
}

/// A ledger that counts the verification leases asked for, and otherwise is the ledger it wraps.
final class LeaseCountingLedger: ForwardingLedger {
    let base: any Ledger
    private let count = Atomic<Int>(0)

    init(_ base: any Ledger) { self.base = base }

    var acquisitions: Int { count.load(ordering: .relaxed) }

    func acquireVerificationLease(
        key: String, holder: String, now: Date, duration: Duration
    ) async throws -> VerificationLeaseState {
        count.add(1, ordering: .relaxed)
        return try await base.acquireVerificationLease(key: key, holder: holder, now: now, duration: duration)
    }
}

extension JobProcessor {
    /// The processor's store, which these tests build as the App Store.
    var appStore: AppStore { (store as! PurchaseStores).appStore as! AppStore }
}
