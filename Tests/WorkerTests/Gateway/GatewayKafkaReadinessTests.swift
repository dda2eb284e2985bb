import Foundation
import Gateway
import Kafka
import Testing

/// The gateway's `/readyz` follows what the brokers answer, not the traffic: a Kubernetes readiness probe takes an
/// unready pod out of its Service, so no request would ever come to clear it.
@Suite("Gateway: readiness follows Kafka, and Kafka's refusals are answered as what they are", .timeLimit(.minutes(2)))
struct GatewayKafkaReadinessTests {
    /// Waits for `/readyz` to answer `status` (polling it, as a kubelet does), sending nothing else.
    static func awaitReadiness(
        _ harness: GatewayTestHarness, _ status: Int, containing reason: String? = nil, _ what: String
    ) async throws {
        try await GatewayTestHarness.eventually(what, within: .seconds(50)) {
            let reply = try await harness.operations("readyz")
            return reply.status == status && (reason.map { reply.text.contains($0) } ?? true)
        }
    }

    @Test("every broker away with no traffic: /readyz 503 brokers_down; back: ready again with no request sent")
    func brokersAwayAndBackWithoutTraffic() async throws {
        try await GatewayTestHarness.with { harness in
            try await Self.awaitReadiness(harness, 200, "ready at start")
            try harness.cluster.setBrokerDown(-1)
            try await Self.awaitReadiness(harness, 503, containing: "brokers_down", "/readyz 503 brokers_down")
            try harness.cluster.setBrokerUp(-1)
            try await Self.awaitReadiness(harness, 200, "/readyz 200 again, with no request sent")
            #expect(try await harness.messageCount() == 0)
        }
    }

    @Test("after a publish Kafka did not acknowledge, the gateway becomes ready again by itself once a broker answers")
    func readyAgainAfterFailedPublishWithoutTraffic() async throws {
        try await GatewayTestHarness.with { configuration in
            configuration.publishTimeoutMilliseconds = 1_000
        } _: { harness in
            try harness.cluster.setBrokerDown(-1)
            let refused = try await harness.post(
                "v1/receipts", json: ["account_id": "a", "receipt": "b", "job_id": "while-down"])
            #expect(refused.status == 503, "\(refused.text)")
            #expect(refused.json["error"] as? String == "kafka_unavailable")
            let unready = try await harness.operations("readyz")
            #expect(unready.status == 503 && unready.text.contains("kafka_unavailable"), "\(unready.text)")

            try harness.cluster.setBrokerUp(-1)
            // No request from here on: only the gateway's own look at the brokers may make it ready.
            try await Self.awaitReadiness(harness, 200, "/readyz 200 with no request sent after the brokers are back")
            let accepted = try await harness.post(
                "v1/receipts", json: ["account_id": "a", "receipt": "b", "job_id": "after"])
            #expect(accepted.status == 202, "\(accepted.text)")
        }
    }

    @Test("a 1,020,000-byte job (under the body limit, over the producer's record limit) is 413 before Kafka is asked")
    func recordTooLargeForTheProducer() async throws {
        try await GatewayTestHarness.with { harness in
            let prefix = #"{"job_id":"big","account_id":"a","receipt":""#
            let suffix = #""}"#
            let body = Array(
                (prefix + String(repeating: "A", count: 1_020_000 - prefix.utf8.count - suffix.utf8.count) + suffix)
                    .utf8)
            #expect(body.count == 1_020_000)
            #expect(body.count < GatewayConfiguration().maximumBodyBytes)
            let reply = try await harness.post("v1/receipts", body)
            #expect(reply.status == 413, "\(reply.text)")
            #expect(reply.json["error"] as? String == "too_large", "\(reply.text)")
            #expect(!reply.text.contains("retry"), "\(reply.text)")
            #expect(reply.header("Content-Type")?.hasPrefix("application/json") == true)
            let ready = try await harness.operations("readyz")
            #expect(ready.status == 200, "one large request must not take the gateway out: \(ready.text)")
            #expect(try await harness.messageCount() == 0)
            // A job of ordinary size goes through as before.
            let small = try await harness.post("v1/receipts", json: ["account_id": "a", "receipt": "b"])
            #expect(small.status == 202, "\(small.text)")
        }
    }

    @Test("a permanent producer error is never answered as 'retry', and leaves readiness alone")
    func permanentProducerErrors() async throws {
        try await GatewayTestHarness.with { harness in
            // A broker whose max.message.bytes is lower than the producer's: too large, not unavailable.
            harness.cluster.pushRequestErrors(.produce, [.messageSizeTooLarge])
            let large = try await harness.post(
                "v1/receipts", json: ["account_id": "a", "receipt": "b", "job_id": "large"])
            #expect(large.status == 413, "\(large.text)")
            #expect(large.json["error"] as? String == "too_large", "\(large.text)")
            #expect(try await harness.operations("readyz").status == 200)

            let accepted = try await harness.post("v1/receipts", json: ["account_id": "a", "receipt": "b"])
            #expect(accepted.status == 202, "\(accepted.text)")

            // What a broker answers when an ACL forbids this client to write the topic (last: librdkafka then holds
            // the topic in error until its next metadata refresh).
            harness.cluster.pushRequestErrors(.produce, [.topicAuthorizationFailed])
            let forbidden = try await harness.post(
                "v1/receipts", json: ["account_id": "a", "receipt": "b", "job_id": "acl"])
            #expect(forbidden.status == 500, "\(forbidden.text)")
            #expect(forbidden.json["error"] as? String == "kafka_refused", "\(forbidden.text)")
            #expect(!forbidden.text.contains("retry"), "\(forbidden.text)")
            #expect((forbidden.json["message"] as? String)?.contains("TOPIC_AUTHORIZATION_FAILED") == true)
            #expect(try await harness.operations("readyz").status == 200)
        }
    }
}
