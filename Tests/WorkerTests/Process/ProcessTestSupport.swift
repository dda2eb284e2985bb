import AppleSimulator
import Foundation
import Kafka
import Logging
import Messages
import Operations
import Receipts
import Synchronization
import Testing
import Traffic

/// A process-level test failed to reach a state in time, or a child misbehaved.
struct ProcessTestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Small tools of the process-level suites (prefixed `ProcessTest` to keep the test target's names apart).
enum ProcessTest {
    static let bundleID = "com.example.processtest"
    static let catalog = Catalog(
        bundleIDs: [bundleID],
        products: [
            .init(id: "com.example.processtest.coins", type: .consumable),
            .init(id: "com.example.processtest.premium", type: .nonConsumable),
        ])

    /// Polls `condition` until it holds; fails after `limit` with `what` in the message. The poll interval is not a
    /// guess at how long something takes: the wait ends as soon as the condition holds.
    static func eventually(
        _ what: String, within limit: Duration, every interval: Duration = .milliseconds(50),
        _ condition: () async throws -> Bool
    ) async throws {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: limit)
        while true {
            if try await condition() { return }
            guard clock.now < deadline else { throw ProcessTestFailure("timed out after \(limit) waiting for \(what)") }
            try await Task.sleep(for: interval)
        }
    }

    /// The status and body of a GET, or nil when nothing answers (connection refused while a child starts).
    static func get(_ url: URL) async -> (status: Int, body: String)? {
        await TestHTTP.get(url.absoluteString)
    }

    static func post(_ url: URL, json: String) async throws -> Int {
        try await TestHTTP.post(url.absoluteString, json: json)
    }
}

/// One child process of the built `verify-worker`, with its stdout read line by line and its stderr in a file.
final class ProcessTestChild: Sendable {
    let name: String
    let stderrFile: URL
    let lines: TestChild

    init(name: String, arguments: [String], environment: [String: String]? = nil, stderrFile: URL) throws {
        self.name = name
        self.stderrFile = stderrFile
        lines = try TestChild.verifyWorker(
            arguments, environment: environment ?? ProcessInfo.processInfo.environment, logFile: stderrFile,
            opensStdin: true, name: name)
    }

    var isRunning: Bool { lines.isRunning }

    func signal(_ signal: Int32) { lines.process.signal(signal) }

    /// Waits until the process exits and returns its status (128 + n when killed by signal n); fails after `limit`.
    func exitStatus(within limit: Duration) async throws -> Int32 {
        switch await lines.process.waitForExit(timeout: limit) {
        case .exited(let code): return code
        case .signalled(let signal): return 128 + signal
        case nil: throw ProcessTestFailure("\(name) did not exit within \(limit)")
        }
    }

    /// The child's standard error so far (its logs), for failure messages.
    var standardError: String {
        (try? String(contentsOf: stderrFile, encoding: .utf8)) ?? ""
    }

    /// The last lines of the child's standard error.
    func logTail(_ count: Int = 15) -> String {
        standardError.split(separator: "\n").suffix(count).joined(separator: "\n")
    }
}

/// A `verify-worker run` child and its operations port.
struct ProcessTestWorker: Sendable {
    let child: ProcessTestChild
    let metricsPort: Int

    func url(_ path: String) -> URL {
        URL(string: "http://127.0.0.1:\(metricsPort)/\(path)")!  // Built from a number: always a valid URL.
    }

    /// Waits until `/readyz` answers 200 (joined the group, ledger reachable).
    func waitUntilReady(within limit: Duration = .seconds(40)) async throws {
        do {
            try await ProcessTest.eventually("\(child.name) /readyz 200", within: limit) {
                guard child.isRunning else {
                    throw ProcessTestFailure("\(child.name) exited while starting:\n\(child.logTail())")
                }
                return await ProcessTest.get(url("readyz"))?.status == 200
            }
        } catch let failure as ProcessTestFailure {
            throw ProcessTestFailure("\(failure.description)\n\(child.name) log:\n\(child.logTail())")
        }
    }
}

/// A dev-broker, an apple-sim process and the files workers read, in one temporary directory; workers started from
/// it share one SQLite ledger file and one consumer group. An in-process simulator on the same state directory
/// mints the receipts (the simulator verifies statelessly, by its keys).
final class ProcessTestStack: Sendable {
    let directory: URL
    let broker: KafkaTestBrokerProcess
    let bootstrap: String
    let simulator: ProcessTestChild
    let simulatorURL: URL
    let minter: AppleSimulator
    let partitions: Int
    let groupID: String
    private let children = Mutex<[ProcessTestChild]>([])

    private init(
        directory: URL, broker: KafkaTestBrokerProcess, bootstrap: String, simulator: ProcessTestChild,
        simulatorURL: URL, minter: AppleSimulator, partitions: Int
    ) {
        self.directory = directory
        self.broker = broker
        self.bootstrap = bootstrap
        self.simulator = simulator
        self.simulatorURL = simulatorURL
        self.minter = minter
        self.partitions = partitions
        groupID = "process-test-\(UUID().uuidString.prefix(8))"
    }

    static func start(partitions: Int = 4) async throws -> ProcessTestStack {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "verify-process-test-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try JSONEncoder().encode(ProcessTest.catalog).write(to: directory.appendingPathComponent("catalog.json"))
        let broker = try KafkaTestBrokerProcess(arguments: [
            "dev-broker", "--brokers", "1", "--partitions", String(partitions),
        ])
        let bootstrap: String
        do { bootstrap = try await broker.bootstrap() } catch {
            broker.terminateIfRunning()
            throw error
        }
        let state = directory.appendingPathComponent("sim-state")
        let simulator: ProcessTestChild
        do {
            simulator = try ProcessTestChild(
                name: "apple-sim", arguments: ["apple-sim", "--port", "0", "--state-dir", state.path],
                stderrFile: directory.appendingPathComponent("apple-sim.log"))
        } catch {
            broker.terminateIfRunning()
            throw error
        }
        guard let line = await simulator.lines.nextLine(), line.hasPrefix("listening="),
            let url = URL(string: String(line.dropFirst("listening=".count)))
        else {
            simulator.signal(SIGKILL)
            broker.terminateIfRunning()
            throw ProcessTestFailure("apple-sim printed no listening= line:\n\(simulator.logTail())")
        }
        var configuration = AppleSimulatorConfiguration()
        configuration.stateDirectory = state
        configuration.logger.logLevel = .critical
        let minter = try AppleSimulator(configuration: configuration)
        return ProcessTestStack(
            directory: directory, broker: broker, bootstrap: bootstrap, simulator: simulator, simulatorURL: url,
            minter: minter, partitions: partitions)
    }

    /// Starts a stack and a verdict reader, runs `body`, then stops the reader and every child.
    static func withStack(
        partitions: Int = 4, _ body: (ProcessTestStack, ProcessTestVerdicts) async throws -> Void
    ) async throws {
        let stack = try await start(partitions: partitions)
        defer { stack.tearDown() }
        let verdicts = try ProcessTestVerdicts(bootstrap: stack.bootstrap)
        let reading = Task { try await verdicts.run() }
        defer { reading.cancel() }
        do {
            try await body(stack, verdicts)
        } catch {
            await verdicts.close()
            throw error
        }
        await verdicts.close()
    }

    /// The environment of a `run` child: the test's own minus any `VERIFY_` key, plus the stack's settings and
    /// `overrides`.
    func workerEnvironment(workerID: String, metricsPort: Int, overrides: [String: String] = [:]) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("VERIFY_") }
        let state = directory.appendingPathComponent("sim-state")
        let settings: [String: String] = [
            "VERIFY_BROKERS": bootstrap,
            "VERIFY_GROUP_ID": groupID,
            "VERIFY_WORKER_ID": workerID,
            "VERIFY_LEDGER_URL": "sqlite:" + directory.appendingPathComponent("ledger.sqlite").path,
            "VERIFY_CATALOG_FILE": directory.appendingPathComponent("catalog.json").path,
            "VERIFY_TRUST_ANCHORS": ["pki-rsa-root.pem", "pki-ec-root.pem"].map {
                state.appendingPathComponent($0).path
            }.joined(separator: ","),
            "VERIFY_ALLOW_SANDBOX": "true",
            "VERIFY_VERIFY_RECEIPT_PRODUCTION_URL": simulatorURL.appendingPathComponent("verifyReceipt").absoluteString,
            "VERIFY_VERIFY_RECEIPT_SANDBOX_URL": simulatorURL.appendingPathComponent("sandbox/verifyReceipt")
                .absoluteString,
            "VERIFY_METRICS_PORT": String(metricsPort),
            "VERIFY_METRICS_HOST": "127.0.0.1",
            "VERIFY_DRAIN_TIMEOUT_S": "5",
            // A killed member's partitions move after its session times out: keep that short.
            "VERIFY_KAFKA_PROPERTIES": "session.timeout.ms=6000;heartbeat.interval.ms=500",
            "VERIFY_LOG_LEVEL": "notice",
            "VERIFY_LOG_FORMAT": "text",
        ]
        environment.merge(settings) { _, new in new }
        environment.merge(overrides) { _, new in new }
        return environment
    }

    /// Starts `verify-worker run` (not yet ready: see ``ProcessTestWorker/waitUntilReady(within:)``).
    func startWorker(_ workerID: String, overrides: [String: String] = [:]) throws -> ProcessTestWorker {
        let port = try FreeLocalPort.pick()
        let child = try ProcessTestChild(
            name: workerID, arguments: ["run"],
            environment: workerEnvironment(workerID: workerID, metricsPort: port, overrides: overrides),
            stderrFile: directory.appendingPathComponent("\(workerID)-\(UUID().uuidString.prefix(4)).log"))
        children.withLock { $0.append(child) }
        return ProcessTestWorker(child: child, metricsPort: port)
    }

    /// Every answer of the simulated Apple (not `/sim/*`) waits this long.
    func setAppleLatency(milliseconds: Int) async throws {
        let status = try await ProcessTest.post(
            simulatorURL.appendingPathComponent("sim/faults"), json: #"{"latency_ms": \#(milliseconds)}"#)
        guard status == 200 else { throw ProcessTestFailure("POST /sim/faults answered \(status)") }
    }

    /// Jobs for the test app, minted by the in-process simulator.
    func jobs(_ count: Int, mix: TrafficMix, seed: UInt64 = 7) throws -> [GeneratedJob] {
        var generator = SeedTrafficGenerator(
            simulator: minter, bundleID: ProcessTest.bundleID, productIDs: ProcessTest.catalog.products.keys.sorted(),
            mix: mix, seed: seed)
        return try generator.generate(count: count)
    }

    /// Produces the jobs keyed by account and waits for every delivery report.
    func produce(_ jobs: [GeneratedJob]) async throws {
        let producer = try KafkaTest.producer(bootstrap: bootstrap)
        let codec = MessageCodec()
        try await withThrowingDiscardingTaskGroup { group in
            for generated in jobs {
                let record = KafkaProducerRecord(
                    topic: "receipt-jobs", key: Array(generated.job.accountID.utf8), value: codec.encode(generated.job))
                group.addTask { _ = try await producer.send(record) }
            }
        }
        await producer.shutdown()
    }

    /// Kills every child still running and removes the directory (unless `keepFiles`, to read the logs).
    func tearDown(keepFiles: Bool = false) {
        for child in children.withLock({ $0 }) { child.signal(SIGKILL) }
        simulator.signal(SIGKILL)
        broker.terminateIfRunning()
        if !keepFiles { try? FileManager.default.removeItem(at: directory) }
    }
}

/// Reads `receipt-verdicts` in a group of its own and keeps every verdict per job id.
final class ProcessTestVerdicts: Sendable {
    private let consumer: KafkaConsumer
    private let verdicts = Mutex<[String: [Verdict]]>([:])
    private let unreadable = Mutex(0)

    init(bootstrap: String) throws {
        consumer = try KafkaTest.consumer(bootstrap, group: KafkaTest.uniqueGroup("process-verdicts"))
        try consumer.subscribe(topics: ["receipt-verdicts"])
    }

    /// Runs until the consumer is closed.
    func run() async throws {
        let codec = MessageCodec()
        for try await event in consumer.events {
            guard case .message(let message) = event else { continue }
            if let verdict = try? codec.decodeVerdict(message.value ?? []) {
                verdicts.withLock { $0[verdict.jobID, default: []].append(verdict) }
            } else {
                unreadable.withLock { $0 += 1 }
            }
        }
    }

    func close() async { await consumer.close() }

    var unreadableCount: Int { unreadable.withLock { $0 } }

    /// Every verdict seen, per job id.
    var all: [String: [Verdict]] { verdicts.withLock { $0 } }

    /// How many of `jobs` have at least one verdict.
    func decided(_ jobs: [GeneratedJob]) -> Int {
        verdicts.withLock { verdicts in jobs.filter { verdicts[$0.job.jobID] != nil }.count }
    }

    /// Waits until every job has a verdict; fails after `limit` saying how many are missing.
    func waitForAll(_ jobs: [GeneratedJob], within limit: Duration, logs: () -> String = { "" }) async throws {
        do {
            try await ProcessTest.eventually("a verdict for each of \(jobs.count) jobs", within: limit) {
                decided(jobs) == jobs.count
            }
        } catch {
            throw ProcessTestFailure("\(decided(jobs)) of \(jobs.count) jobs have a verdict: \(error)\n\(logs())")
        }
    }

    /// Checks the at-least-once contract over `jobs`: every verdict repeated for a job (a redelivery) is identical
    /// in id, outcome and reason, and no transaction is granted to two accounts.
    func checkConsistency(_ jobs: [GeneratedJob]) {
        let all = self.all
        var grantedTo: [String: Set<String>] = [:]
        for generated in jobs {
            let seen = all[generated.job.jobID] ?? []
            if let first = seen.first {
                for again in seen.dropFirst() {
                    #expect(again.verdictID == first.verdictID, "job \(generated.job.jobID): verdict id changed")
                    #expect(again.outcome == first.outcome, "job \(generated.job.jobID): outcome changed")
                    #expect(again.reason == first.reason, "job \(generated.job.jobID): reason changed")
                }
                if first.outcome == .granted || first.outcome == .alreadyGranted {
                    for transaction in first.transactions {
                        grantedTo[transaction.transactionID, default: []].insert(first.accountID)
                    }
                }
            }
        }
        for (transaction, accounts) in grantedTo {
            #expect(accounts.count == 1, "transaction \(transaction) granted to \(accounts.count) accounts")
        }
        #expect(unreadableCount == 0)
    }
}
