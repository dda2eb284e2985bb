import Foundation
import Logging
import Observability
import Synchronization
import Testing

@testable import Kafka
@testable import Messages
@testable import Worker

/// A message at any size limit ends as a verdict or a dead letter and its partition is committed past it; an output
/// the cluster refuses for good either goes smaller (a dead letter) or stops the worker (a verdict), never a retry
/// for ever. The limits: the worker's `max_message_bytes` (larger messages are dead-lettered `oversized`), its
/// producer's `message.max.bytes` (`max_produce_bytes`; a larger dead letter is cut to fit), and a broker's
/// `max.message.bytes`. librdkafka's mock broker has no size limit of its own (it stored a 20 MB record under
/// librdkafka 2.0.2), so a broker refusing a record is played by answering produce requests `MSG_SIZE_TOO_LARGE`,
/// as a real broker does.
@Suite("Pipeline: messages at every size limit", .timeLimit(.minutes(2)))
struct PipelineSizeLimitTests {
    /// The key of every message sent here (an account id): the dead letter keeps it.
    static let key = Array("account-7".utf8)

    /// A frontend that may send records up to 4 MB (the gateway limits jobs; other producers may not).
    static func frontend(_ setup: PipelineSingleWorkerSetup) throws -> KafkaProducer {
        try KafkaProducer(
            configuration: KafkaProducerConfiguration(
                bootstrapServers: setup.cluster.bootstrapServers, lingerMilliseconds: 1, messageMaxBytes: 4_000_000))
    }

    /// The worker's producer, with `message.max.bytes` at the worker's produce limit, as `verify-worker run` sets it.
    static func output(
        _ setup: PipelineSingleWorkerSetup, _ configuration: WorkerLoop.Configuration
    ) throws
        -> KafkaProducer
    {
        try KafkaProducer(
            configuration: KafkaProducerConfiguration(
                bootstrapServers: setup.cluster.bootstrapServers, lingerMilliseconds: 1,
                messageMaxBytes: configuration.maximumProduceBytes))
    }

    /// The size of a non-job value (all `x`) whose whole dead letter's record is exactly `framedSize` bytes.
    static func valueBytes(
        forDeadLetterOf framedSize: Int, worker: WorkerLoop, offset: Int64, topic: String
    ) throws -> Int {
        func framed(_ count: Int) throws -> Int {
            let message = KafkaConsumerMessage(
                topicPartition: KafkaTopicPartition(topic: topic, partition: 0), offset: offset, key: Self.key,
                value: [UInt8](repeating: UInt8(ascii: "x"), count: count), headers: [], timestampMilliseconds: nil)
            guard case .deadLetter(let letter) = worker.parse(message) else {
                throw KafkaTestFailure("a value of \(count) x is a job?")
            }
            return worker.deadLetterRecord(letter).framedSize
        }
        var count = framedSize - (try framed(0))
        // The error text names the size: its digits may shift the framing by a byte or two.
        while try framed(count) > framedSize { count -= 1 }
        while try framed(count + 1) <= framedSize { count += 1 }
        #expect(try framed(count) == framedSize)
        return count
    }

    /// Sends these values as non-jobs, one after the other (offsets 0, 1, …), then waits until the worker committed
    /// past the last one, and returns the dead letters stored, by source offset.
    static func deadLetter(
        _ values: [[UInt8]], setup: PipelineSingleWorkerSetup, frontend: KafkaProducer
    ) async throws -> [Int64: KafkaConsumerMessage] {
        for value in values {
            _ = try await frontend.send(
                KafkaProducerRecord(topic: setup.topics.jobs, key: Self.key, value: value))
        }
        try await PipelineHarness.poll("the worker committed past every message", timeout: .seconds(90)) {
            try await setup.committedOffset() == Int64(values.count)
        }
        let letters = try await PipelineDeliveryTests.storedDeadLetters(setup, using: frontend)
        return Dictionary(
            letters.map { letter in
                let parsed = DeadLetter(
                    key: letter.key, value: letter.value ?? [],
                    headers: letter.headers.map { ($0.name, $0.value ?? []) })
                return (parsed?.sourceOffset ?? -1, letter)
            }, uniquingKeysWith: { first, _ in first })
    }

    static func parsed(_ record: KafkaConsumerMessage?) -> DeadLetter? {
        record.flatMap { record in
            DeadLetter(
                key: record.key, value: record.value ?? [], headers: record.headers.map { ($0.name, $0.value ?? []) })
        }
    }

    static func framedSize(_ record: KafkaConsumerMessage) -> Int {
        KafkaProducerRecord(topic: "t", key: record.key, value: record.value, headers: record.headers).framedSize
    }

    @Test(
        "just under and over max_message_bytes and the producer's limit: whole or cut dead letters, committed past all")
    func messagesAroundTheWorkersLimits() async throws {
        let setup = try PipelineSingleWorkerSetup(name: "limits")
        let configuration = setup.configuration {
            $0.maximumMessageBytes = 10_000
            $0.maximumProduceBytes = 30_000
        }
        let frontend = try Self.frontend(setup)
        let output = try Self.output(setup, configuration)
        let worker = try setup.worker(
            producer: output, configuration: configuration, logger: PipelineDeliveryTests.quietLogger)
        let run = Task { try await worker.run() }
        let atProduceLimit = try Self.valueBytes(
            forDeadLetterOf: 30_000, worker: worker, offset: 3, topic: setup.topics.jobs)
        let x = { (count: Int) in [UInt8](repeating: UInt8(ascii: "x"), count: count) }
        let values = [
            x(9_999), x(10_000), x(10_001),  // around max_message_bytes: not_json, not_json, oversized
            x(atProduceLimit), x(atProduceLimit + 1),  // the whole dead letter exactly at the produce limit, one over
            x(2_000_000),  // over both
        ]
        let letters = try await Self.deadLetter(values, setup: setup, frontend: frontend)

        #expect(Set(letters.keys) == Set(0..<Int64(values.count)), "every message has its dead letter")
        for (offset, value) in values.enumerated() {
            let record = try #require(letters[Int64(offset)])
            let letter = try #require(Self.parsed(record))
            #expect(Self.framedSize(record) <= 30_000, "offset \(offset): \(Self.framedSize(record)) bytes")
            #expect(letter.standsFor(value), "offset \(offset) stands for its message")
            #expect(letter.reason == (value.count > 10_000 ? "oversized" : "not_json"), "offset \(offset)")
            // Whole up to the produce limit, cut beyond it (naming the whole value's size and digest).
            let cut = offset >= 4
            #expect((letter.truncation != nil) == cut, "offset \(offset) cut: \(letter.truncation != nil)")
            // Compared as a Bool: an expectation on the arrays themselves would print a megabyte.
            let kept =
                cut ? letter.original.elementsEqual(value.prefix(letter.original.count)) : letter.original == value
            #expect(kept, "offset \(offset): the value kept is not the start of the message's value")
            #expect(letter.key == Self.key)
            if cut {
                #expect(letter.truncation?.originalBytes == value.count)
                #expect(Self.framedSize(record) >= 30_000 - 8, "cut no more than it must")
            }
        }
        await worker.drain(timeout: .seconds(5))
        try await run.value
        await frontend.shutdown()
        await output.shutdown()
    }

    @Test("with the default limits: a 1,020,000-byte non-job ends as a cut dead letter, no stall")
    func defaultLimits() async throws {
        let setup = try PipelineSingleWorkerSetup(name: "defaults")
        let configuration = setup.configuration()
        #expect(configuration.maximumMessageBytes == 1 << 20)
        #expect(configuration.maximumProduceBytes == 1_000_000)
        let frontend = try Self.frontend(setup)
        let output = try Self.output(setup, configuration)
        let worker = try setup.worker(
            producer: output, configuration: configuration, logger: PipelineDeliveryTests.quietLogger)
        let run = Task { try await worker.run() }
        let atProduceLimit = try Self.valueBytes(
            forDeadLetterOf: 1_000_000, worker: worker, offset: 2, topic: setup.topics.jobs)
        let x = { (count: Int) in [UInt8](repeating: UInt8(ascii: "x"), count: count) }
        // Under 5 MB in all: the mock cluster keeps about 5 MB per partition.
        let values = [x(1_020_000), x(1 << 20), x(atProduceLimit), x(atProduceLimit + 1)]
        let letters = try await Self.deadLetter(values, setup: setup, frontend: frontend)

        #expect(Set(letters.keys) == [0, 1, 2, 3])
        for (offset, value) in values.enumerated() {
            let letter = try #require(Self.parsed(letters[Int64(offset)]))
            #expect(letter.standsFor(value))
            #expect((letter.truncation != nil) == (offset != 2), "offset \(offset)")
        }
        await worker.drain(timeout: .seconds(5))
        try await run.value
        await frontend.shutdown()
        await output.shutdown()
    }

    @Test(
        "a dead letter the broker refuses as too large is sent without its value; refused again, the worker stops")
    func brokerRefusesDeadLetters() async throws {
        let setup = try PipelineSingleWorkerSetup(name: "broker-limit")
        let frontend = try Self.frontend(setup)
        let output = try setup.producer()
        let stopped = Mutex<[String]>([])
        let health = WorkerHealth()
        let worker = try setup.worker(
            producer: output, health: health, logger: PipelineDeliveryTests.quietLogger,
            onFatal: { reason in stopped.withLock { $0.append(reason) } })
        let run = Task { try await worker.run() }
        let partition = KafkaTopicPartition(topic: setup.topics.jobs, partition: 0)
        let value = [UInt8](repeating: UInt8(ascii: "y"), count: 5_000)
        _ = try await frontend.send(KafkaProducerRecord(topic: setup.topics.jobs, value: value))
        try await PipelineHarness.poll("the first dead letter", timeout: .seconds(30)) {
            try await setup.committedOffset() == 1
        }

        /// Sends one more non-job while the partition is paused, so that the pushed errors meet the worker's dead
        /// letter and not the frontend's message.
        func sendRefused(times: Int) async throws {
            try worker.consumer.pause([partition])
            _ = try await frontend.send(KafkaProducerRecord(topic: setup.topics.jobs, value: value))
            setup.cluster.pushRequestErrors(.produce, Array(repeating: .messageSizeTooLarge, count: times))
            try worker.consumer.resume([partition])
        }

        // Refused once: the same dead letter without its value goes.
        try await sendRefused(times: 1)
        try await PipelineHarness.poll("the second message committed", timeout: .seconds(30)) {
            try await setup.committedOffset() == 2
        }
        let letters = try await PipelineDeliveryTests.storedDeadLetters(setup, using: frontend)
        let second = try #require(Self.parsed(letters.first { Self.parsed($0)?.sourceOffset == 1 }))
        #expect(second.original.isEmpty)
        #expect(second.truncation?.originalBytes == 5_000)
        #expect(second.standsFor(value))
        #expect(stopped.withLock { $0 }.isEmpty)

        // Refused twice, with and without its value: nothing smaller is left; the worker stops, nothing committed.
        try await sendRefused(times: 2)
        try await PipelineHarness.poll("the worker stopped", timeout: .seconds(30)) {
            !stopped.withLock { $0 }.isEmpty
        }
        let reasons = stopped.withLock { $0 }
        #expect(reasons.count == 1)
        #expect(reasons.first?.contains(setup.topics.deadLetters) == true, "\(reasons)")
        #expect(reasons.first?.contains("MSG_SIZE_TOO_LARGE") == true, "\(reasons)")
        #expect(health.notReadyReasons.contains("fatal_error"))
        await worker.drain(timeout: .seconds(2))
        try await run.value
        #expect(try await setup.committedOffset() == 2, "not committed past the message without a dead letter")
        await frontend.shutdown()
        await output.shutdown()
    }

    @Test("a verdict refused for good stops the worker, logged once naming the topic, and its job stays uncommitted")
    func verdictRefusedStopsWorker() async throws {
        let recorder = OffsetGapLogRecorder()
        var logger = Logger(label: "refused") { _ in recorder }
        logger.logLevel = .debug
        let setup = try PipelineSingleWorkerSetup(name: "refused")
        let frontend = try setup.producer()
        let output = try setup.producer()
        let decider = PipelineGatedDecider()
        let stopped = Mutex<[String]>([])
        let health = WorkerHealth()
        let worker = try setup.worker(
            producer: output, decider: decider, health: health, logger: logger,
            onFatal: { reason in stopped.withLock { $0.append(reason) } })
        let run = Task { try await worker.run() }
        let job = ReceiptJob(
            jobID: "job-refused", accountID: "account-1", proof: .transactionID("2000000000000001"),
            bundleID: "com.example.app", submittedAt: Date())
        _ = try await frontend.send(
            KafkaProducerRecord(
                topic: setup.topics.jobs, key: Array("account-1".utf8), value: MessageCodec().encode(job)))
        await decider.waitUntilAsked()
        // The verdicts topic may not be written by this worker (an ACL): what a broker answers then.
        try setup.cluster.pushBrokerRequestError(broker: 1, .produce, .topicAuthorizationFailed)
        decider.release()

        try await PipelineHarness.poll("the worker stopped", timeout: .seconds(30)) {
            !stopped.withLock { $0 }.isEmpty
        }
        let reason = try #require(stopped.withLock { $0 }.first)
        #expect(reason.contains(setup.topics.verdicts) && reason.contains("TOPIC_AUTHORIZATION_FAILED"), "\(reason)")
        #expect(health.fatalReason == reason)
        #expect(health.notReadyReasons.contains("fatal_error"))
        await worker.drain(timeout: .seconds(2))
        try await run.value
        let committed = try await setup.committedOffset()
        #expect(committed == nil || committed == 0, "committed past a job whose verdict was never stored")
        let critical = recorder.lines(containing: "worker: fatal fault")
        #expect(critical.count == 1, "logged once")
        #expect(critical.first?[LogKeys.topic] == setup.topics.verdicts)
        let everything = recorder.lines(containing: "")
        #expect(
            !everything.contains { $0.values.contains { $0.contains(Verdict.schema) } },
            "the verdict's value reached a log line")
        await frontend.shutdown()
        await output.shutdown()
    }
}

/// Decides every job `rejected`, each only once the test releases it: the test can change the cluster between a
/// job's reading and its verdict's produce.
final class PipelineGatedDecider: JobStepping {
    private let asked = AsyncStream<Void>.makeStream()
    private let gate = AsyncStream<Void>.makeStream()

    func advance(_ flow: JobFlow) async throws -> JobFlow {
        guard case .readProof(let job, _) = flow else { return flow }
        asked.continuation.yield()
        for await _ in gate.stream { break }
        let verdict = Verdict(
            job: job, outcome: .rejected, reason: .malformed, decidedBy: .prefilter, decidedAt: Date())
        return .decided(JobProcessor.Decided(verdict: verdict, askedStore: false))
    }

    func waitUntilAsked() async {
        for await _ in asked.stream { return }
    }

    func release() { gate.continuation.yield() }
}
