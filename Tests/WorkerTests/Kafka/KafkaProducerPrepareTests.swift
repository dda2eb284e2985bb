import Foundation
import Kafka
import Testing

@Suite("Kafka producer: topics prepared before the first send", .timeLimit(.minutes(2)))
struct KafkaProducerPrepareTests {
    @Test("prepare(topics:) looks up existing topics, and the first send after it is delivered")
    func prepareThenSend() async throws {
        let cluster = try KafkaTest.cluster(brokers: 1, topics: ["prepared-a": 4, "prepared-b": 2])
        let producer = try KafkaTest.producer(cluster)
        try await producer.prepare(topics: ["prepared-a", "prepared-b"], timeout: .seconds(10))
        let report = try await producer.send(
            KafkaProducerRecord(topic: "prepared-a", key: Array("k".utf8), value: Array("v".utf8)))
        #expect(report.topicPartition.topic == "prepared-a")
        #expect((0..<4).contains(report.topicPartition.partition))
        await producer.shutdown()
    }

    @Test("prepare(topics:) fails with a KafkaError, within its timeout, when no broker answers")
    func prepareWithoutBroker() async throws {
        let producer = try KafkaTest.producer(bootstrap: "127.0.0.1:1")
        let started = ContinuousClock.now
        await #expect(throws: KafkaError.self) {
            try await producer.prepare(topics: ["nowhere"], timeout: .milliseconds(500))
        }
        // A timeout that was not passed on would block for good (librdkafka waits for a broker without end); the
        // bound leaves room for a loaded two-core machine, where the call's thread and this task wait their turn.
        #expect(started.duration(to: .now) < .seconds(30))
        await producer.shutdown(timeout: .seconds(1))
    }
}
