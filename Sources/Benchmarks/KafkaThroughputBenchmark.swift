import Foundation
import Kafka

/// Measures the raw ceiling of this Kafka layer against the in-process mock cluster: produce
/// throughput (idempotent, acks=all, every delivery awaited) and consume-and-commit throughput (a
/// group member reading everything and committing explicit offsets), in one run.
public struct KafkaThroughputBenchmark: Sendable {
    public var messages = 100_000
    public var messageBytes = 1024
    public var brokers = 3
    public var partitions = 32
    /// Commit the consumed offsets (asynchronously) every this many messages; the last commit is synchronous.
    public var commitEvery = 1_000
    public var producer = KafkaProducerConfiguration()

    /// The figures of one run, encoded with snake_case keys.
    public struct Result: Codable, Sendable {
        public var messages: Int
        public var messageBytes: Int
        public var brokers: Int
        public var partitions: Int
        public var produceSeconds: Double
        public var produceMessagesPerSecond: Double
        public var produceMebibytesPerSecond: Double
        public var consumeCommitSeconds: Double
        public var consumeCommitMessagesPerSecond: Double
        public var commitEvery: Int
        public var producerSettings: [String: String]
    }

    /// The mock cluster keeps only about 5 MB per partition (older batches are deleted), so a run
    /// must spread its bytes over enough partitions to read back everything it wrote.
    public static let mockBytesPerPartition = 4 * 1_048_576

    public func run() async throws -> Result {
        let bytesPerPartition = messages * max(messageBytes, 1) / max(partitions, 1)
        guard bytesPerPartition <= Self.mockBytesPerPartition else {
            throw KafkaError.configuration(
                "\(messages) messages of \(messageBytes) bytes over \(partitions) partitions is "
                    + "\(bytesPerPartition / 1024) KiB per partition; the mock cluster keeps about 5 MB per partition, "
                    + "so use more partitions (at most 4 MiB per partition)")
        }
        let cluster = try MockKafkaCluster(brokers: brokers)
        let topic = "bench-kafka"
        try cluster.createTopic(topic, partitions: partitions)
        var producerConfiguration = producer
        producerConfiguration.bootstrapServers = cluster.bootstrapServers
        let producer = try KafkaProducer(configuration: producerConfiguration)
        let payload = [UInt8](repeating: 0x61, count: messageBytes)
        // The topic's leaders are known before the clock starts, as for the pipeline's frontend: otherwise
        // librdkafka 2.0 holds the first messages until its next metadata refresh (~1 s), which measured the
        // refresh, not the throughput (27,000-31,000 against 72,000-88,000 msg/s on the same machine).
        try await producer.prepare(topics: [topic])

        let clock = ContinuousClock()
        let produceStart = clock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            // A window of child tasks a little larger than the in-flight bound keeps librdkafka fed
            // without creating one task per message up front.
            let window = producerConfiguration.maximumInFlightMessages + 1_000
            for index in 0..<messages {
                if index >= window { try await group.next() }
                let key = Array(String(index).utf8)
                group.addTask {
                    _ = try await producer.send(KafkaProducerRecord(topic: topic, key: key, value: payload))
                }
            }
            try await group.waitForAll()
        }
        let produceDuration = clock.now - produceStart
        await producer.shutdown()

        let consumer = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(
                bootstrapServers: cluster.bootstrapServers, groupID: "bench-\(UUID().uuidString)"))
        try consumer.subscribe(topics: [topic])
        var consumed = 0
        var consumeStart: ContinuousClock.Instant?
        var nextOffsets: [KafkaTopicPartition: Int64] = [:]
        for try await event in consumer.events {
            guard case .message(let message) = event else { continue }
            if consumeStart == nil { consumeStart = clock.now }
            consumed += 1
            nextOffsets[message.topicPartition] = message.offset + 1
            if consumed % commitEvery == 0 {
                try consumer.commitAsync(
                    nextOffsets.map { KafkaCommitOffset(topicPartition: $0.key, offset: $0.value) })
            }
            if consumed == messages { break }
        }
        try await consumer.commit(nextOffsets.map { KafkaCommitOffset(topicPartition: $0.key, offset: $0.value) })
        let consumeDuration = clock.now - (consumeStart ?? clock.now)
        await consumer.close()

        let produceSeconds = produceDuration.seconds
        let consumeSeconds = consumeDuration.seconds
        return Result(
            messages: messages, messageBytes: messageBytes, brokers: brokers, partitions: partitions,
            produceSeconds: produceSeconds,
            produceMessagesPerSecond: Double(messages) / produceSeconds,
            produceMebibytesPerSecond: Double(messages * messageBytes) / produceSeconds / 1_048_576,
            consumeCommitSeconds: consumeSeconds,
            consumeCommitMessagesPerSecond: Double(consumed) / consumeSeconds,
            commitEvery: commitEvery,
            producerSettings: producerConfiguration.librdkafkaProperties.filter {
                ["linger.ms", "batch.size", "compression.type", "acks", "enable.idempotence"].contains($0.key)
            })
    }
}
