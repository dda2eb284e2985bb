import Foundation
import Logging
import Operations
import Testing

@testable import Kafka
@testable import Worker

/// What a worker keeps per job in flight, and librdkafka's prefetch: the pieces that bound a worker's memory at
/// `max_in_flight` jobs (`bench pipeline` (e)).
@Suite("Pipeline: memory bounds")
struct PipelineMemoryTests {
    /// A job whose lifetime the test can watch.
    final class PipelineMemoryTracked: Sendable {}

    @Test("KeyOrderedQueue lets go of each job it hands back, however long the key's lane")
    func queueReleasesTakenJobs() {
        var queue = KeyOrderedQueue<String, PipelineMemoryTracked>()
        weak var taken: PipelineMemoryTracked?
        do {
            let first = PipelineMemoryTracked()
            #expect(queue.enqueue(first, key: "account") === first)
            for _ in 0..<3 { #expect(queue.enqueue(PipelineMemoryTracked(), key: "account") == nil) }
            let next = queue.complete(key: "account")
            #expect(next != nil)
            taken = next
        }
        // Two jobs still wait behind it: the lane is alive, the job handed back must not be held by it.
        #expect(queue.waitingCount == 2)
        #expect(taken == nil)
        #expect(queue.complete(key: "account") != nil)
        #expect(queue.complete(key: "account") != nil)
        #expect(queue.complete(key: "account") == nil)
        #expect(queue.activeKeys == 0)
    }

    @Test("KeyOrderedQueue keeps order across both of a lane's stacks and when waiting jobs are removed")
    func queueOrder() {
        var queue = KeyOrderedQueue<String, Int>()
        #expect(queue.enqueue(0, key: "k") == 0)
        for job in 1...3 { #expect(queue.enqueue(job, key: "k") == nil) }
        #expect(queue.complete(key: "k") == 1)
        #expect(queue.enqueue(4, key: "k") == nil)
        #expect(queue.removeWaiting { $0 == 3 } == [3])
        #expect(queue.complete(key: "k") == 2)
        #expect(queue.complete(key: "k") == 4)
        #expect(queue.complete(key: "k") == nil)
        #expect(queue.waitingCount == 0)
    }

    @Test("A handoff gives its value once, then holds nothing")
    func handoff() {
        weak var watched: PipelineMemoryTracked?
        let handoff: Handoff<PipelineMemoryTracked>
        do {
            let value = PipelineMemoryTracked()
            watched = value
            handoff = Handoff(value)
        }
        #expect(handoff.take() != nil)
        #expect(watched == nil)
        #expect(handoff.take() == nil)
    }

    @Test("A message kept for scheduling drops its payload and keeps what offsets and keys need")
    func messageWithoutPayload() {
        let message = KafkaConsumerMessage(
            topicPartition: KafkaTopicPartition(topic: "receipt-jobs", partition: 3), offset: 42, key: Array("a".utf8),
            value: Array(repeating: 0x41, count: 4096), headers: [KafkaHeader(name: "h", value: [1])],
            timestampMilliseconds: 7)
        let stripped = message.withoutPayload
        #expect(stripped.value == nil)
        #expect(stripped.headers.isEmpty)
        #expect(stripped.topicPartition == message.topicPartition)
        #expect(stripped.offset == 42)
        #expect(stripped.key == message.key)
        #expect(stripped.timestampMilliseconds == 7)
    }

    @Test("The consumers prefetch at most kafka_prefetch_kbytes (8 MiB by default); kafka_properties still wins")
    func prefetchBound() throws {
        func consumerProperties(_ flags: [String: String]) throws -> [String: String] {
            var sources = ConfigurationSources()
            sources.addEnvironment(["VERIFY_CATALOG_FILE": "catalog.json"])
            try sources.addFlags(flags)
            let runtime = WorkerRuntime(
                configuration: try WorkerConfiguration(sources, hostName: "host-1"), logger: Logger(label: "test"),
                serveOperations: false)
            return try runtime.consumerConfiguration().librdkafkaProperties()
        }
        #expect(try consumerProperties([:])["queued.max.messages.kbytes"] == "8192")
        #expect(try consumerProperties(["kafka_prefetch_kbytes": "1024"])["queued.max.messages.kbytes"] == "1024")
        #expect(
            try consumerProperties(["kafka_properties": "queued.max.messages.kbytes=4096"])[
                "queued.max.messages.kbytes"] == "4096")
        #expect(throws: ConfigurationError.self) { try consumerProperties(["kafka_prefetch_kbytes": "0"]) }
    }
}
