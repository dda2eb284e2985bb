import Foundation
import Kafka
import Testing

/// librdkafka 2.0.2 acknowledges a message *implicitly*, without an offset, when its produce request failed with an
/// error that may or may not have stored it and a later request of the same partition succeeded; the mock broker
/// has not stored it. These tests make that happen on purpose, every time: one message per produce request, the
/// request of the second message held back by the broker and answered `REQUEST_TIMED_OUT` after a delay, the third
/// message's request answered at once.
@Suite("Kafka: only a delivery report with an offset proves delivery", .timeLimit(.minutes(2)))
struct KafkaDeliveryProofTests {
    private static func record(_ topic: String, _ value: String) -> KafkaProducerRecord {
        KafkaProducerRecord(topic: topic, partition: 0, value: Array(value.utf8))
    }

    /// Sends `first`, then holds back the produce request of `held` (the broker answers it `REQUEST_TIMED_OUT` after
    /// 1.5 s) while `later` is sent and answered; returns `held`'s outcome and the values stored in the partition.
    private static func holdBackOne(
        confirmed: Bool
    ) async throws -> (held: Result<KafkaDeliveryReport, any Error>, stored: [String], resends: Int) {
        let topic = "kt-proof"
        let cluster = try KafkaTest.cluster(brokers: 1, topics: [topic: 1])
        // One message per request, sent as soon as it is queued: the request held back carries exactly one message.
        let producer = try KafkaTest.producer(cluster, properties: ["batch.num.messages": "1", "linger.ms": "0"])
        #expect(try await producer.send(record(topic, "first")).hasOffset)
        try cluster.pushBrokerRequestError(broker: 1, .produce, .requestTimedOut, responseDelay: .milliseconds(1_500))
        let held = Task { () async throws -> KafkaDeliveryReport in
            confirmed
                ? try await producer.sendConfirmed(record(topic, "held"))
                : try await producer.send(record(topic, "held"))
        }
        // The held request has reached the broker once the pushed error is taken: only then is the later one sent,
        // so it is the later request that succeeds while the held one waits for its answer.
        try await PipelineHarness.poll("the held request at the broker", timeout: .seconds(30)) {
            try cluster.pendingRequestErrors(broker: 1, .produce) == 0
        }
        #expect(try await producer.send(record(topic, "later")).hasOffset)
        let outcome = await held.result
        let count = try await KafkaTest.storedCount(producer, topic: topic, partitions: 1)
        let resends = producer.confirmationResends
        await producer.shutdown()
        let consumer = try KafkaTest.consumer(cluster.bootstrapServers, group: KafkaTest.uniqueGroup("proof"))
        try consumer.subscribe(topics: [topic])
        let stored = try await KafkaTest.collect(consumer.events, messages: count).map { KafkaTest.text($0.value) }
        await consumer.close()
        return (outcome, stored, resends)
    }

    @Test("plain send takes the implicit acknowledgement as delivery: exactly the held message is lost")
    func plainSendLosesTheHeldMessage() async throws {
        let (held, stored, _) = try await Self.holdBackOne(confirmed: false)
        let report = try held.get()
        #expect(!report.hasOffset, "the held message was acknowledged without an offset: \(report)")
        #expect(stored == ["first", "later"])
    }

    @Test("sendConfirmed sends the held message again: nothing is lost")
    func sendConfirmedLosesNothing() async throws {
        let (held, stored, resends) = try await Self.holdBackOne(confirmed: true)
        let report = try held.get()
        #expect(report.hasOffset)
        #expect(resends == 1)
        #expect(stored == ["first", "later", "held"])
        #expect(report.offset == 2)
    }

    @Test("sendConfirmed never returns a report without an offset: after its attempts it throws deliveryUnproven")
    func sendConfirmedThrowsWhenNeverProven() async throws {
        let topic = "kt-unproven"
        let cluster = try KafkaTest.cluster(brokers: 1, topics: [topic: 1])
        // acks=0: the broker answers nothing, so every report lacks an offset, as an implicit acknowledgement does.
        let unacknowledged = try KafkaTest.producer(cluster, properties: ["enable.idempotence": "false", "acks": "0"])
        let error = await #expect(throws: KafkaError.self) {
            try await unacknowledged.sendConfirmed(Self.record(topic, "twice"), attempts: 2)
        }
        #expect(error?.code == .deliveryUnproven)
        #expect(error?.isRetryable == true)
        #expect(error?.isPermanent == false)
        #expect(error?.code.name == "_DELIVERY_UNPROVEN")
        #expect(unacknowledged.confirmationResends == 2)
        await unacknowledged.shutdown()
        let producer = try KafkaTest.producer(cluster)
        let confirmed = try await producer.sendConfirmed(Self.record(topic, "once"), attempts: 2)
        #expect(confirmed.hasOffset)
        #expect(producer.confirmationResends == 0)
        let stored = try await KafkaTest.storedCount(producer, topic: topic, partitions: 1)
        await producer.shutdown()
        // Both unproven sends were in fact stored (acks=0 only hides it): a resend may store a message twice.
        #expect(stored == 3)
    }

    @Test(
        "sendConfirmedLater: a report with an offset, an acknowledgement without one as deliveryUnproven, none after shutdown"
    )
    func sendConfirmedLaterTellsItsCaller() async throws {
        let topic = "kt-later"
        let cluster = try KafkaTest.cluster(brokers: 1, topics: [topic: 1])
        let producer = try KafkaTest.producer(cluster)
        let stored = try await Self.sendLater(producer, Self.record(topic, "proven")).get()
        #expect(stored.hasOffset)
        #expect(producer.confirmationResends == 0)
        await producer.shutdown()
        #expect(
            !producer.sendConfirmedLater(Self.record(topic, "after")) { _ in Issue.record("called after shutdown") })

        // acks=0: the broker answers nothing, so the report lacks an offset, as an implicit acknowledgement does.
        let unacknowledged = try KafkaTest.producer(cluster, properties: ["enable.idempotence": "false", "acks": "0"])
        let outcome = try await Self.sendLater(unacknowledged, Self.record(topic, "unproven"))
        guard case .failure(let error) = outcome else { throw KafkaError(code: .deliveryUnproven, message: "offset") }
        #expect(error.code == .deliveryUnproven)
        #expect(error.isRetryable)
        #expect(unacknowledged.confirmationResends == 1)
        await unacknowledged.shutdown()
    }

    /// `record` sent through ``KafkaProducer/sendConfirmedLater(_:confirmed:)``, its outcome awaited.
    private static func sendLater(
        _ producer: KafkaProducer, _ record: KafkaProducerRecord
    ) async throws -> Result<KafkaDeliveryReport, KafkaError> {
        let (outcomes, continuation) = AsyncStream.makeStream(of: Result<KafkaDeliveryReport, KafkaError>.self)
        #expect(producer.sendConfirmedLater(record) { continuation.yield($0) })
        for await outcome in outcomes { return outcome }
        throw CancellationError()
    }
}
