import Foundation
import Logging
import Messages
import Synchronization
import Testing

@testable import Kafka
@testable import Pipeline

@Suite("Pipeline: delivery of verdicts and dead letters")
struct PipelineDeliveryTests {
    @Test(
        "a producer failed for good stops the worker instead of retrying for ever, and nothing is committed",
        .timeLimit(.minutes(1)))
    func fatalProducerStopsWorker() async throws {
        let topics = PipelineTopics(jobs: "fatal-jobs", verdicts: "fatal-verdicts", deadLetters: "fatal-dlq")
        let cluster = try MockKafkaCluster(brokers: 1)
        for topic in [topics.jobs, topics.verdicts, topics.deadLetters] {
            try cluster.createTopic(topic, partitions: 1)
        }
        var logger = Logger(label: "fatal")
        logger.logLevel = .critical
        let frontend = try KafkaProducer(
            configuration: KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers, lingerMilliseconds: 1)
        )
        let output = try KafkaProducer(
            configuration: KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers, lingerMilliseconds: 1)
        )
        output.triggerFatalErrorForTesting(reason: "sequence desynchronization (test)")
        let group = "fatal-\(UUID().uuidString.prefix(8))"
        let stopped = DeliveryTestSignal()
        let health = WorkerHealth()
        let worker = try PipelineWorker(
            consumerConfiguration: KafkaConsumerConfiguration(
                bootstrapServers: cluster.bootstrapServers, groupID: group, sessionTimeoutMilliseconds: 6_000,
                properties: ["fetch.wait.max.ms": "10"]),
            producer: output, decider: DeliveryTestDecider(),
            configuration: PipelineWorker.Configuration(topics: topics, commitInterval: .milliseconds(20)),
            health: health, logger: logger, onFatal: { stopped.fire($0) })
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
}

private struct DeliveryTestDecider: JobDeciding {
    struct Unused: Error {}
    func decide(_ job: ReceiptJob, recordedAt: Date?) async throws -> JobProcessor.Decided { throw Unused() }
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
