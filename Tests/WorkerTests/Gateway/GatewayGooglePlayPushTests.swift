import Foundation
import Gateway
import Hummingbird
import Kafka
import Logging
import Messages
import Operations
import StoreHTTP
import Testing

/// `POST /google-play/notifications` over the mock cluster: a push with a valid OIDC token becomes one job, answered
/// after its delivery report; a redelivery is the same job; a push not authenticated is 401 and publishes nothing; a
/// push that can never make a job is acknowledged and discarded; Kafka not acknowledging is 503.
@Suite("Gateway: Google Play Pub/Sub pushes", .timeLimit(.minutes(3)))
struct GatewayGooglePlayPushTests {
    static let path = "google-play/notifications"

    /// A JWK set file of the test signer's first key.
    static let jwksFile = Result { () throws -> URL in
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("pubsub-jwks-\(UUID().uuidString).json")
        try Data(try PubSubTestSigner.jwks(["k1"])).write(to: url)
        return url
    }

    static func configure(_ configuration: inout GatewayConfiguration) {
        configuration.pubSubAudience = PubSubTestSigner.audience
        configuration.pubSubServiceAccount = PubSubTestSigner.serviceAccount
        configuration.pubSubJWKSFile = try? jwksFile.get().path
        configuration.pubSubSubscription = "projects/p/subscriptions/rtdn"
        configuration.googlePlayPackages = ["com.example.app"]
    }

    static func push(
        _ harness: GatewayTestHarness, _ envelope: [String: Any], authorization: String? = nil
    ) async throws -> GatewayTestHarness.Reply {
        try await harness.post(
            path, json: envelope, authorization: authorization ?? (try PubSubTestSigner.authorization()))
    }

    @Test(
        "a valid push is one job with the contract's id, key and content, answered after delivery; a redelivery is the same job"
    )
    func validPush() async throws {
        try await GatewayTestHarness.with(Self.configure) { harness in
            let text = PubSubTestSigner.subscriptionNotification(token: "tok-1")
            let first = try await Self.push(harness, PubSubTestSigner.envelope(text))
            #expect(first.status == 200, "\(first.text)")
            #expect(first.json["job_id"] as? String == "google-play-notification-136969346945")
            let again = try await Self.push(harness, PubSubTestSigner.envelope(text))
            #expect(again.json["job_id"] as? String == "google-play-notification-136969346945")
            let messages = try await harness.consume(2)
            #expect(messages.count == 2)
            let codec = MessageCodec()
            let jobs = try messages.map { try codec.decodeJob($0.value ?? []) }
            #expect(jobs[0].jobID == jobs[1].jobID && jobs[0].contentDigest == jobs[1].contentDigest)
            for message in messages {
                #expect(String(decoding: message.key ?? [], as: UTF8.self) == "google-play-notification/tok-1")
            }
            guard case .googlePlayNotification(let proof) = jobs[0].proof else {
                Issue.record("not a Google Play notification job: \(jobs[0].proof.fieldName)")
                return
            }
            #expect(proof.packageName == "com.example.app" && proof.purchaseToken == "tok-1")
            #expect(proof.notification == text && proof.messageID == "136969346945")
            #expect(proof.publishedAt == RFC3339.parse("2026-11-29T12:00:00.000Z"))
            #expect(jobs[0].accountID == "google-play-notification")

            // A test notification (no purchase) is published too, in the account's test lane.
            let test = try await Self.push(
                harness,
                PubSubTestSigner.envelope(
                    #"{"version":"1.0","packageName":"com.example.app","eventTimeMillis":"1","testNotification":{"version":"1.0"}}"#,
                    messageID: "7"))
            #expect(test.json["job_id"] as? String == "google-play-notification-7")
            let all = try await harness.consume(3)
            #expect(all.contains { String(decoding: $0.key ?? [], as: UTF8.self) == "google-play-notification/test" })
            let metrics = try await harness.operations("metrics").text
            // The registry is the process's (other tests count too): the series is there.
            #expect(metrics.contains(#"verify_gateway_pubsub_pushes_total{outcome="accepted"} "#), "\(metrics)")
        }
    }

    @Test("a push not authenticated is 401 unauthenticated naming the check, and nothing is published")
    func unauthenticated() async throws {
        try await GatewayTestHarness.with(Self.configure) { harness in
            let envelope = PubSubTestSigner.envelope(PubSubTestSigner.subscriptionNotification())
            var claims = PubSubTestSigner.claims(now: Date())
            claims["aud"] = "https://someone-else.example.com"
            let cases: [(String?, String)] = [
                (nil, PubSubTokenVerifier.Failure.noAuthorization.rawValue),
                ("Bearer \(GatewayTestHarness.token)", PubSubTokenVerifier.Failure.notJWT.rawValue),
                (
                    "Bearer " + (try PubSubTestSigner.token(claims: claims)),
                    PubSubTokenVerifier.Failure.audience.rawValue
                ),
            ]
            for (authorization, check) in cases {
                let reply = try await harness.post(
                    Self.path, Array(try JSONSerialization.data(withJSONObject: envelope)),
                    authorization: authorization)
                #expect(reply.status == 401, "\(reply.text)")
                #expect(reply.json["error"] as? String == "unauthenticated")
                #expect(reply.json["message"] as? String == check)
                #expect(reply.header("WWW-Authenticate") == "Bearer")
            }
            // Another subscription's push is not this gateway's.
            let other = try await Self.push(
                harness,
                PubSubTestSigner.envelope(
                    PubSubTestSigner.subscriptionNotification(), subscription: "projects/p/subscriptions/other"))
            #expect(other.status == 401 && other.json["field"] as? String == "subscription", "\(other.text)")
            #expect(try await harness.messageCount() == 0)
        }
    }

    @Test("each permanently bad push is acknowledged with its reason and counted, and nothing is published")
    func badInput() async throws {
        try await GatewayTestHarness.with(Self.configure) { harness in
            func envelope(data: Any?) -> [String: Any] {
                var message: [String: Any] = ["messageId": "1", "publishTime": "2026-11-29T12:00:00Z"]
                message["data"] = data
                return ["message": message, "subscription": "projects/p/subscriptions/rtdn"]
            }
            func base64(_ text: String) -> String { Data(text.utf8).base64EncodedString() }
            let authorization = try PubSubTestSigner.authorization()
            let cases: [([UInt8], String)] = [
                (Array("not json".utf8), "not_json"),
                (Array(#"{"subscription":"projects/p/subscriptions/rtdn"}"#.utf8), "no_message"),
                (try json(envelope(data: nil)), "no_data"),
                (try json(envelope(data: 42)), "no_data"),
                (try json(envelope(data: "%%% not base64 %%%")), "data_not_base64"),
                (try json(envelope(data: base64("plain text"))), "data_not_json"),
                (try json(envelope(data: Data([0xFF, 0xFE, 0x7B]).base64EncodedString())), "data_not_json"),
                (try json(envelope(data: base64(#"{"hello":"world"}"#))), "not_developer_notification"),
                (
                    try json(
                        envelope(
                            data: base64(
                                #"{"packageName":"com.example.app","subscriptionNotification":{"notificationType":2}}"#)
                        )),
                    "not_developer_notification"
                ),
                (
                    try json(
                        PubSubTestSigner.envelope(PubSubTestSigner.subscriptionNotification(package: "com.other.app"))),
                    "unknown_package"
                ),
                (
                    try json(
                        PubSubTestSigner.envelope(PubSubTestSigner.subscriptionNotification(), messageID: "no spaces")),
                    "no_message_id"
                ),
                (
                    try json(
                        PubSubTestSigner.envelope(
                            PubSubTestSigner.subscriptionNotification(token: String(repeating: "t", count: 4097)))),
                    "invalid_job"
                ),
            ]
            for (body, reason) in cases {
                let reply = try await harness.post(Self.path, body, authorization: authorization)
                #expect(reply.status == 200, "\(reason): \(reply.text)")
                #expect(reply.json["discarded"] as? String == reason, "\(reply.text)")
            }
            #expect(try await harness.messageCount() == 0)
            let metrics = try await harness.operations("metrics").text
            // The registry is the process's (other tests count too): each reason's series is there.
            for reason in Set(cases.map(\.1)) {
                #expect(
                    metrics.contains(#"verify_gateway_notifications_discarded_total{reason="\#(reason)"} "#),
                    "\(reason)")
            }
            #expect(metrics.contains(#"verify_gateway_pubsub_pushes_total{outcome="discarded"} "#))
        }
    }

    @Test("Kafka not acknowledging: 503 so Pub/Sub delivers again, never 2xx")
    func kafkaDown() async throws {
        try await GatewayTestHarness.with { configuration in
            Self.configure(&configuration)
            configuration.publishTimeoutMilliseconds = 1_000
        } _: { harness in
            try harness.cluster.setBrokerDown(-1)
            let reply = try await Self.push(
                harness, PubSubTestSigner.envelope(PubSubTestSigner.subscriptionNotification()))
            #expect(reply.status == 503, "\(reply.text)")
            #expect(reply.json["error"] as? String == "kafka_unavailable")
        }
    }

    @Test("without the Pub/Sub settings the route is 404; with them, another method is 405")
    func routeOff() async throws {
        try await GatewayTestHarness.with { harness in
            let reply = try await Self.push(
                harness, PubSubTestSigner.envelope(PubSubTestSigner.subscriptionNotification()))
            #expect(reply.status == 404)
        }
        try await GatewayTestHarness.with(Self.configure) { harness in
            let response = try await harness.http.execute(
                TransportRequest(url: "http://127.0.0.1:\(harness.port)/\(Self.path)", timeout: .seconds(30)))
            #expect(response.status == 405)
        }
    }

    @Test("the JWK set from a URL served over HTTP by the test: fetched by the gateway's HTTP client")
    func keysFromURL() async throws {
        let jwks = try PubSubTestSigner.jwks(["k1"])
        let router = Router()
        router.get("certs") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "application/json", .cacheControl: "public, max-age=600"],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: jwks)))
        }
        let listening = AsyncStream<Int>.makeStream()
        let server = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in listening.continuation.yield(channel.localAddress?.port ?? 0) })
        let serverTask = Task { try await server.runService() }
        defer { serverTask.cancel() }
        var iterator = listening.stream.makeAsyncIterator()
        let keysPort = try #require(await iterator.next())
        try await GatewayTestHarness.with { configuration in
            Self.configure(&configuration)
            configuration.pubSubJWKSFile = nil
            configuration.pubSubJWKSURL = "http://127.0.0.1:\(keysPort)/certs"
        } _: { harness in
            let reply = try await Self.push(
                harness, PubSubTestSigner.envelope(PubSubTestSigner.subscriptionNotification()))
            #expect(reply.status == 200, "\(reply.text)")
            let forged = try await Self.push(
                harness, PubSubTestSigner.envelope(PubSubTestSigner.subscriptionNotification()),
                authorization: "Bearer "
                    + (try PubSubTestSigner.token(
                        claims: PubSubTestSigner.claims(now: Date()), header: ["alg": "RS256", "kid": "k1"],
                        signWith: "k2")))
            #expect(forged.status == 401)
            #expect(try await harness.messageCount() == 1)
        }
    }

    @Test(
        "a Pub/Sub setting set wrong refuses to start, naming its key",
        arguments: [
            ("audience", "gateway_pubsub_audience"), ("account", "gateway_pubsub_service_account"),
            ("nokeys", "gateway_pubsub_jwks_url"), ("both", "gateway_pubsub_jwks_file"),
            ("ftp", "gateway_pubsub_jwks_url"), ("missingfile", "gateway_pubsub_jwks_file"),
            ("notjwks", "gateway_pubsub_jwks_file"),
        ])
    func wrongSetting(setting: String, key: String) throws {
        var configuration = GatewayConfiguration(authentication: .disabled)
        Self.configure(&configuration)
        let notJWKS = FileManager.default.temporaryDirectory.appendingPathComponent("not-jwks-\(UUID().uuidString)")
        try Data("{}".utf8).write(to: notJWKS)
        switch setting {
        case "audience": configuration.pubSubAudience = ""
        case "account": configuration.pubSubServiceAccount = nil
        case "nokeys": configuration.pubSubJWKSFile = nil
        case "both": configuration.pubSubJWKSURL = "https://www.googleapis.com/oauth2/v3/certs"
        case "ftp":
            configuration.pubSubJWKSFile = nil
            configuration.pubSubJWKSURL = "ftp://keys.example/certs"
        case "missingfile": configuration.pubSubJWKSFile = "/nonexistent/jwks.json"
        default: configuration.pubSubJWKSFile = notJWKS.path
        }
        let error = #expect(throws: ConfigurationError.self) {
            _ = try ReceiptGateway(configuration: configuration, publisher: NeverPublisher(), logger: .init(label: "t"))
        }
        #expect(error?.key == key, "\(String(describing: error))")
    }
}

private func json(_ object: [String: Any]) throws -> [UInt8] {
    Array(try JSONSerialization.data(withJSONObject: object))
}

/// A publisher never asked (the gateway refuses to start first).
private struct NeverPublisher: JobPublishing {
    func publish(_ job: ReceiptJob) async throws(GatewayError) -> KafkaDeliveryReport {
        throw GatewayError(.kafkaUnavailable, "not used")
    }
}
