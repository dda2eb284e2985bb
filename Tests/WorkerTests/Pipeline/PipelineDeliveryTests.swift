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
