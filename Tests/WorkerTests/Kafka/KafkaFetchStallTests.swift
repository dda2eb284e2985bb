import Foundation
import Kafka
import Testing

@Suite("Kafka: fetch stalls past the prefetch limit")
struct KafkaFetchStallTests {
    /// librdkafka 2.0.2 stops fetching once its queue holds `queued.max.messages.kbytes` and decides again only when
    /// woken or up to a second later. Each fetch here brings 128 KiB (`fetch.max.bytes`) against 16 KiB allowed, so
    /// the broker thread finds the queue over the limit after every fetch (with small fetches the reader empties the
    /// queue before the broker thread decides, and nothing stalls): the backlog of ~12 fetches is read because the
    /// poll thread wakes the fetcher once the queue is empty.
    @Test(
        "a backlog larger than the prefetch limit is read to the end, the poll thread waking the fetcher",
        .timeLimit(.minutes(2)))
    func backlogPastPrefetchLimit() async throws {
        let topic = "stall-\(UUID().uuidString.prefix(8))"
        let partitions = 8
        let cluster = try KafkaTest.cluster(brokers: 1, topics: [topic: partitions])
        let producer = try KafkaTest.producer(cluster)
        let count = 800
        let payload = [UInt8](repeating: 0x61, count: 2_000)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<count {
                group.addTask {
                    _ = try await producer.send(
                        KafkaProducerRecord(
                            topic: topic, partition: Int32(index % partitions), key: Array("k\(index)".utf8),
                            value: payload))
                }
            }
            try await group.waitForAll()
        }
        await producer.shutdown()

        let consumer = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(
                bootstrapServers: cluster.bootstrapServers, groupID: KafkaTest.uniqueGroup("stall"),
                properties: [
                    "queued.max.messages.kbytes": "16", "fetch.max.bytes": "131072", "message.max.bytes": "65536",
                    "fetch.wait.max.ms": "10",
                ]))
        try consumer.subscribe(topics: [topic])
        let messages = try await KafkaTest.collect(consumer.events, messages: count)
        for partition in 0..<Int32(partitions) {
            let offsets = messages.filter { $0.partition == partition }.map(\.offset)
            #expect(offsets == (0..<Int64(count / partitions)).map { $0 }, "partition \(partition)")
        }
        #expect(consumer.fetchWakeUps > 0)
        await consumer.close()
    }
}
