import AppleSimulator
import Demo
import Foundation
import Kafka
import Logging
import Messages
import Operations
import Synchronization
import Testing
import Worker

/// One in-process deployment for end-to-end tests: a mock cluster, the Apple simulator, a ledger, workers that run
/// `verify-worker run`'s runtime (started and stopped one by one), a frontend producer and a verdict reader.
final class PipelineHarness: Sendable {
    static let bundleID = DemoApp.bundleID
    static let consumable = "com.example.verifyworker.coins100"
    static let partitions = 4

    let cluster: MockKafkaCluster
    let simulator: AppleSimulator
    let port: Int
    let files: DemoFiles
    let ledgerURL: String
    let producer: KafkaProducer
    let verdicts: PipelineVerdictLog
    let deadLetters: PipelineVerdictLog
    private let workers = Mutex<[Int: PipelineWorkerHandle]>([:])
    private let logger: Logger

    private init(
        cluster: MockKafkaCluster, simulator: AppleSimulator, port: Int, files: DemoFiles, ledgerURL: String,
        logger: Logger
    ) throws {
        self.cluster = cluster
        self.simulator = simulator
        self.port = port
        self.files = files
        self.ledgerURL = ledgerURL
        self.logger = logger
        producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers, clientID: "frontend"),
            logger: logger)
        verdicts = try PipelineVerdictLog(
            bootstrap: cluster.bootstrapServers, topic: Topics.verdicts, group: "test-verdicts", logger: logger)
        deadLetters = try PipelineVerdictLog(
            bootstrap: cluster.bootstrapServers, topic: Topics.deadLetters, group: "test-dlq", logger: logger)
    }

    /// Runs `body` with a fresh deployment (no worker started yet), then stops everything.
    static func with<T: Sendable>(
        ledgerURL: String? = nil, simulatorSharedSecret: String? = nil, simulatorApps: [SimulatedApp] = [],
        _ body: @Sendable (PipelineHarness) async throws -> T
    ) async throws -> T {
        var logger = Logger(label: "e2e")
        logger.logLevel = .error
        let cluster = try MockKafkaCluster(brokers: 1)
        for topic in [Topics.jobs, Topics.verdicts, Topics.deadLetters, Topics.control] {
            try cluster.createTopic(topic, partitions: partitions)
        }
        var configuration = AppleSimulatorConfiguration()
        configuration.logger.logLevel = .critical
        configuration.sharedSecret = simulatorSharedSecret
        configuration.apps = simulatorApps
        configuration.pki = try AppleSimHarness.sharedPKI.get()
        let simulator = try AppleSimulator(configuration: configuration)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await simulator.run() }
            let port = try await simulator.waitUntilReady()
            let files = try DemoFiles(simulator: simulator)
            defer { files.remove() }
            let harness = try PipelineHarness(
                cluster: cluster, simulator: simulator, port: port, files: files,
                ledgerURL: ledgerURL ?? "sqlite:" + files.ledger.path, logger: logger)
            group.addTask { try await harness.verdicts.run() }
            group.addTask { try await harness.deadLetters.run() }
            do {
                let result = try await body(harness)
                await harness.stopAll()
                await harness.verdicts.close()
                await harness.deadLetters.close()
                await harness.producer.shutdown()
                group.cancelAll()
                return result
            } catch {
                harness.workers.withLock { $0.values.forEach { $0.task.cancel() } }
                await harness.verdicts.close()
                await harness.deadLetters.close()
                group.cancelAll()
                throw error
            }
        }
    }

    // MARK: Workers

    /// Starts worker `index` (its own runtime, as a separate pod would be).
    func startWorker(
        _ index: Int, extra: [String: String] = [:], environment: [String: String] = [:],
        jobDeadline: Duration = .seconds(60)
    ) throws {
        let configuration = try DemoRun.workerConfiguration(
            index: index, bootstrap: cluster.bootstrapServers, port: port, files: files, ledgerURL: ledgerURL,
            jobDeadline: jobDeadline, extra: extra, environment: environment)
        let runtime = WorkerRuntime(configuration: configuration, logger: logger, serveOperations: false)
        let stop = OneShot<Void>()
        let health = WorkerHealth()
        let task = Task { try await runtime.run(health: health) { _ = await stop.wait() } }
        workers.withLock { $0[index] = PipelineWorkerHandle(task: task, stop: stop, health: health) }
    }

    /// Asks worker `index` to drain and waits for it to stop; returns how it ended.
    @discardableResult
    func stopWorker(_ index: Int) async throws -> WorkerRuntime.Exit? {
        guard let handle = workers.withLock({ $0.removeValue(forKey: index) }) else { return nil }
        handle.stop.resolve(())
        return try await handle.task.value
    }

    /// Cancels worker `index`'s task without asking it to stop first (the closest an in-process test gets to a
    /// crash); waits for the task to end.
    func cancelWorker(_ index: Int) async {
        guard let handle = workers.withLock({ $0.removeValue(forKey: index) }) else { return }
        handle.task.cancel()
        _ = try? await handle.task.value
    }

    func stopAll() async {
        for index in workers.withLock({ Array($0.keys) }) { _ = try? await stopWorker(index) }
    }

    func health(_ index: Int) -> WorkerHealth? { workers.withLock { $0[index]?.health } }

    /// Waits until the running workers hold every partition of the jobs topic between them, and the readers theirs.
    func waitUntilAssigned(timeout: Duration = .seconds(30)) async throws {
        try await PipelineHarness.poll("partitions assigned", timeout: timeout) {
            let held = workers.withLock { $0.values.map(\.health.assignedPartitions).reduce(0, +) }
            return held == Self.partitions && verdicts.isAssigned && deadLetters.isAssigned
        }
    }

    // MARK: Jobs

    /// A genuine consumable purchase minted by the simulator, as a job of `account`.
    func genuineJob(
        account: String, format: SimulatedReceiptFormat = .appReceipt, environment: AppleEnvironment = .production
    ) throws -> (job: ReceiptJob, transactionID: String) {
        let minted = try simulator.mint(
            MintRequest(bundleId: Self.bundleID, productId: Self.consumable, format: format, environment: environment))
        let proof: ReceiptJob.Proof =
            format == .signedTransaction ? .signedTransaction(minted.receipt) : .receipt(minted.receipt)
        let job = ReceiptJob(
            jobID: "job-" + UUID().uuidString.lowercased(), accountID: account, proof: proof,
            bundleID: Self.bundleID, submittedAt: Date())
        return (job, minted.transaction.transactionId)
    }

    func submit(_ jobs: [ReceiptJob]) async throws {
        let codec = MessageCodec()
        for job in jobs {
            _ = try await producer.send(
                KafkaProducerRecord(topic: Topics.jobs, key: job.messageKey, value: codec.encode(job)))
        }
    }

    func submitRaw(_ value: [UInt8], key: String) async throws {
        _ = try await producer.send(KafkaProducerRecord(topic: Topics.jobs, key: Array(key.utf8), value: value))
    }

    /// Polls `condition` until it holds or `timeout` passes (then the test fails with `what`).
    static func poll(
        _ what: String, timeout: Duration = .seconds(60), _ condition: @Sendable () async throws -> Bool
    ) async throws {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        while clock.now < deadline {
            if try await condition() { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("timed out waiting for: \(what)")
        throw PipelineHarnessTimeout(what: what)
    }
}

struct PipelineHarnessTimeout: Error {
    let what: String
}

struct PipelineWorkerHandle: Sendable {
    let task: Task<WorkerRuntime.Exit, any Error>
    let stop: OneShot<Void>
    let health: WorkerHealth
}

/// Every record of one topic, read by a group of its own: values in arrival order, verdicts by job.
final class PipelineVerdictLog: Sendable {
    struct Record: Sendable {
        var key: [UInt8]?
        var value: [UInt8]
        var headers: [String: String]
        var partition: Int32
    }

    let consumer: KafkaConsumer
    private let records = Mutex<[Record]>([])

    init(bootstrap: String, topic: String, group: String, logger: Logger) throws {
        consumer = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(bootstrapServers: bootstrap, groupID: group), logger: logger)
        try consumer.subscribe(topics: [topic])
    }

    var isAssigned: Bool { consumer.assignment.count == PipelineHarness.partitions }

    func run() async throws {
        for try await event in consumer.events {
            guard case .message(let message) = event else { continue }
            var headers: [String: String] = [:]
            for header in message.headers { headers[header.name] = String(decoding: header.value ?? [], as: UTF8.self) }
            let record = Record(
                key: message.key, value: message.value ?? [], headers: headers, partition: message.partition)
            records.withLock { $0.append(record) }
        }
    }

    func close() async { await consumer.close() }

    var all: [Record] { records.withLock { $0 } }

    /// The verdicts read so far, in arrival order.
    var verdicts: [Verdict] {
        let codec = MessageCodec()
        return all.compactMap { try? codec.decodeVerdict($0.value) }
    }

    /// The verdicts of each job.
    var byJob: [String: [Verdict]] { Dictionary(grouping: verdicts, by: \.jobID) }

    /// Waits until every job of `jobIDs` has at least one verdict.
    func waitForVerdicts(of jobIDs: [String], timeout: Duration = .seconds(60)) async throws {
        try await PipelineHarness.poll("verdicts of \(jobIDs.count) jobs", timeout: timeout) {
            let decided = Set(self.verdicts.map(\.jobID))
            return jobIDs.allSatisfy(decided.contains)
        }
    }

    func waitForCount(_ count: Int, timeout: Duration = .seconds(60)) async throws {
        try await PipelineHarness.poll("\(count) records", timeout: timeout) { self.all.count >= count }
    }
}
