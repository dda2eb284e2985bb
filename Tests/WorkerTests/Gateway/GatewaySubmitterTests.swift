import Foundation
import Gateway
import Kafka
import Messages
import Synchronization
import Testing

@Suite("Gateway: the submitter keeps each account's order", .timeLimit(.minutes(2)))
struct GatewaySubmitterTests {
    /// 75 accounts taking turns (job i is account i % 75): with more accounts than send slots the 64-send limit
    /// binds, and an account's next job can come up while its previous one is still in flight (the one-send-per-
    /// account rule).
    ///
    /// Sized by round trips, not by jobs: the submitter reads its input in order, so a job that must wait holds
    /// up the ones behind it. The earlier version (6 accounts, so 6 sends in flight and 50 serial round trips)
    /// ran past its limit in the full suite, where both cores are busy for the first minute and one confirmed
    /// send took 1 to 2 s (measured).
    @Test("300 jobs of 75 accounts, 64 sends in flight: every account's jobs land in input order, one line each")
    func perAccountOrder() async throws {
        let accounts = 75
        let cluster = try KafkaTest.cluster(brokers: 1, topics: ["receipt-jobs": 4])
        let producer = try KafkaTest.producer(cluster)
        let lines = Mutex<[String]>([])
        let submitter = JobSubmitter(producer: producer, maximumOutstanding: 64) { line in
            lines.withLock { $0.append(line) }
        }
        let jobs = (0..<300).map { index in
            ReceiptJob(jobID: "job-\(index)", accountID: "acct-\(index % accounts)", proof: .receipt("r\(index)"))
        }
        let items = jobs.enumerated().map { JobSubmitter.Item.job(line: $0.offset + 1, $0.element, category: nil) }
        let summary = try await submitter.submit(GatewayItems(items: items))
        #expect(summary == JobSubmitter.Summary(submitted: 300, failed: 0))
        #expect(lines.withLock { $0.count } == 300)
        // What the topic holds is what the read below waits for, so a missing message fails here, not as a hang.
        let stored = try await KafkaTest.storedCount(producer, topic: "receipt-jobs", partitions: 4)
        await producer.shutdown()
        #expect(stored == 300)

        let consumer = try KafkaTest.consumer(cluster.bootstrapServers, group: KafkaTest.uniqueGroup("gateway-order"))
        try consumer.subscribe(topics: ["receipt-jobs"])
        let messages = try await KafkaTest.collect(consumer.events, messages: stored)
        await consumer.close()
        var byAccount: [String: [Int]] = [:]
        for message in messages {
            let job = try MessageCodec().decodeJob(try #require(message.value))
            #expect(message.key == Array(job.accountID.utf8))
            byAccount[job.accountID, default: []].append(Int(job.jobID.dropFirst("job-".count)) ?? -1)
        }
        #expect(byAccount.count == accounts)
        for (account, order) in byAccount {
            #expect(order == order.sorted(), "\(account) out of order")
            #expect(order.count == 300 / accounts)
        }
    }

    /// The harness's entry: chains of prepared messages over lanes and chunks smaller than the input, so chains of
    /// several chunks and lanes run side by side.
    @Test(
        "40 chains of 5 prepared messages over 3 lanes of 7: each chain lands in order, each reported with its offset")
    func chainsInOrder() async throws {
        let cluster = try KafkaTest.cluster(brokers: 1, topics: ["receipt-jobs": 4])
        let producer = try KafkaTest.producer(cluster)
        let chains = (0..<40).map { chain in (0..<5).map { chain * 5 + $0 } }
        let reports = Mutex<[Int: KafkaDeliveryReport]>([:])
        try await JobSubmitter(producer: producer).submit(chains: chains, spread: .init(lanes: 3, chunk: 7)) {
            index in
            (Array("chain-\(index / 5)".utf8), Array("\(index)".utf8))
        } delivered: { index, report in
            reports.withLock { $0[index] = report }
        }
        let delivered = reports.withLock { $0 }
        #expect(delivered.count == 200)
        #expect(delivered.values.filter { !$0.hasOffset }.isEmpty)
        let stored = try await KafkaTest.storedCount(producer, topic: "receipt-jobs", partitions: 4)
        await producer.shutdown()
        #expect(stored == 200)

        let consumer = try KafkaTest.consumer(cluster.bootstrapServers, group: KafkaTest.uniqueGroup("submit-chains"))
        try consumer.subscribe(topics: ["receipt-jobs"])
        let messages = try await KafkaTest.collect(consumer.events, messages: stored)
        await consumer.close()
        var byChain: [String: [Int]] = [:]
        for message in messages {
            let index = Int(String(decoding: try #require(message.value), as: UTF8.self)) ?? -1
            byChain[String(decoding: try #require(message.key), as: UTF8.self), default: []].append(index)
        }
        #expect(byChain.count == 40)
        for (chain, order) in byChain {
            #expect(order == order.sorted(), "\(chain) out of order")
            #expect(order.count == 5)
        }
    }
}

/// A fixed list of items as an async sequence.
struct GatewayItems: AsyncSequence, Sendable {
    typealias Element = JobSubmitter.Item
    let items: [JobSubmitter.Item]

    struct AsyncIterator: AsyncIteratorProtocol {
        var remaining: ArraySlice<JobSubmitter.Item>
        mutating func next() async -> JobSubmitter.Item? { remaining.popFirst() }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(remaining: items[...]) }
}
