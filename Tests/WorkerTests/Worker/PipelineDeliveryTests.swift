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
        let setup = try PipelineSingleWorkerSetup(name: "implicit")
        let topics = setup.topics
        let frontend = try setup.producer()
        // One message per produce request, sent at once: the request held back carries exactly one dead letter.
        let output = try setup.producer(properties: ["batch.num.messages": "1", "linger.ms": "0"])
        let worker = try setup.worker(producer: output, logger: Self.quietLogger)
        let run = Task { try await worker.run() }
        func submit(_ index: Int) async throws {
            _ = try await frontend.send(
                KafkaProducerRecord(
                    topic: topics.jobs, key: Array("account-\(index)".utf8), value: Array("not a job \(index)".utf8)))
        }
        try await submit(0)
        try await PipelineHarness.poll("the first dead letter", timeout: .seconds(30)) {
            try await output.watermarks(topic: topics.deadLetters, partition: 0).high == 1
        }
        // Two more messages of different accounts, read together once the partition is resumed: their dead letters
        // go out at once, the first request is held back and answered REQUEST_TIMED_OUT after 1.5 s, the second is
        // stored: librdkafka 2.0.2 then acknowledges the first without an offset, and the broker never stored it.
        let partition = KafkaTopicPartition(topic: topics.jobs, partition: 0)
        try worker.consumer.pause([partition])
        try await submit(1)
        try await submit(2)
        try setup.cluster.pushBrokerRequestError(
            broker: 1, .produce, .requestTimedOut, responseDelay: .milliseconds(1_500))
        try worker.consumer.resume([partition])

        try await PipelineHarness.poll("every job committed", timeout: .seconds(30)) {
            try await setup.committedOffset() == 3
        }
        let letters = try await Self.storedDeadLetters(setup, using: frontend)
        #expect(Set(Self.sourceOffsets(letters)) == [0, 1, 2], "no message may lose its dead letter")
        #expect(output.confirmationResends == 1, "the held dead letter was acknowledged without an offset once")
        await worker.drain(timeout: .seconds(5))
        try await run.value
        await frontend.shutdown()
        await output.shutdown()
    }

    @Test(
        "a verdict handed over without a waiting task and acknowledged without an offset is sent again: none lost",
        .timeLimit(.minutes(2)))
    func implicitAcknowledgementOfAVerdictIsSentAgain() async throws {
        let setup = try PipelineSingleWorkerSetup(name: "implicit-verdict")
        let topics = setup.topics
        let frontend = try setup.producer()
        // One message per produce request, sent at once: the request held back carries exactly one verdict.
        let output = try setup.producer(properties: ["batch.num.messages": "1", "linger.ms": "0"])
        let worker = try setup.worker(
            producer: output, decider: PipelineProofDecider(), logger: Self.quietLogger)
        let run = Task { try await worker.run() }
        func submit(_ index: Int) async throws {
            let job = ReceiptJob(
                jobID: "job-\(index)", accountID: "account-\(index)", proof: .transactionID("\(index)"))
            _ = try await frontend.send(
                KafkaProducerRecord(
                    topic: topics.jobs, key: Array(job.accountID.utf8), value: MessageCodec().encode(job)))
        }
        try await submit(0)
        try await PipelineHarness.poll("the first verdict", timeout: .seconds(30)) {
            try await output.watermarks(topic: topics.verdicts, partition: 0).high == 1
        }
        // As for dead letters above: two verdicts go out at once, the first request is held back and answered
        // REQUEST_TIMED_OUT after 1.5 s, the second is stored, and the first is acknowledged without an offset.
        let partition = KafkaTopicPartition(topic: topics.jobs, partition: 0)
        try worker.consumer.pause([partition])
        try await submit(1)
        try await submit(2)
        try setup.cluster.pushBrokerRequestError(
            broker: 1, .produce, .requestTimedOut, responseDelay: .milliseconds(1_500))
        try worker.consumer.resume([partition])

        try await PipelineHarness.poll("every job committed", timeout: .seconds(30)) {
            try await setup.committedOffset() == 3
        }
        let count = try await KafkaTest.storedCount(frontend, topic: topics.verdicts, partitions: 1)
        let reader = try KafkaTest.consumer(setup.cluster.bootstrapServers, group: KafkaTest.uniqueGroup("verdicts"))
        try reader.subscribe(topics: [topics.verdicts])
        let verdicts = try await KafkaTest.collect(reader.events, messages: count)
            .map { try MessageCodec().decodeVerdict($0.value ?? []).jobID }
        await reader.close()
        #expect(Set(verdicts) == ["job-0", "job-1", "job-2"], "no job may lose its verdict")
        #expect(output.confirmationResends == 1, "the held verdict was acknowledged without an offset once")
        await worker.drain(timeout: .seconds(5))
        try await run.value
        await frontend.shutdown()
        await output.shutdown()
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

    /// The dead letters stored in the (one-partition) dead-letter topic, as many as its high watermark says.
    static func storedDeadLetters(
        _ setup: PipelineSingleWorkerSetup, using producer: KafkaProducer
    ) async throws
        -> [KafkaConsumerMessage]
    {
        let count = try await KafkaTest.storedCount(producer, topic: setup.topics.deadLetters, partitions: 1)
        let reader = try KafkaTest.consumer(setup.cluster.bootstrapServers, group: KafkaTest.uniqueGroup("dlq-read"))
        try reader.subscribe(topics: [setup.topics.deadLetters])
        let letters = try await KafkaTest.collect(reader.events, messages: count)
        await reader.close()
        return letters
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
