import Foundation
import Logging
import Messages
import Observability
import Synchronization
import Testing

@testable import Kafka
@testable import Worker

/// A consumer that hands on an offset past one it never handed on (a fetcher that skipped a batch) must not make
/// the worker commit past the skipped messages: that would lose those jobs for good (漏单).
@Suite("Pipeline: offsets skipped by the consumer")
struct OffsetGapTests {
    private static let partition = KafkaTopicPartition(topic: "jobs", partition: 0)

    private static func message(_ offset: Int64, partition: KafkaTopicPartition = partition) -> KafkaConsumerMessage {
        KafkaConsumerMessage(
            topicPartition: partition, offset: offset, key: Array("k\(offset)".utf8), value: [], headers: [],
            timestampMilliseconds: nil)
    }

    private static func outcome(_ admission: WorkerScheduler.Admission) -> String {
        switch admission {
        case .taken: "taken"
        case .ignored: "ignored"
        case .gap(let expected): "gap \(expected)"
        }
    }

    @Test("an offset past one not taken is refused until the partition was rewound to the missing one")
    func schedulerAsksForRewind() {
        let scheduler = WorkerScheduler(maximumInFlight: 100)
        let admit = { (offset: Int64) in Self.outcome(scheduler.admit(Self.message(offset))) }
        // The first message of an assignment sets where the partition stands.
        #expect(admit(5) == "taken")
        #expect(admit(6) == "taken")
        #expect(admit(9) == "gap 7")
        // While the rewind is under way nothing of the partition is taken, not even what was read before the seek.
        #expect(admit(7) == "ignored")
        #expect(admit(10) == "ignored")
        // Other partitions go on.
        let other = KafkaTopicPartition(topic: "jobs", partition: 1)
        #expect(Self.outcome(scheduler.admit(Self.message(40, partition: other))) == "taken")
        // A rewind to another offset is not the one awaited.
        #expect(!scheduler.rewound(Self.partition, to: 3))
        #expect(admit(7) == "ignored")
        #expect(scheduler.rewound(Self.partition, to: 7))
        #expect(admit(7) == "taken")
        #expect(admit(8) == "taken")
        #expect(admit(9) == "taken")
        // Redeliveries stay refused.
        #expect(admit(8) == "ignored")
        // Re-read from exactly the missing offset, the log has nothing there (a transaction marker, a removed
        // record): the first message beyond it is taken, once.
        #expect(admit(12) == "gap 10")
        #expect(scheduler.rewound(Self.partition, to: 10))
        #expect(admit(12) == "taken")
        #expect(admit(20) == "gap 13")
        // A new assignment starts afresh: the pending rewind is forgotten, and its late notice changes nothing.
        scheduler.assigned([Self.partition])
        #expect(admit(100) == "taken")
        #expect(!scheduler.rewound(Self.partition, to: 13))
        #expect(admit(101) == "taken")
    }

    @Test("the first message of an assignment must not be past the committed offset it starts from")
    func assignmentStart() {
        let scheduler = WorkerScheduler(maximumInFlight: 100)
        let admit = { (offset: Int64) in Self.outcome(scheduler.admit(Self.message(offset))) }
        scheduler.assigned([Self.partition], startingAt: [Self.partition: 30])
        // A fetcher that resumed where an earlier pause left it, not at the commit.
        #expect(admit(44) == "gap 30")
        #expect(scheduler.rewound(Self.partition, to: 30))
        #expect(admit(30) == "taken")
        // Without a known start (nothing committed yet), the first message sets where the partition stands.
        scheduler.assigned([Self.partition])
        #expect(admit(44) == "taken")
        // Below the start is taken too (re-reading is harmless; skipping is not).
        scheduler.assigned([Self.partition], startingAt: [Self.partition: 30])
        #expect(admit(29) == "taken")
        // The log has nothing at the committed offset any more (retention): confirmed by the rewind, taken.
        scheduler.assigned([Self.partition], startingAt: [Self.partition: 30])
        #expect(admit(35) == "gap 30")
        #expect(scheduler.rewound(Self.partition, to: 30))
        #expect(admit(35) == "taken")
    }

    @Test("a partition whose committed offset was unknown at assignment commits nothing until it is read late")
    func startLearnedLate() {
        let scheduler = WorkerScheduler(maximumInFlight: 100)
        let admit = { (offset: Int64) in Self.outcome(scheduler.admit(Self.message(offset))) }
        func finish(_ offsets: ClosedRange<Int64>, in run: inout [WorkerScheduler.Admitted]) {
            for admitted in run where offsets.contains(admitted.message.offset) {
                _ = scheduler.complete(admitted, processed: true, delivered: true)
            }
        }
        // Unknown start: messages are taken and processed, nothing is committed.
        scheduler.assigned([Self.partition], startsUnknown: [Self.partition], assignment: 1)
        #expect(scheduler.awaitsStart(Self.partition, assignment: 1))
        var taken: [WorkerScheduler.Admitted] = []
        for offset: Int64 in 44...46 {
            guard case .taken(let ready?, _) = scheduler.admit(Self.message(offset)) else {
                Issue.record("offset \(offset) not taken")
                return
            }
            #expect(scheduler.beginProcessing(ready))
            taken.append(ready)
        }
        finish(44...45, in: &taken)
        #expect(scheduler.takeCommits().isEmpty, "nothing committed while the start is unknown")
        // Read late for another assignment: changes nothing.
        #expect(scheduler.startsLearned([Self.partition: 30], assignment: 2).isEmpty)
        #expect(scheduler.awaitsStart(Self.partition, assignment: 1))
        // The commit was 30: offsets 30-43 were skipped. The partition starts afresh at 30 after a rewind; the jobs
        // taken before move no offset.
        #expect(
            scheduler.startsLearned([Self.partition: 30], assignment: 1) == [
                KafkaCommitOffset(topicPartition: Self.partition, offset: 30)
            ])
        #expect(!scheduler.awaitsStart(Self.partition, assignment: 1))
        #expect(admit(47) == "ignored", "read before the rewind")
        finish(46...46, in: &taken)
        #expect(scheduler.takeCommits().isEmpty)
        #expect(scheduler.rewound(Self.partition, to: 30))
        #expect(admit(30) == "taken")
        #expect(scheduler.takeCommits().map(\.offset) == [30])

        // Read late and not past the commit (or nothing committed): commits go on from where they are.
        for (commit, first) in [(Int64?.some(50), Int64(50)), (nil, Int64(60))] {
            scheduler.assigned([Self.partition], startsUnknown: [Self.partition], assignment: 3)
            guard case .taken(let ready?, _) = scheduler.admit(Self.message(first)) else {
                Issue.record("offset \(first) not taken")
                return
            }
            #expect(scheduler.beginProcessing(ready))
            _ = scheduler.complete(ready, processed: true, delivered: true)
            #expect(scheduler.takeCommits().isEmpty)
            #expect(scheduler.startsLearned([Self.partition: commit], assignment: 3).isEmpty)
            #expect(scheduler.takeCommits().map(\.offset) == [first + 1])
        }

        // Learned before any message: the first message is checked as at any assignment.
        scheduler.assigned([Self.partition], startsUnknown: [Self.partition], assignment: 4)
        #expect(scheduler.startsLearned([Self.partition: 70], assignment: 4).isEmpty)
        #expect(admit(75) == "gap 70")

        // Revoked while unknown: nothing is committed for it (the next owner reads it again from the commit).
        scheduler.assigned([Self.partition], startsUnknown: [Self.partition], assignment: 5)
        #expect(admit(80) == "taken")
        let (revocation, _) = scheduler.beginRevoke([Self.partition], assignment: 5)
        #expect(scheduler.endRevoke(revocation).isEmpty)
    }

    @Test(
        "a worker whose committed-offset lookup failed at assignment reads them later, then commits: nothing stalls",
        .timeLimit(.minutes(2)))
    func workerLearnsStartsLate() async throws {
        let recorder = OffsetGapLogRecorder()
        var logger = Logger(label: "late-start") { _ in recorder }
        logger.logLevel = .debug
        let setup = try PipelineSingleWorkerSetup(name: "late-start")
        let producer = try setup.producer()
        for index in 0..<5 {
            _ = try await producer.send(
                KafkaProducerRecord(topic: setup.topics.jobs, partition: 0, value: Array("not a job \(index)".utf8)))
        }
        // Every lookup the rebalance callback makes fails (the coordinator moving); the worker's own later lookup is
        // answered.
        for _ in 0..<ConsumerRebalanceHandler.committedLookupAttempts {
            try setup.cluster.pushBrokerRequestError(broker: 1, .offsetFetch, .coordinatorNotAvailable)
        }
        let worker = try setup.worker(producer: producer, logger: logger)
        let run = Task { try await worker.run() }
        // Awaited before the probe below looks at the commits: its own lookup would take the errors meant for the
        // worker's.
        await recorder.wait(for: "kafka committed offsets not read at assignment; librdkafka")
        try await PipelineHarness.poll("every message committed", timeout: .seconds(30)) {
            try await setup.committedOffset() == 5
        }
        #expect(recorder.lines(containing: "kafka committed offsets not read at assignment; librdkafka").count == 1)
        #expect(try setup.cluster.pendingRequestErrors(broker: 1, .offsetFetch) == 0)
        await worker.drain(timeout: .seconds(5))
        try await run.value
        await producer.shutdown()
    }

    @Test(
        "a worker handed an offset past one it never got reads the partition again from there: nothing is lost",
        .timeLimit(.minutes(2)))
    func workerRecoversSkippedOffsets() async throws {
        let recorder = OffsetGapLogRecorder()
        var logger = Logger(label: "gap") { _ in recorder }
        logger.logLevel = .debug
        let setup = try PipelineSingleWorkerSetup(name: "gap")
        let (cluster, topics) = (setup.cluster, setup.topics)
        let producer = try setup.producer()
        let worker = try setup.worker(producer: producer, logger: logger)
        let run = Task { try await worker.run() }
        let letters = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(
                bootstrapServers: cluster.bootstrapServers, groupID: "gap-dlq-\(UUID().uuidString.prefix(8))",
                properties: ["fetch.wait.max.ms": "10"]))
        try letters.subscribe(topics: [topics.deadLetters])
        func send(_ offsets: Range<Int>) async throws {
            // Not jobs: each ends as a dead letter naming its offset, without a decider.
            for index in offsets {
                _ = try await producer.send(
                    KafkaProducerRecord(topic: topics.jobs, partition: 0, value: Array("not a job \(index)".utf8)))
            }
        }
        func deadLetteredOffsets(_ count: Int) async throws -> [Int64] {
            try await KafkaTest.collect(letters.events, messages: count).compactMap { letter in
                letter.headers.first { $0.name == DeadLetter.Header.offset }
                    .flatMap { $0.value }.flatMap { Int64(String(decoding: $0, as: UTF8.self)) }
            }
        }

        try await send(0..<20)
        #expect(try await deadLetteredOffsets(20).sorted() == Array(0..<20))

        // What a fetcher that skips a batch does: the next offsets handed on start past the ones produced next.
        let partition = KafkaTopicPartition(topic: topics.jobs, partition: 0)
        try worker.consumer.pause([partition])
        try await send(20..<40)
        worker.consumer.rewind(partition, to: 25)
        await recorder.wait(for: "kafka: rewind no longer awaited, ignored")
        try worker.consumer.resume([partition])

        #expect(try await deadLetteredOffsets(20).sorted() == Array(20..<40))
        let gaps = recorder.lines(containing: "kafka: offsets skipped")
        #expect(gaps.count == 1)
        #expect(gaps.first?[LogKeys.expectedOffset] == "20")
        #expect(gaps.first?[LogKeys.offset] == "25")
        #expect(recorder.lines(containing: "kafka: partition read again").count == 1)

        await worker.drain(timeout: .seconds(5))
        try await run.value
        await letters.close()
        await producer.shutdown()
    }
}

/// A one-partition mock cluster with a worker's three topics, and a `WorkerLoop` on it that only dead-letters
/// (for tests that feed it messages that are not jobs).
struct PipelineSingleWorkerSetup {
    let cluster: MockKafkaCluster
    let topics: WorkerTopics
    let group: String

    init(name: String) throws {
        topics = WorkerTopics(jobs: "\(name)-jobs", verdicts: "\(name)-verdicts", deadLetters: "\(name)-dlq")
        cluster = try MockKafkaCluster(brokers: 1)
        for topic in [topics.jobs, topics.verdicts, topics.deadLetters] {
            try cluster.createTopic(topic, partitions: 1)
        }
        group = "\(name)-\(UUID().uuidString.prefix(8))"
    }

    func producer(properties: [String: String] = [:]) throws -> KafkaProducer {
        try KafkaProducer(
            configuration: KafkaProducerConfiguration(
                bootstrapServers: cluster.bootstrapServers, lingerMilliseconds: 1, properties: properties))
    }

    /// The worker's settings here: these topics, commits every 20 ms, anything else as `adjust` leaves it.
    func configuration(
        _ adjust: (inout WorkerLoop.Configuration) -> Void = { _ in }
    ) -> WorkerLoop.Configuration {
        var configuration = WorkerLoop.Configuration(topics: topics, commitInterval: .milliseconds(20))
        adjust(&configuration)
        return configuration
    }

    func worker(
        producer: KafkaProducer, decider: any JobStepping = PipelineDeadLetterOnlyDecider(),
        configuration: WorkerLoop.Configuration? = nil, health: WorkerHealth = WorkerHealth(), logger: Logger,
        onFatal: @escaping @Sendable (String) -> Void = { _ in }
    ) throws -> WorkerLoop {
        try WorkerLoop(
            consumerConfiguration: KafkaConsumerConfiguration(
                bootstrapServers: cluster.bootstrapServers, groupID: group, sessionTimeoutMilliseconds: 6_000,
                properties: ["fetch.wait.max.ms": "10"]),
            producer: producer, decider: decider, configuration: configuration ?? self.configuration(),
            health: health, logger: logger, onFatal: onFatal)
    }

    /// The group's committed offset of the jobs partition (nil before any commit), read by a consumer of the group.
    func committedOffset() async throws -> Int64? {
        let probe = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(bootstrapServers: cluster.bootstrapServers, groupID: group))
        let partition = KafkaTopicPartition(topic: topics.jobs, partition: 0)
        let committed = try await probe.committedOffsets(for: [partition])
        await probe.close()
        return committed[partition] ?? nil
    }
}

/// For tests that feed a worker messages that are not jobs: the dead-letter path needs no decider.
struct PipelineDeadLetterOnlyDecider: JobStepping {
    struct Unused: Error {}
    func advance(_ flow: JobFlow) async throws -> JobFlow { throw Unused() }
}

/// Keeps the worker's log lines (message and metadata) and lets a test await one.
final class OffsetGapLogRecorder: Sendable {
    private struct State {
        var lines: [(message: String, metadata: [String: String])] = []
        var waiters: [(text: String, continuation: CheckedContinuation<Void, Never>)] = []
    }
    private let state = Mutex(State())

    func record(_ message: String, _ metadata: [String: String]) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.lines.append((message, metadata))
            let ready = state.waiters.filter { message.contains($0.text) }.map(\.continuation)
            state.waiters.removeAll { message.contains($0.text) }
            return ready
        }
        ready.forEach { $0.resume() }
    }

    func lines(containing text: String) -> [[String: String]] {
        state.withLock { $0.lines.filter { $0.message.contains(text) }.map(\.metadata) }
    }

    func wait(for text: String) async {
        await withCheckedContinuation { continuation in
            let seen = state.withLock { state -> Bool in
                if state.lines.contains(where: { $0.message.contains(text) }) { return true }
                state.waiters.append((text, continuation))
                return false
            }
            if seen { continuation.resume() }
        }
    }
}

extension OffsetGapLogRecorder: LogHandler {
    var metadata: Logger.Metadata {
        get { [:] }
        set {}
    }
    var logLevel: Logger.Level {
        get { .debug }
        set {}
    }
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { nil }
        set {}
    }

    func log(event: LogEvent) {
        record("\(event.message)", (event.metadata ?? [:]).mapValues { "\($0)" })
    }
}
