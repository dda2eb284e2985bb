import Crypto
import Foundation
import GooglePlayClients
import RateLimiter
import StoreHTTP
import Synchronization
import Testing
import _CryptoExtras

/// A service account, its token endpoint and the Developer API, all on one scripted server, and the client under
/// test on a manual clock that a driver moves to each sleeper's deadline (retry delays, `Retry-After` holds).
private final class PlayHarness: Sendable {
    static let key = try! _RSA.Signing.PrivateKey(keySize: .bits2048)
    static let package = "com.example.play"
    static let token = "purchase-token.AB_cd-12"
    static let apiPrefix = "/androidpublisher/v3/applications/com.example.play/purchases"

    let server: AppleClientsFakeServer
    let baseURL: String
    let clock = ManualClock()
    let wall = PlayWallClock()
    let engine: CurlHTTPEngine
    let tokens: GooglePlayAccessTokens
    let gate: AppleCallGate<ManualClock>
    let client: GooglePlayAPIClient<ManualClock>

    init(
        server: AppleClientsFakeServer, baseURL: String,
        gateConfiguration: AppleCallGateConfiguration = .googlePlay(),
        retryPolicy: RetryPolicy = RetryPolicy(
            base: .milliseconds(100), maximumBackoff: .seconds(1), maximumAttempts: 3),
        requestTimeout: Duration = .seconds(10)
    ) throws {
        self.server = server
        self.baseURL = baseURL
        engine = try CurlHTTPEngine()
        let account = try GooglePlayServiceAccount(
            clientEmail: "verifier@example.iam.gserviceaccount.com", privateKeyID: "key-1",
            privateKeyPEM: Self.key.pemRepresentation)
        let wall = self.wall
        gate = AppleCallGate(configuration: gateConfiguration, clock: clock, metrics: NoRateLimiterMetrics())
        tokens = GooglePlayAccessTokens(
            account: account, tokenURL: baseURL + "/token", transport: engine, now: { wall.now },
            admission: GooglePlayAccessTokens.admission(through: gate))
        client = GooglePlayAPIClient(
            configuration: GooglePlayAPIConfiguration(
                baseURL: baseURL, tokenURL: baseURL + "/token", requestTimeout: requestTimeout),
            transport: engine, tokens: tokens, gate: gate, clock: clock, retryPolicy: retryPolicy, randomSeed: 7)
    }

    /// Runs `body`, moving the manual clock to each sleeper's deadline until `body` returns.
    func driving<T: Sendable>(_ body: @escaping @Sendable () async -> T) async -> T {
        let task = Task { await body() }
        let done = Atomic(false)
        let driver = Task { [clock] in
            while done.load(ordering: .acquiring) == false {
                if let next = clock.nextDeadline { clock.advance(to: next) }
                try? await Task.sleep(for: .milliseconds(1))
            }
        }
        let value = await task.value
        done.store(true, ordering: .releasing)
        await driver.value
        return value
    }

    static func tokenReply(_ accessToken: String = "access-1", expiresIn: Int = 3600) -> AppleClientsFakeServer.Reply {
        .json(#"{"access_token":"\#(accessToken)","expires_in":\#(expiresIn),"token_type":"Bearer"}"#)
    }

    static let subscriptionJSON = #"""
        {"kind":"androidpublisher#subscriptionPurchaseV2","regionCode":"DE","startTime":"2026-11-01T10:00:00.000Z",
         "subscriptionState":"SUBSCRIPTION_STATE_ACTIVE","acknowledgementState":"ACKNOWLEDGEMENT_STATE_PENDING",
         "linkedPurchaseToken":"older-token","testPurchase":{},"somethingNew":{"nested":[1,2]},
         "externalAccountIdentifiers":{"obfuscatedExternalAccountId":"acct-hash"},
         "lineItems":[{"productId":"premium_monthly","expiryTime":"2026-12-01T10:00:00.000Z",
           "latestSuccessfulOrderId":"GPA.1234-5678-9012-34567","autoRenewingPlan":{"autoRenewEnabled":true}}]}
        """#

    static let productJSON = #"""
        {"kind":"androidpublisher#productPurchaseV2","orderId":"GPA.3333-4444-5555-66666",
         "purchaseStateContext":{"purchaseState":"PURCHASED"},"obfuscatedExternalAccountId":"acct-hash",
         "testPurchaseContext":{"fopType":"TEST"},"acknowledgementState":"ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED",
         "productLineItem":[{"productId":"coins_100","productOfferDetails":{"consumptionState":
           "CONSUMPTION_STATE_YET_TO_BE_CONSUMED","quantity":1,"unknownField":true}}]}
        """#
}

/// The wall clock the access tokens read, moved by the test.
private final class PlayWallClock: Sendable {
    private let date = Mutex(Date(timeIntervalSince1970: 1_767_225_600))
    var now: Date { date.withLock { $0 } }
    func advance(seconds: TimeInterval) { date.withLock { $0.addTimeInterval(seconds) } }
}

@Suite("Google Play clients: service account, access tokens and the Developer API calls")
struct GooglePlayAPIClientTests {
    private typealias Harness = PlayHarness
    private var subscriptionPath: String { Harness.apiPrefix + "/subscriptionsv2/tokens/" + Harness.token }
    private var productPath: String { Harness.apiPrefix + "/productsv2/tokens/" + Harness.token }

    @Test("one token exchange serves many calls: the assertion is RS256 with Google's claims", .timeLimit(.minutes(2)))
    func tokenExchangeAndAssertion() async throws {
        try await AppleClientsFakeServer.withRunning { server, base in
            let play = try Harness(server: server, baseURL: base)
            server.setFallback("/token", Harness.tokenReply())
            server.setFallback(subscriptionPath, .json(Harness.subscriptionJSON))
            for _ in 0..<3 {
                let outcome = await play.driving {
                    await play.client.subscription(packageName: Harness.package, token: Harness.token)
                }
                #expect(outcome.answer?.subscriptionState == "SUBSCRIPTION_STATE_ACTIVE")
            }
            let exchanges = server.received(path: "/token")
            #expect(exchanges.count == 1, "the access token is cached")
            let form = String(decoding: try #require(exchanges.first).body, as: UTF8.self)
            #expect(form.hasPrefix("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion="))
            let assertion = String(form.split(separator: "=").last ?? "")
            let parts = assertion.split(separator: ".").map(String.init)
            #expect(parts.count == 3)
            let header = try JSONSerialization.jsonObject(with: Self.base64URL(parts[0])) as? [String: Any]
            let claims = try JSONSerialization.jsonObject(with: Self.base64URL(parts[1])) as? [String: Any]
            #expect(header?["alg"] as? String == "RS256" && header?["kid"] as? String == "key-1")
            #expect(claims?["iss"] as? String == "verifier@example.iam.gserviceaccount.com")
            #expect(claims?["scope"] as? String == "https://www.googleapis.com/auth/androidpublisher")
            #expect(claims?["aud"] as? String == base + "/token")
            let iat = (claims?["iat"] as? NSNumber)?.int64Value ?? 0
            #expect(iat == 1_767_225_600 && (claims?["exp"] as? NSNumber)?.int64Value == iat + 3600)
            let signature = _RSA.Signing.RSASignature(rawRepresentation: Self.base64URL(parts[2]))
            #expect(
                Harness.key.publicKey.isValidSignature(
                    signature, for: SHA256.hash(data: Data((parts[0] + "." + parts[1]).utf8)),
                    padding: .insecurePKCS1v1_5))
            for call in server.received(path: subscriptionPath) {
                #expect(call.method == "GET" && call.headers["authorization"] == "Bearer access-1")
            }
        }
    }

    @Test("the access token is exchanged again before it expires, by the injected clock", .timeLimit(.minutes(2)))
    func refreshBeforeExpiry() async throws {
        try await AppleClientsFakeServer.withRunning { server, base in
            let play = try Harness(server: server, baseURL: base)
            server.enqueue("/token", Harness.tokenReply("access-1"), Harness.tokenReply("access-2"))
            server.setFallback(productPath, .json(Harness.productJSON))
            _ = await play.driving { await play.client.product(packageName: Harness.package, token: Harness.token) }
            // 54 minutes on: 6 minutes left, more than the 5-minute margin: still cached.
            play.wall.advance(seconds: 54 * 60)
            _ = await play.driving { await play.client.product(packageName: Harness.package, token: Harness.token) }
            #expect(server.received(path: "/token").count == 1)
            // 56 minutes on: inside the margin: a new exchange before Google would refuse the old token.
            play.wall.advance(seconds: 2 * 60)
            _ = await play.driving { await play.client.product(packageName: Harness.package, token: Harness.token) }
            #expect(server.received(path: "/token").count == 2)
            #expect(server.received(path: productPath).last?.headers["authorization"] == "Bearer access-2")
        }
    }

    @Test("a 401 from the API refreshes the token once and repeats the call once", .timeLimit(.minutes(2)))
    func unauthorisedRefreshesOnce() async throws {
        try await AppleClientsFakeServer.withRunning { server, base in
            let play = try Harness(server: server, baseURL: base)
            server.enqueue("/token", Harness.tokenReply("stale"), Harness.tokenReply("fresh"), Harness.tokenReply("x"))
            let unauthorised = AppleClientsFakeServer.Reply.json(
                #"{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}"#,
                status: 401)
            server.enqueue(subscriptionPath, unauthorised, .json(Harness.subscriptionJSON))
            let outcome = await play.driving {
                await play.client.subscription(packageName: Harness.package, token: Harness.token)
            }
            #expect(outcome.answer?.lineItems.first?.productID == "premium_monthly")
            #expect(server.received(path: "/token").count == 2)
            #expect(
                server.received(path: subscriptionPath).map { $0.headers["authorization"] ?? "" } == [
                    "Bearer stale", "Bearer fresh",
                ])
            // Refused again after the refresh: the credentials are the fault, not the token's age.
            server.enqueue(subscriptionPath, unauthorised, unauthorised)
            let refused = await play.driving {
                await play.client.subscription(packageName: Harness.package, token: Harness.token)
            }
            guard case .configurationRefused(let error) = refused else {
                Issue.record("expected a configuration fault, got \(refused)")
                return
            }
            #expect(error.code == .accessDenied && error.googleStatus == "UNAUTHENTICATED")
            #expect(server.received(path: "/token").count == 3, "one refresh per call, no more")
        }
    }

    @Test(
        "a key Google refuses at the token endpoint is a configuration fault, and no API call is made",
        .timeLimit(.minutes(2)))
    func refusedKeyIsConfigurationFault() async throws {
        try await AppleClientsFakeServer.withRunning { server, base in
            let play = try Harness(server: server, baseURL: base)
            for (status, error) in [(400, "invalid_grant"), (401, "invalid_client")] {
                server.enqueue(
                    "/token",
                    .json(#"{"error":"\#(error)","error_description":"Invalid JWT Signature."}"#, status: status))
                let outcome = await play.driving {
                    await play.client.acknowledge(
                        packageName: Harness.package, productID: "coins_100", token: Harness.token, subscription: false)
                }
                guard case .configurationRefused(let refusal) = outcome else {
                    Issue.record("expected a configuration fault for \(status), got \(outcome)")
                    continue
                }
                #expect(refusal.code == .credentialsRefused && refusal.googleStatus == error)
                #expect(refusal.description.contains("BEGIN") == false && refusal.description.contains("\n") == false)
            }
            #expect(server.received().allSatisfy { $0.path == "/token" })
        }
    }

    @Test(
        "the token exchange goes through the gate: the token endpoint's 429 holds the store's calls, and the call waits its Retry-After and goes on",
        .timeLimit(.minutes(2)))
    func tokenExchangeThroughGate() async throws {
        try await AppleClientsFakeServer.withRunning { server, base in
            let play = try Harness(server: server, baseURL: base)
            server.enqueue("/token", .json(#"{"error":"rate_limited"}"#, status: 429, headers: ["Retry-After": "30"]))
            server.setFallback("/token", Harness.tokenReply())
            server.setFallback(subscriptionPath, .json(Harness.subscriptionJSON))
            let started = play.clock.now
            let outcome = await play.driving {
                await play.client.subscription(packageName: Harness.package, token: Harness.token)
            }
            #expect(outcome.answer != nil, "\(outcome)")
            #expect(started.duration(to: play.clock.now) >= .seconds(30), "the token endpoint's Retry-After held it")
            #expect(server.received(path: "/token").count == 2)
            #expect(server.received(path: subscriptionPath).count == 1)
        }
    }

    @Test(
        "a token endpoint that stays down ends the call retryable at its deadline, never a refusal",
        .timeLimit(.minutes(2)))
    func tokenEndpointDown() async throws {
        try await AppleClientsFakeServer.withRunning { server, base in
            let play = try Harness(server: server, baseURL: base)
            server.setFallback("/token", .json(#"{"error":"unavailable"}"#, status: 503))
            let deadline = play.clock.now.advanced(by: .seconds(5))
            let outcome = await play.driving {
                await play.client.subscription(packageName: Harness.package, token: Harness.token, deadline: deadline)
            }
            guard case .retryable = outcome else {
                Issue.record("expected retryable, got \(outcome)")
                return
            }
            #expect(server.received(path: "/token").count >= 2, "retried within the deadline")
            #expect(server.received(path: subscriptionPath).isEmpty)
        }
    }

    @Test("each call's method, path, body and Authorization follow the API reference", .timeLimit(.minutes(2)))
    func eachCallsRequest() async throws {
        try await AppleClientsFakeServer.withRunning { server, base in
            let play = try Harness(server: server, baseURL: base)
            server.setFallback("/token", Harness.tokenReply())
            let ackProduct = Harness.apiPrefix + "/products/coins_100/tokens/\(Harness.token):acknowledge"
            let consume = Harness.apiPrefix + "/products/coins_100/tokens/\(Harness.token):consume"
            let ackSubscription =
                Harness.apiPrefix + "/subscriptions/premium_monthly/tokens/\(Harness.token):acknowledge"
            for path in [ackProduct, consume, ackSubscription] { server.setFallback(path, .json("")) }
            server.setFallback(productPath, .json(Harness.productJSON))
            let product = await play.driving {
                await play.client.product(packageName: Harness.package, token: Harness.token)
            }
            let read = try #require(product.answer)
            #expect(read.orderID == "GPA.3333-4444-5555-66666" && read.purchaseState == "PURCHASED")
            #expect(read.isTestPurchase && read.obfuscatedExternalAccountID == "acct-hash")
            #expect(read.productLineItems.first?.consumptionState == "CONSUMPTION_STATE_YET_TO_BE_CONSUMED")
            #expect(read.acknowledgementState == "ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED")
            let acknowledged = await play.driving {
                await play.client.acknowledge(
                    packageName: Harness.package, productID: "coins_100", token: Harness.token, subscription: false)
            }
            let consumed = await play.driving {
                await play.client.consume(
                    packageName: Harness.package, productID: "coins_100", token: Harness.token)
            }
            let subscriptionAcknowledged = await play.driving {
                await play.client.acknowledge(
                    packageName: Harness.package, productID: "premium_monthly", token: Harness.token, subscription: true
                )
            }
            #expect(acknowledged.answer != nil && consumed.answer != nil && subscriptionAcknowledged.answer != nil)
            let calls = server.received().filter { $0.path != "/token" }
            #expect(calls.map(\.method) == ["GET", "POST", "POST", "POST"])
            #expect(calls.map(\.path) == [productPath, ackProduct, consume, ackSubscription])
            #expect(calls.allSatisfy { $0.headers["authorization"] == "Bearer access-1" })
            #expect(calls[1].jsonBody?.isEmpty == true && calls[3].jsonBody?.isEmpty == true)
            #expect(calls[2].body.isEmpty)
        }
    }

    @Test("the subscription's fields are read and unknown fields are ignored")
    func subscriptionFields() throws {
        let purchase = try JSONDecoder().decode(
            GooglePlaySubscriptionPurchase.self, from: Data(Harness.subscriptionJSON.utf8))
        #expect(purchase.subscriptionState == "SUBSCRIPTION_STATE_ACTIVE")
        #expect(purchase.linkedPurchaseToken == "older-token" && purchase.isTestPurchase)
        #expect(purchase.obfuscatedExternalAccountID == "acct-hash" && purchase.regionCode == "DE")
        #expect(purchase.acknowledgementState == "ACKNOWLEDGEMENT_STATE_PENDING")
        #expect(purchase.startTime == "2026-11-01T10:00:00.000Z")
        let item = try #require(purchase.lineItems.first)
        #expect(item.expiryTime == "2026-12-01T10:00:00.000Z")
        #expect(item.latestSuccessfulOrderID == "GPA.1234-5678-9012-34567")
        #expect(item.autoRenewing && item.autoRenewEnabled == true)
    }

    @Test("every status has one clear outcome: 400, 403, 404, 410, 418, a garbage body", .timeLimit(.minutes(2)))
    func statusOutcomes() async throws {
        try await AppleClientsFakeServer.withRunning { server, base in
            let play = try Harness(server: server, baseURL: base)
            server.setFallback("/token", Harness.tokenReply())
            let envelope = { (code: Int, status: String) in
                AppleClientsFakeServer.Reply.json(
                    #"{"error":{"code":\#(code),"message":"m","status":"\#(status)","errors":[]}}"#, status: code)
            }
            server.enqueue(
                productPath, envelope(400, "INVALID_ARGUMENT"), envelope(403, "PERMISSION_DENIED"),
                envelope(404, "NOT_FOUND"), envelope(410, "NOT_FOUND"), envelope(418, "TEAPOT"),
                .json("<html>not json</html>"), .json(#"{"productLineItem":"not an array"}"#))
            var outcomes: [String] = []
            for _ in 0..<7 {
                let outcome = await play.driving {
                    await play.client.product(packageName: Harness.package, token: Harness.token)
                }
                switch outcome {
                case .rejected(let error): outcomes.append("rejected \(error.googleStatus ?? "")")
                case .configurationRefused(let error): outcomes.append("configuration \(error.code.rawValue)")
                case .purchaseNotFound(let status): outcomes.append("not found \(status)")
                case .failed(let error): outcomes.append("failed \(error.code.rawValue)")
                case .answered: outcomes.append("answered")
                case .retryable(let advice): outcomes.append("retryable \(advice)")
                }
            }
            #expect(
                outcomes == [
                    "rejected INVALID_ARGUMENT", "configuration access denied", "not found 404", "not found 410",
                    "failed unexpected HTTP status", "failed malformed response", "failed malformed response",
                ])
        }
    }

    @Test("a 5xx is retried through the gate and the retry succeeds", .timeLimit(.minutes(2)))
    func serverErrorRetried() async throws {
        try await AppleClientsFakeServer.withRunning { server, base in
            let play = try Harness(server: server, baseURL: base)
            server.setFallback("/token", Harness.tokenReply())
            server.enqueue(subscriptionPath, .json("{}", status: 500), .json(Harness.subscriptionJSON))
            let outcome = await play.driving {
                await play.client.subscription(packageName: Harness.package, token: Harness.token)
            }
            #expect(outcome.answer != nil)
            #expect(server.received(path: subscriptionPath).count == 2)
            // Retries stop at the policy's attempts: three 503s are a retryable outcome, not a crash or a grant.
            server.enqueue(
                subscriptionPath, .json("{}", status: 503), .json("{}", status: 503), .json("{}", status: 503))
            let exhausted = await play.driving {
                await play.client.subscription(packageName: Harness.package, token: Harness.token)
            }
            guard case .retryable(let advice) = exhausted else {
                Issue.record("expected retryable, got \(exhausted)")
                return
            }
            #expect(advice.reason == .httpStatus(503))
        }
    }

    @Test("a 429's Retry-After holds the gate's calls until it passes", .timeLimit(.minutes(2)))
    func retryAfterHonoured() async throws {
        try await AppleClientsFakeServer.withRunning { server, base in
            let play = try Harness(server: server, baseURL: base)
            server.setFallback("/token", Harness.tokenReply())
            server.enqueue(
                productPath,
                .json(
                    #"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED"}}"#, status: 429,
                    headers: ["Retry-After": "7"]),
                .json(Harness.productJSON))
            let start = play.clock.now
            let outcome = await play.driving {
                await play.client.product(packageName: Harness.package, token: Harness.token)
            }
            #expect(outcome.answer != nil)
            #expect(start.duration(to: play.clock.now) >= .seconds(7), "the retry waited for Retry-After")
            #expect(server.received(path: productPath).count == 2)
        }
    }

    @Test("a call that times out is a retryable timeout", .timeLimit(.minutes(2)))
    func timeout() async throws {
        try await AppleClientsFakeServer.withRunning { server, base in
            let play = try Harness(
                server: server, baseURL: base, retryPolicy: RetryPolicy(maximumAttempts: 1),
                requestTimeout: .milliseconds(200))
            server.setFallback("/token", Harness.tokenReply())
            var slow = AppleClientsFakeServer.Reply.json(Harness.productJSON)
            slow.delay = .seconds(5)
            server.enqueue(productPath, slow)
            let outcome = await play.driving {
                await play.client.product(packageName: Harness.package, token: Harness.token)
            }
            guard case .retryable(let advice) = outcome else {
                Issue.record("expected retryable, got \(outcome)")
                return
            }
            #expect(advice.reason == .transport(.timeout))
        }
    }

    @Test("past the quota budget the gate refuses without calling Google", .timeLimit(.minutes(2)))
    func quotaBudgetRefuses() async throws {
        try await AppleClientsFakeServer.withRunning { server, base in
            let play = try Harness(server: server, baseURL: base, gateConfiguration: .googlePlay(dailyQuota: 1))
            server.setFallback("/token", Harness.tokenReply())
            server.setFallback(productPath, .json(Harness.productJSON))
            let deadline = play.clock.now.advanced(by: .seconds(30))
            let first = await play.driving {
                await play.client.product(packageName: Harness.package, token: Harness.token, deadline: deadline)
            }
            let second = await play.driving {
                await play.client.product(packageName: Harness.package, token: Harness.token, deadline: deadline)
            }
            #expect(first.answer != nil)
            guard case .retryable(let advice) = second else {
                Issue.record("expected a refusal, got \(second)")
                return
            }
            #expect(advice.reason == .gate("quota_exhausted"))
            #expect(server.received(path: productPath).count == 1)
        }
    }

    @Test("a file that is not a service-account key is one clear line without its secret")
    func serviceAccountFileErrors() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("play-sa-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let cases: [(String, String)] = [
            ("not json at all: SECRET-1", "is not a JSON object"),
            (#"{"type":"authorized_user","client_secret":"SECRET-2"}"#, "is not a service-account key"),
            (
                #"{"type":"service_account","client_email":"a@b","private_key_id":"k","private_key":"SECRET-3"}"#,
                "private_key is not an RSA private key"
            ),
            (#"{"type":"service_account","private_key":"SECRET-4"}"#, "has no client_email"),
        ]
        for (index, (text, expected)) in cases.enumerated() {
            let path = directory.appendingPathComponent("key-\(index).json").path
            #expect(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)))
            #expect(throws: GooglePlayServiceAccountError.self) { try GooglePlayServiceAccount(contentsOfFile: path) }
            do {
                _ = try GooglePlayServiceAccount(contentsOfFile: path)
            } catch {
                #expect(error.description.contains(expected), "\(error)")
                #expect(error.description.contains("SECRET") == false && error.description.contains("\n") == false)
            }
        }
        let missing = directory.appendingPathComponent("absent.json").path
        #expect(throws: GooglePlayServiceAccountError.self) { try GooglePlayServiceAccount(contentsOfFile: missing) }
        // Google's own shape reads.
        let good =
            #"{"type":"service_account","client_email":"v@p.iam.gserviceaccount.com","private_key_id":"k1","#
            + #""private_key":\#(String(data: try JSONEncoder().encode(PlayHarness.key.pemRepresentation), encoding: .utf8)!),"#
            + #""token_uri":"https://oauth2.googleapis.com/token"}"#
        let account = try GooglePlayServiceAccount(json: Data(good.utf8))
        #expect(account.clientEmail == "v@p.iam.gserviceaccount.com" && account.privateKeyID == "k1")
        #expect(account.description.contains("PRIVATE KEY") == false)
    }

    private static func base64URL(_ text: String) -> Data {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64) ?? Data()
    }
}
