import Foundation
import Logging
import Messages
import Synchronization
import Testing

@testable import Kafka
@testable import Worker

@Suite("Pipeline: delivery of verdicts and dead letters")
struct PipelineDeliveryTests {
    @Test(
        "a producer failed for good stops the worker instead of retrying for ever, and nothing is committed",
        .timeLimit(.minutes(2)))
    func fatalProducerStopsWorker() async throws {
        var logger = Logger(label: "fatal")
        logger.logLevel = .critical
        let setup = try PipelineSingleWorkerSetup(name: "fatal")
        let (cluster, topics, group) = (setup.cluster, setup.topics, setup.group)
        let frontend = try setup.producer()
        let output = try setup.producer()
        output.triggerFatalErrorForTesting(reason: "sequence desynchronization (test)")
        let stopped = DeliveryTestSignal()
        let health = WorkerHealth()
        let worker = try setup.worker(producer: output, health: health, logger: logger) { stopped.fire($0) }
        let run = Task { try await worker.run() }
        // Not a job: its dead letter is what the failed producer cannot deliver.
        _ = try await frontend.send(KafkaProducerRecord(topic: topics.jobs, value: Array("not a job".utf8)))

        let reason = await stopped.wait()
        #expect(reason.contains("failed for good"))
        #expect(health.fatalReason != nil)
        await worker.drain(timeout: .seconds(2))
        try await run.value
        let probe = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(bootstrapServers: cluster.bootstrapServers, groupID: group))
        let committed = try await probe.committedOffsets(for: [KafkaTopicPartition(topic: topics.jobs, partition: 0)])
        #expect(committed.values.allSatisfy { $0 == nil || $0 == 0 }, "\(committed)")
        await probe.close()
        await frontend.shutdown()
        await output.shutdown()
    }

    @Test(
        "an output acknowledged without an offset (a held-back request, a later one stored) is sent again: none lost",
        .timeLimit(.minutes(2)))
    func implicitAcknowledgementIsSentAgain() async throws {
        let held = try await Self.runWithOneOutputHeldBack(
            name: "implicit", decider: PipelineDeadLetterOnlyDecider(), outputs: \.deadLetters
        ) { topic, index in
            KafkaProducerRecord(
                topic: topic, key: Array("account-\(index)".utf8), value: Array("not a job \(index)".utf8))
        }
        #expect(Set(Self.sourceOffsets(held.outputs)) == [0, 1, 2], "no message may lose its dead letter")
        #expect(held.resends == 1, "the held dead letter was acknowledged without an offset once")
    }

    @Test(
        "a verdict handed over without a waiting task and acknowledged without an offset is sent again: none lost",
        .timeLimit(.minutes(2)))
    func implicitAcknowledgementOfAVerdictIsSentAgain() async throws {
        let held = try await Self.runWithOneOutputHeldBack(
            name: "implicit-verdict", decider: PipelineProofDecider(), outputs: \.verdicts
        ) { topic, index in
            let job = ReceiptJob(
                jobID: "job-\(index)", accountID: "account-\(index)", proof: .transactionID("\(index)"))
            return KafkaProducerRecord(topic: topic, key: Array(job.accountID.utf8), value: MessageCodec().encode(job))
        }
        let verdicts = try held.outputs.map { try MessageCodec().decodeVerdict($0.value ?? []).jobID }
        #expect(Set(verdicts) == ["job-0", "job-1", "job-2"], "no job may lose its verdict")
        #expect(held.resends == 1, "the held verdict was acknowledged without an offset once")
    }

    @Test(
        "an output never proven delivered makes the worker unready past the delivery timeout; its job stays uncommitted",
        .timeLimit(.minutes(2)))
    func unprovenOutputMakesWorkerUnready() async throws {
        let setup = try PipelineSingleWorkerSetup(name: "unproven")
        let frontend = try setup.producer()
        // acks=0: every delivery report lacks an offset, so no output is ever proven stored.
        let output = try setup.producer(properties: ["enable.idempotence": "false", "acks": "0"])
        let health = WorkerHealth()
        let worker = try setup.worker(
            producer: output, configuration: setup.configuration { $0.deliveryTimeout = .milliseconds(300) },
            health: health, logger: Self.quietLogger)
        let run = Task { try await worker.run() }
        _ = try await frontend.send(KafkaProducerRecord(topic: setup.topics.jobs, value: Array("not a job".utf8)))

        try await PipelineHarness.poll("output_undeliverable", timeout: .seconds(30)) {
            health.notReadyReasons.contains("output_undeliverable")
        }
        #expect(health.fatalReason == nil, "not fatal: the delivery goes on")
        // Still trying: more sends without proof after the worker became unready.
        let resends = output.confirmationResends
        try await PipelineHarness.poll("delivery still retried", timeout: .seconds(30)) {
            output.confirmationResends > resends
        }
        await worker.drain(timeout: .seconds(2))
        try await run.value
        let committed = try await setup.committedOffset()
        #expect(
            committed == nil || committed == 0,
            "committed past an output never proven stored: \(String(describing: committed))")
        await frontend.shutdown()
        await output.shutdown()
    }
}

extension PipelineDeliveryTests {
    static var quietLogger: Logger {
        var logger = Logger(label: "delivery")
        logger.logLevel = .critical
        return logger
    }

    /// Runs one worker, deciding with `decider`, over three jobs made by `job(topic, index)`, and holds back one of
    /// its outputs so that it is acknowledged without an offset; returns every output stored in the (one-partition)
    /// topic `outputs` names, and the output producer's ``KafkaProducer/confirmationResends``.
    ///
    /// Job 0's output is stored first. Jobs 1 and 2, of different accounts, are then read together once the paused
    /// partition is resumed: their outputs go out at once, one per produce request; the first request is held back
    /// and answered REQUEST_TIMED_OUT after 1.5 s, the second is stored: librdkafka 2.0.2 then acknowledges the
    /// first without an offset, and the broker never stored it.
    static func runWithOneOutputHeldBack(
        name: String, decider: any JobStepping, outputs: KeyPath<WorkerTopics, String>,
        job: (_ topic: String, _ index: Int) -> KafkaProducerRecord
    ) async throws -> (outputs: [KafkaConsumerMessage], resends: Int) {
        let setup = try PipelineSingleWorkerSetup(name: name)
        let topics = setup.topics
        let outputTopic = topics[keyPath: outputs]
        let frontend = try setup.producer()
        // One message per produce request, sent at once: the request held back carries exactly one output.
        let output = try setup.producer(properties: ["batch.num.messages": "1", "linger.ms": "0"])
        let worker = try setup.worker(producer: output, decider: decider, logger: Self.quietLogger)
        let run = Task { try await worker.run() }
        _ = try await frontend.send(job(topics.jobs, 0))
        try await PipelineHarness.poll("the first output", timeout: .seconds(30)) {
            try await output.watermarks(topic: outputTopic, partition: 0).high == 1
        }
        let partition = KafkaTopicPartition(topic: topics.jobs, partition: 0)
        try worker.consumer.pause([partition])
        _ = try await frontend.send(job(topics.jobs, 1))
        _ = try await frontend.send(job(topics.jobs, 2))
        try setup.cluster.pushBrokerRequestError(
            broker: 1, .produce, .requestTimedOut, responseDelay: .milliseconds(1_500))
        try worker.consumer.resume([partition])

        try await PipelineHarness.poll("every job committed", timeout: .seconds(30)) {
            try await setup.committedOffset() == 3
        }
        let stored = try await Self.stored(outputs, of: setup, using: frontend)
        await worker.drain(timeout: .seconds(5))
        try await run.value
        await frontend.shutdown()
        await output.shutdown()
        return (stored, output.confirmationResends)
    }

    /// The messages stored in a (one-partition) topic of `setup`, as many as its high watermark says.
    static func stored(
        _ topic: KeyPath<WorkerTopics, String>, of setup: PipelineSingleWorkerSetup, using producer: KafkaProducer
    ) async throws -> [KafkaConsumerMessage] {
        let name = setup.topics[keyPath: topic]
        let count = try await KafkaTest.storedCount(producer, topic: name, partitions: 1)
        let reader = try KafkaTest.consumer(setup.cluster.bootstrapServers, group: KafkaTest.uniqueGroup("stored"))
        try reader.subscribe(topics: [name])
        let messages = try await KafkaTest.collect(reader.events, messages: count)
        await reader.close()
        return messages
    }

    /// The dead letters stored in the (one-partition) dead-letter topic, as many as its high watermark says.
    static func storedDeadLetters(
        _ setup: PipelineSingleWorkerSetup, using producer: KafkaProducer
    ) async throws -> [KafkaConsumerMessage] {
        try await stored(\.deadLetters, of: setup, using: producer)
    }

    /// The source offsets the dead letters name.
    static func sourceOffsets(_ letters: [KafkaConsumerMessage]) -> [Int64] {
        letters.compactMap { letter in
            DeadLetter(
                key: letter.key, value: letter.value ?? [], headers: letter.headers.map { ($0.name, $0.value ?? []) })?
                .sourceOffset
        }
    }
}

/// One value, awaited.
private final class DeliveryTestSignal: Sendable {
    private let state = Mutex<(value: String?, waiters: [CheckedContinuation<String, Never>])>((nil, []))

    func fire(_ value: String) {
        let waiters = state.withLock { state -> [CheckedContinuation<String, Never>] in
            guard state.value == nil else { return [] }
            state.value = value
            defer { state.waiters = [] }
            return state.waiters
        }
        waiters.forEach { $0.resume(returning: value) }
    }

    func wait() async -> String {
        await withCheckedContinuation { continuation in
            let value = state.withLock { state -> String? in
                if let value = state.value { return value }
                state.waiters.append(continuation)
                return nil
            }
            if let value { continuation.resume(returning: value) }
        }
    }
}

/// Decides every job by its proof step: rejected, malformed (no follow-up waits for its delivery).
struct PipelineProofDecider: JobStepping {
    func advance(_ flow: JobFlow) async throws -> JobFlow {
        guard case .readProof(let job, _) = flow else { throw WorkerFatalError("only the proof step is taken") }
        return .decided(
            JobProcessor.Decided(
                verdict: Verdict(
                    job: job, outcome: .rejected, reason: .malformed, decidedBy: .prefilter, decidedAt: Date()),
                askedStore: false))
    }
}
