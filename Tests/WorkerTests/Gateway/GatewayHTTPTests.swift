import AppleClients
import Foundation
import Gateway
import Kafka
import Messages
import Observability
import Operations
import Reconciler
import StoreHTTP
import Testing

@testable import AppleSimulator

@Suite("Gateway: HTTP over the mock cluster", .timeLimit(.minutes(2)))
struct GatewayHTTPTests {
    @Test("POST /v1/receipts publishes the job keyed by account id and answers 202 with its job_id")
    func receiptPublished() async throws {
        try await GatewayTestHarness.with { harness in
            // No job_id and no schema: the gateway fills both in.
            let generated = try await harness.post(
                "v1/receipts", json: ["account_id": "acct-1", "receipt": "MIIbase64", "bundle_id": "com.example.app"])
            #expect(generated.status == 202, "\(generated.text)")
            let generatedID = try #require(generated.json["job_id"] as? String)
            #expect(UUID(uuidString: generatedID) != nil)

            let given = try await harness.post(
                "v1/receipts",
                json: [
                    "schema": "receipt-job/v1", "job_id": "job-42", "account_id": "acct-2",
                    "signed_transaction": "a.b.c", "unknown_field": 7,
                ])
            #expect(given.status == 202)
            #expect(given.json["job_id"] as? String == "job-42")

            let messages = try await harness.consume(2)
            let codec = MessageCodec()
            let jobs = try Dictionary(
                uniqueKeysWithValues: messages.map { message in
                    let job = try codec.decodeJob(try #require(message.value))
                    #expect(message.key == Array(job.accountID.utf8), "the key is the account id")
                    return (job.jobID, job)
                })
            #expect(jobs[generatedID]?.accountID == "acct-1")
            #expect(jobs[generatedID]?.proof == .receipt("MIIbase64"))
            #expect(jobs[generatedID]?.bundleID == "com.example.app")
            #expect(jobs["job-42"]?.proof == .signedTransaction("a.b.c"))
        }
    }

    @Test("POST /apple/notifications: 200 after delivery, and Apple's retry is the same job")
    func notificationIdempotent() async throws {
        try await GatewayTestHarness.with { harness in
            let uuid = "0F3A2B1C-1111-4222-8333-444455556666"
            let body = try GatewayTestData.signedNotification(uuid: uuid)
            // Apple sends no bearer token.
            let first = try await harness.post("apple/notifications", json: body, authorization: nil)
            let retry = try await harness.post("apple/notifications", json: body, authorization: nil)
            #expect(first.status == 200, "\(first.text)")
            #expect(retry.status == 200)
            let expectedID = JobIntake.notificationJobIDPrefix + uuid.lowercased()
            #expect(first.json["job_id"] as? String == expectedID)
            #expect(retry.json["job_id"] as? String == expectedID)

            let messages = try await harness.consume(2)
            let codec = MessageCodec()
            for message in messages {
                let job = try codec.decodeJob(try #require(message.value))
                #expect(job.jobID == expectedID)
                #expect(job.accountID == "apple-notification")
                // About no transaction: keyed by its uuid (docs/messages.md, "Notification jobs").
                #expect(message.key == Array(("apple-notification/" + uuid.lowercased()).utf8))
                #expect(job.proof == .notification(body["signedPayload"] as? String ?? ""))
            }
        }
    }

    @Test("the gateway and the reconciler publish one notification with the same key (its purchase) and job id")
    func notificationKeyedByPurchase() async throws {
        try await GatewayTestHarness.with { harness in
            let pki = try AppleSimHarness.sharedPKI.get()
            let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
            let transaction = SimulatedTransaction(
                transactionId: "2000000000000042", originalTransactionId: "2000000000000041",
                bundleId: "com.example.app", productId: "com.example.monthly", environment: .sandbox, quantity: 1,
                purchaseDateMs: nowMs, originalPurchaseDateMs: nowMs - 86_400_000, expiresDateMs: nowMs + 86_400_000,
                productType: "Auto-Renewable Subscription")
            struct Payload: Encodable {
                struct Data: Encodable {
                    var bundleId = "com.example.app"
                    var environment = "Sandbox"
                    var signedTransactionInfo: String
                }
                var notificationType = "DID_RENEW"
                var notificationUUID = "7D3A2B1C-1111-4222-8333-444455556666"
                var signedDate: Int64
                var data: Data
            }
            let signedPayload = try SimulatedJWS.sign(
                Payload(
                    signedDate: nowMs,
                    data: .init(
                        signedTransactionInfo: try SimulatedJWS.signTransaction(transaction, pki: pki, nowMs: nowMs))),
                pki: pki)
            let posted = try await harness.post(
                "apple/notifications", json: ["signedPayload": signedPayload], authorization: nil)
            #expect(posted.status == 200, "\(posted.text)")

            // The reconciler's way: the same job maker and its Kafka sink.
            let producer = try KafkaProducer(
                configuration: KafkaProducerConfiguration(bootstrapServers: harness.cluster.bootstrapServers))
            let recovered = try NotificationJob.job(
                signedPayload: signedPayload, accountID: "apple-notification", submittedAt: Date())
            try await KafkaRecoveredJobSink(producer: producer, topic: GatewayTestHarness.topic).publish(recovered)
            await producer.shutdown()

            let messages = try await harness.consume(2)
            let codec = MessageCodec()
            let published = try messages.map { message in
                (key: message.key ?? [], jobID: try codec.decodeJob(try #require(message.value)).jobID)
            }
            #expect(published.count == 2)
            for record in published {
                #expect(record.key == Array("apple-notification/2000000000000041".utf8))
                #expect(record.jobID == "apple-notification-7d3a2b1c-1111-4222-8333-444455556666")
            }
        }
    }

    @Test("bad input gets a 4xx JSON error naming the problem, and nothing is published")
    func badInput() async throws {
        try await GatewayTestHarness.with { configuration in
            configuration.maximumBodyBytes = 4_096
        } _: { harness in
            func expectError(_ reply: GatewayTestHarness.Reply, _ status: Int, _ code: String) {
                #expect(reply.status == status, "\(reply.text)")
                #expect(reply.json["error"] as? String == code, "\(reply.text)")
                #expect(reply.json["message"] is String)
            }
            expectError(try await harness.post("v1/receipts", Array("{not json".utf8)), 400, "not_json")
            expectError(try await harness.post("v1/receipts", Array("[1,2]".utf8)), 400, "not_json")
            let missing = try await harness.post("v1/receipts", json: ["receipt": "abc"])
            expectError(missing, 400, "missing_field")
            #expect(missing.json["field"] as? String == "account_id")
            expectError(
                try await harness.post("v1/receipts", json: ["account_id": 5, "receipt": "abc"]), 400, "wrong_type")
            expectError(
                try await harness.post(
                    "v1/receipts", json: ["account_id": "a", "receipt": "abc", "transaction_id": "1"]),
                400, "invalid_value")
            expectError(
                try await harness.post("v1/receipts", json: ["account_id": "a", "receipt": "abc", "schema": "v9"]),
                400, "unsupported_schema")
            expectError(
                try await harness.post(
                    "v1/receipts", Array(#"{"account_id":"a","receipt":"b"}"#.utf8),
                    contentType: "text/plain"),
                415, "unsupported_media_type")
            expectError(
                try await harness.post(
                    "v1/receipts", Array(#"{"account_id":"a","receipt":"b"}"#.utf8),
                    contentType: nil),
                415, "unsupported_media_type")
            let large = ["account_id": "a", "receipt": String(repeating: "A", count: 5_000)]
            expectError(try await harness.post("v1/receipts", json: large), 413, "too_large")
            expectError(
                try await harness.post("apple/notifications", json: ["signed": "x"]), 400, "missing_field")
            expectError(
                try await harness.post("apple/notifications", json: ["signedPayload": "not-a-jws"]), 400,
                "invalid_value")
            expectError(
                try await harness.post(
                    "apple/notifications", json: ["signedPayload": try GatewayTestData.jws(payload: ["a": 1])]),
                400, "invalid_value")
            expectError(
                try await harness.post(
                    "apple/notifications", json: try GatewayTestData.notification(uuid: "../../etc/passwd")),
                400, "invalid_value")

            // Only now publish a good one: it must be the first message of the topic.
            let good = try await harness.post("v1/receipts", json: ["account_id": "a", "receipt": "b", "job_id": "ok"])
            #expect(good.status == 202)
            let messages = try await harness.consume(1)
            #expect(try MessageCodec().decodeJob(try #require(messages.first?.value)).jobID == "ok")

            let metrics = try await harness.operations("metrics").text
            #expect(metrics.contains(MetricNames.gatewayRequests))
            #expect(metrics.contains(#"status="413""#))
            #expect(metrics.contains(#"status="202""#))
            #expect(metrics.contains(MetricNames.gatewayErrors))
        }
    }

    @Test("Kafka down: 503 kafka_unavailable, never 2xx, and /readyz says not ready")
    func kafkaDown() async throws {
        try await GatewayTestHarness.with { configuration in
            configuration.publishTimeoutMilliseconds = 1_000
        } _: { harness in
            let up = try await harness.post("v1/receipts", json: ["account_id": "a", "receipt": "b"])
            #expect(up.status == 202)
            #expect(try await harness.operations("readyz").status == 200)
            #expect(try await harness.operations("healthz").status == 200)

            try harness.cluster.setBrokerDown(-1)
            let receipt = try await harness.post(
                "v1/receipts", json: ["account_id": "a", "receipt": "c", "job_id": "x"])
            #expect(receipt.status == 503, "\(receipt.text)")
            #expect(receipt.json["error"] as? String == "kafka_unavailable")
            let notification = try await harness.post(
                "apple/notifications", json: try GatewayTestData.signedNotification(uuid: UUID().uuidString))
            #expect(notification.status == 503, "Apple must retry: \(notification.text)")
            let ready = try await harness.operations("readyz")
            #expect(ready.status == 503)
            #expect(ready.text.contains("kafka_unavailable"))
        }
    }

    @Test("wrong methods on the gateway's routes are 405 with Allow and a JSON error; unknown paths 404 with one")
    func methodsAndPaths() async throws {
        try await GatewayTestHarness.with { harness in
            func expectJSONError(_ reply: GatewayTestHarness.Reply, _ status: Int, _ code: String) {
                #expect(reply.status == status, "\(reply.text)")
                #expect(reply.header("Content-Type")?.hasPrefix("application/json") == true)
                #expect(reply.json["error"] as? String == code, "\(reply.text)")
                #expect(reply.json["message"] is String, "\(reply.text)")
            }
            expectJSONError(try await harness.post("v1/other", json: ["a": 1]), 404, "not_found")
            for (method, path) in [
                (TransportRequest.Method.get, "v1/receipts"), (.put, "v1/receipts"), (.get, "apple/notifications"),
            ] {
                let response = try await harness.http.execute(
                    TransportRequest(
                        method: method, url: "http://127.0.0.1:\(harness.port)/\(path)",
                        headers: [
                            ("Authorization", "Bearer \(GatewayTestHarness.token)"),
                            ("Content-Type", "application/json"),
                        ],
                        body: method == .put ? Array(#"{"account_id":"a","receipt":"b"}"#.utf8) : nil,
                        timeout: .seconds(30)))
                let reply = GatewayTestHarness.Reply(
                    status: response.status, body: response.body, headers: response.headers)
                expectJSONError(reply, 405, "method_not_allowed")
                #expect(reply.header("Allow") == "POST", "\(method) /\(path)")
            }
            let head = try await GatewayRawHTTP.request("HEAD", port: harness.port, path: "/v1/receipts")
            #expect(head.hasPrefix("HTTP/1.1 405"), "\(head)")
            #expect(head.lowercased().contains("\r\nallow: post\r\n"), "\(head)")
            #expect(try await harness.messageCount() == 0)
        }
    }

    @Test("the operations port: HEAD answers as GET without a body; other methods 405 with Allow; other paths 404 JSON")
    func operationsPortMethods() async throws {
        try await GatewayTestHarness.with { harness in
            for path in OperationsServer.paths {
                let get = try await harness.operations(path)
                let head = try await GatewayRawHTTP.request("HEAD", port: harness.metricsPort, path: "/\(path)")
                #expect(head.hasPrefix("HTTP/1.1 \(get.status)"), "HEAD /\(path): \(head)")
                let parts = head.components(separatedBy: "\r\n\r\n")
                #expect(parts.count == 2 && parts[1].isEmpty, "HEAD /\(path) has no body: \(head)")

                let response = try await harness.http.execute(
                    TransportRequest(
                        method: .post, url: "http://127.0.0.1:\(harness.metricsPort)/\(path)", body: [],
                        timeout: .seconds(30)))
                let post = GatewayTestHarness.Reply(
                    status: response.status, body: response.body, headers: response.headers)
                #expect(post.status == 405, "POST /\(path): \(post.text)")
                #expect(post.header("Allow") == "GET, HEAD")
                #expect(post.json["error"] as? String == "method_not_allowed", "\(post.text)")
            }
            let unknown = try await harness.operations("nothing-here")
            #expect(unknown.status == 404)
            #expect(unknown.json["error"] as? String == "not_found", "\(unknown.text)")
        }
    }
}
