import Foundation
import RateLimiter
import StoreHTTP
import Synchronization
import Testing
import _CryptoExtras

@testable import GooglePlayClients

/// `purchases.voidedpurchases.list` against a scripted server: token pagination, the records as Google writes them,
/// the window clamped to what Google accepts (never older than 30 days, never in the future), and each error as the
/// reads handle it (429 with Retry-After and 5xx retried through the gate, 400 and 403 not).
@Suite("Google Play clients: the voided purchases list", .timeLimit(.minutes(2)))
struct GooglePlayVoidedPurchasesClientTests {
    static let key = try! _RSA.Signing.PrivateKey(keySize: .bits2048)
    static let package = "com.example.play"
    static let path = "/androidpublisher/v3/applications/com.example.play/purchases/voidedpurchases"

    struct Client {
        let clock = ManualClock()
        let client: GooglePlayAPIClient<ManualClock>

        init(base: String) throws {
            let engine = try CurlHTTPEngine()
            let account = try GooglePlayServiceAccount(
                clientEmail: "verifier@example.iam.gserviceaccount.com", privateKeyID: "key-1",
                privateKeyPEM: GooglePlayVoidedPurchasesClientTests.key.pemRepresentation)
            let gate = AppleCallGate(configuration: .googlePlay(), clock: clock, metrics: NoRateLimiterMetrics())
            let clock = self.clock
            let tokens = GooglePlayAccessTokens(
                account: account, tokenURL: base + "/token", transport: engine,
                now: { Date(timeIntervalSince1970: Double(clock.unixMillisecondsNow) / 1000) },
                admission: GooglePlayAccessTokens.admission(through: gate))
            client = GooglePlayAPIClient(
                configuration: GooglePlayAPIConfiguration(baseURL: base, tokenURL: base + "/token"),
                transport: engine, tokens: tokens, gate: gate, clock: clock,
                retryPolicy: RetryPolicy(base: .milliseconds(100), maximumBackoff: .seconds(1), maximumAttempts: 3),
                randomSeed: 7)
        }

        var now: Date { Date(timeIntervalSince1970: Double(clock.unixMillisecondsNow) / 1000) }

        /// One call, the manual clock moved to each sleeper's deadline until it returns.
        func list(
            _ query: GooglePlayVoidedPurchasesQuery
        ) async -> GooglePlayOutcome<GooglePlayVoidedPurchasesPage> {
            let client = self.client
            let task = Task { await client.voidedPurchases(query) }
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
    }

    static func parameters(_ query: String) -> [String: String] {
        Dictionary(
            query.split(separator: "&").map { pair -> (String, String) in
                let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
                return (parts[0], parts.count > 1 ? parts[1] : "")
            }, uniquingKeysWith: { _, last in last })
    }

    static let tokenReply = AppleClientsFakeServer.Reply.json(
        #"{"access_token":"access-1","expires_in":3600,"token_type":"Bearer"}"#)

    @Test("two pages by token: type=1, maxResults, the next token sent, every field of each record read")
    func pagination() async throws {
        try await AppleClientsFakeServer.withRunning { server, base in
            let play = try Client(base: base)
            server.setFallback("/token", Self.tokenReply)
            server.enqueue(
                Self.path,
                .json(
                    #"""
                    {"voidedPurchases":[{"kind":"androidpublisher#voidedPurchase","purchaseToken":"tok-1",
                      "orderId":"GPA.1111-2222-3333-44444","purchaseTimeMillis":"1767000000000",
                      "voidedTimeMillis":"1767100000000","voidedSource":2,"voidedReason":7},
                     {"purchaseToken":"tok-2","orderId":"GPA.5555-6666-7777-88888..1","voidedQuantity":2,
                      "voidedTimeMillis":"not a number","somethingNew":true}],
                     "pageInfo":{"totalResults":3,"resultPerPage":2},"tokenPagination":{"nextPageToken":"page/2+"}}
                    """#),
                .json(#"{"voidedPurchases":[{"purchaseToken":"tok-3","orderId":"GPA.9"}],"tokenPagination":{}}"#))
            let start = play.now.addingTimeInterval(-3_600)
            var query = GooglePlayVoidedPurchasesQuery(
                packageName: Self.package, startTime: start, endTime: play.now, maxResults: 2)
            let first = try #require(await play.list(query).answer)
            #expect(first.nextPageToken == "page/2+")
            #expect(
                first.voidedPurchases[0]
                    == GooglePlayVoidedPurchase(
                        orderID: "GPA.1111-2222-3333-44444", purchaseToken: "tok-1",
                        purchaseTimeMillis: 1_767_000_000_000, voidedTimeMillis: 1_767_100_000_000, voidedSource: 2,
                        voidedReason: 7))
            #expect(first.voidedPurchases[1].voidedQuantity == 2 && first.voidedPurchases[1].voidedTimeMillis == nil)
            query.pageToken = first.nextPageToken
            let second = try #require(await play.list(query).answer)
            #expect(second.voidedPurchases.map(\.orderID) == ["GPA.9"] && second.nextPageToken == nil)

            let calls = server.received(path: Self.path)
            #expect(calls.count == 2, "one call per page")
            let one = Self.parameters(calls[0].query)
            #expect(one["type"] == "1" && one["maxResults"] == "2" && one["token"] == nil)
            #expect(one["startTime"] == String(Int64(start.timeIntervalSince1970 * 1000)))
            #expect(calls[0].method == "GET" && calls[0].headers["authorization"] == "Bearer access-1")
            #expect(Self.parameters(calls[1].query)["token"] == "page%2F2%2B")
        }
    }

    @Test("a start older than 30 days and an end in the future are never sent: clamped to Google's window")
    func thirtyDayEdge() async throws {
        try await AppleClientsFakeServer.withRunning { server, base in
            let play = try Client(base: base)
            server.setFallback("/token", Self.tokenReply)
            server.setFallback(Self.path, .json(#"{"voidedPurchases":[]}"#))
            let now = play.now
            let query = GooglePlayVoidedPurchasesQuery(
                packageName: Self.package, startTime: now.addingTimeInterval(-45 * 86_400),
                endTime: now.addingTimeInterval(3_600))
            #expect(await play.list(query).answer != nil)
            let sent = Self.parameters(try #require(server.received(path: Self.path).first).query)
            let nowMillis = play.clock.unixMillisecondsNow
            let startMillis = try #require(sent["startTime"].flatMap { Int64($0) })
            let endMillis = try #require(sent["endTime"].flatMap { Int64($0) })
            #expect(startMillis > nowMillis - 30 * 86_400_000, "never older than Google's 30 days")
            #expect(startMillis <= nowMillis - 29 * 86_400_000, "yet as far back as allowed")
            #expect(endMillis <= nowMillis && endMillis > nowMillis - 60_000, "never in the future")
            #expect(sent["maxResults"] == "1000")
        }
    }

    @Test("429 with Retry-After and 5xx retried through the gate; 400, 403 and a garbage body are not")
    func errors() async throws {
        try await AppleClientsFakeServer.withRunning { server, base in
            let play = try Client(base: base)
            server.setFallback("/token", Self.tokenReply)
            let query = GooglePlayVoidedPurchasesQuery(
                packageName: Self.package, startTime: play.now.addingTimeInterval(-600), endTime: play.now)
            server.enqueue(
                Self.path,
                .json(
                    #"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED"}}"#, status: 429, headers: ["Retry-After": "7"]
                ),
                .json("{}", status: 502), .json(#"{"voidedPurchases":[]}"#))
            let started = play.clock.now
            #expect(await play.list(query).answer != nil)
            #expect(server.received(path: Self.path).count == 3)
            #expect(started.duration(to: play.clock.now) >= .seconds(7), "Retry-After waited for")

            server.enqueue(Self.path, .json("{}", status: 503), .json("{}", status: 503), .json("{}", status: 503))
            guard case .retryable(let advice) = await play.list(query) else {
                Issue.record("three 503s: expected a retryable outcome")
                return
            }
            #expect(advice.reason == .httpStatus(503))

            let envelope = { (code: Int, status: String) in
                AppleClientsFakeServer.Reply.json(
                    #"{"error":{"code":\#(code),"message":"m","status":"\#(status)"}}"#, status: code)
            }
            server.enqueue(
                Self.path, envelope(400, "INVALID_ARGUMENT"), envelope(403, "PERMISSION_DENIED"),
                .json("<html>not json</html>"))
            var outcomes: [String] = []
            for _ in 0..<3 {
                switch await play.list(query) {
                case .rejected(let error): outcomes.append("rejected \(error.googleStatus ?? "")")
                case .configurationRefused(let error): outcomes.append("configuration \(error.code.rawValue)")
                case .failed(let error): outcomes.append("failed \(error.code.rawValue)")
                case let other: outcomes.append("\(other)")
                }
            }
            #expect(
                outcomes == ["rejected INVALID_ARGUMENT", "configuration access denied", "failed malformed response"])
        }
    }
}
