import Kafka
import RateLimiter
import Testing
import Worker

/// Throttle signals travel between workers over the compacted control topic of a real (mock) Kafka cluster.
@Suite("Cluster-wide throttling over Kafka", .timeLimit(.minutes(2)))
struct ThrottleSignalExchangeTests {
    @Test("a storm seen by one worker lowers the other's limit through receipt-control")
    func stormTravelsThroughKafka() async throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        try cluster.createTopic("receipt-control", partitions: 1)
        let producerA = try KafkaProducer(
            configuration: KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers, lingerMilliseconds: 1)
        )
        let producerB = try KafkaProducer(
            configuration: KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers, lingerMilliseconds: 1)
        )
        let consumerSettings = KafkaConsumerConfiguration(
            bootstrapServers: cluster.bootstrapServers, groupID: "verify-workers",
            properties: ["topic.metadata.refresh.interval.ms": "500"])

        var configuration = RateLimiterTestSupport.configuration(limit: 1)
        configuration.concurrency = AIMDConfiguration(minimum: 1, maximum: 32, start: 16)
        configuration.workerID = "worker-a"
        let exchangeA = try ThrottleSignalExchange(
            producer: producerA, consumerConfiguration: consumerSettings, topic: "receipt-control",
            workerID: "worker-a")
        let gateA = AppleCallGate(
            configuration: configuration, clock: ContinuousClock(), metrics: RateLimiterTestMetrics(),
            publish: exchangeA.publish)

        configuration.workerID = "worker-b"
        let exchangeB = try ThrottleSignalExchange(
            producer: producerB, consumerConfiguration: consumerSettings, topic: "receipt-control",
            workerID: "worker-b")
        let gateB = AppleCallGate(
            configuration: configuration, clock: ContinuousClock(), metrics: RateLimiterTestMetrics(),
            publish: exchangeB.publish)
        // B tells the test each time it takes in a signal, so the test awaits events instead of sleeping.
        let (accepted, acceptedContinuation) = AsyncStream.makeStream(of: Int.self)

        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await exchangeA.run { gateA.ingest(signalJSON: $0) } }
            group.addTask {
                try await exchangeB.run { value in
                    let ok = gateB.ingest(signalJSON: value)
                    if ok { acceptedContinuation.yield(gateB.snapshot().effectiveLimit) }
                    return ok
                }
            }
            #expect(gateB.snapshot().effectiveLimit == 16)
            // A publishes as a worker does: on significant changes and as a heartbeat.
            group.addTask { try await gateA.runSignalPublisher() }
            var limits = accepted.makeAsyncIterator()
            #expect(await limits.next() == 16)  // A's first heartbeat, at its full limit
            // A sees 21005 and halves its limit; its next signal lowers B's limit, not B's own view of Apple.
            let permit = try await gateA.acquire(.verifyReceipt)
            gateA.report(permit, .throttled(retryAfter: nil))
            #expect(gateA.snapshot().localLimit == 8)
            var lowered: Int?
            while lowered == nil, let limit = await limits.next() {
                if limit < 16 { lowered = limit }
            }
            #expect(lowered == 8)
            #expect(gateB.snapshot().localLimit == 16)
            group.cancelAll()
        }
        await producerA.shutdown(timeout: .seconds(5))
        await producerB.shutdown(timeout: .seconds(5))
    }
}
