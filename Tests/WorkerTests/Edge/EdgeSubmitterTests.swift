import Foundation
import Gateway
import Kafka
import Messages
import Synchronization
import Testing

@Suite("Edge: the submitter keeps each account's order", .timeLimit(.minutes(1)))
struct EdgeSubmitterTests {
    @Test("300 jobs of 6 accounts, 64 sends in flight: every account's jobs land in input order, one line each")
    func perAccountOrder() async throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        try cluster.createTopic("receipt-jobs", partitions: 4)
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers, lingerMilliseconds: 1)
        )
        let lines = Mutex<[String]>([])
        let submitter = JobSubmitter(producer: producer, maxOutstanding: 64) { line in
            lines.withLock { $0.append(line) }
        }
        let jobs = (0..<300).map { index in
            ReceiptJob(jobID: "job-\(index)", accountID: "acct-\(index % 6)", proof: .receipt("r\(index)"))
        }
        let items = jobs.enumerated().map { JobSubmitter.Item.job(line: $0.offset + 1, $0.element, category: nil) }
        let summary = try await submitter.submit(EdgeItems(items: items))
        await producer.shutdown()
        #expect(summary == JobSubmitter.Summary(submitted: 300, failed: 0))
        #expect(lines.withLock { $0.count } == 300)

        let consumer = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(
                bootstrapServers: cluster.bootstrapServers, groupID: "edge-order-\(UUID().uuidString.prefix(8))"))
        try consumer.subscribe(topics: ["receipt-jobs"])
        var byAccount: [String: [Int]] = [:]
        var received = 0
        for try await event in consumer.events {
            guard case .message(let message) = event else { continue }
            let job = try MessageCodec().decodeJob(try #require(message.value))
            #expect(message.key == Array(job.accountID.utf8))
            byAccount[job.accountID, default: []].append(Int(job.jobID.dropFirst("job-".count)) ?? -1)
            received += 1
            if received == 300 { break }
        }
        await consumer.close()
        for (account, order) in byAccount {
            #expect(order == order.sorted(), "\(account) out of order")
            #expect(order.count == 50)
        }
    }
}

/// A fixed list of items as an async sequence.
struct EdgeItems: AsyncSequence, Sendable {
    typealias Element = JobSubmitter.Item
    let items: [JobSubmitter.Item]

    struct AsyncIterator: AsyncIteratorProtocol {
        var remaining: ArraySlice<JobSubmitter.Item>
        mutating func next() async -> JobSubmitter.Item? { remaining.popFirst() }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(remaining: items[...]) }
}
