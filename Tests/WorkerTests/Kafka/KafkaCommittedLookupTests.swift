import Foundation
import Testing

@testable import Kafka

/// The consumer reads the group's committed offsets itself when partitions are assigned, so the application can tell
/// when the first message handed on is past them (a skipped message). A coordinator that is moving answers that
/// lookup `COORDINATOR_NOT_AVAILABLE` (librdkafka's `rd_kafka_committed` then fails at once): the lookup is asked
/// again, and a partition still unread is named, so that the application checks it later.
@Suite("Kafka: committed offsets read at assignment", .timeLimit(.minutes(2)))
struct KafkaCommittedLookupTests {
    /// One broker, one partition holding 20 messages, and a group that committed offset 5 on it.
    private static func committedGroup(
        _ name: String
    ) async throws -> (
        cluster: MockKafkaCluster, topic: String, group: String
    ) {
        let topic = "kt-\(name)"
        let cluster = try KafkaTest.cluster(brokers: 1, topics: [topic: 1])
        let producer = try KafkaTest.producer(cluster)
        _ = try await KafkaTest.produce(producer, topic: topic, count: 20, prefix: name, partitions: 1)
        await producer.shutdown()
        let group = KafkaTest.uniqueGroup(name)
        let committer = try KafkaTest.consumer(cluster.bootstrapServers, group: group)
        try await committer.commit([KafkaCommitOffset(topic: topic, partition: 0, offset: 5)])
        await committer.close()
        return (cluster, topic, group)
    }

    @Test("a lookup that fails once is asked again: the assignment starts at the commit, and knows it")
    func lookupAskedAgain() async throws {
        let (cluster, topic, group) = try await Self.committedGroup("lookup-again")
        try cluster.pushBrokerRequestError(broker: 1, .offsetFetch, .coordinatorNotAvailable)
        let consumer = try KafkaTest.consumer(cluster.bootstrapServers, group: group)
        try consumer.subscribe(topics: [topic])
        let assignment = try await KafkaTest.awaitFullAssignment(consumer.events)
        let partition = KafkaTopicPartition(topic: topic, partition: 0)
        #expect(try cluster.pendingRequestErrors(broker: 1, .offsetFetch) == 0, "the failing answer was used")
        #expect(assignment.starts == [partition: 5])
        #expect(assignment.unknown.isEmpty)
        let first = try await KafkaTest.collect(consumer.events, messages: 1)
        #expect(first.first?.offset == 5)
        await consumer.close()
    }

    @Test("a lookup that fails at every attempt: the partition is named unknown, and its commit is read later")
    func lookupFailsEveryTime() async throws {
        let (cluster, topic, group) = try await Self.committedGroup("lookup-fails")
        for _ in 0..<ConsumerRebalanceHandler.committedLookupAttempts {
            try cluster.pushBrokerRequestError(broker: 1, .offsetFetch, .coordinatorNotAvailable)
        }
        let consumer = try KafkaTest.consumer(cluster.bootstrapServers, group: group)
        try consumer.subscribe(topics: [topic])
        let assignment = try await KafkaTest.awaitFullAssignment(consumer.events)
        let partition = KafkaTopicPartition(topic: topic, partition: 0)
        #expect(try cluster.pendingRequestErrors(broker: 1, .offsetFetch) == 0, "every attempt was made")
        #expect(assignment.starts.isEmpty)
        #expect(assignment.unknown == [partition])
        // librdkafka looks the offset up on its own; the application reads it once the coordinator answers.
        let committed = try await consumer.committedOffsets(for: [partition])
        #expect(committed[partition] == 5)
        let first = try await KafkaTest.collect(consumer.events, messages: 1)
        #expect(first.first?.offset == 5)
        await consumer.close()
    }
}
