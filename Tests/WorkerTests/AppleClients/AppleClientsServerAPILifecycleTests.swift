import Crypto
import Foundation
import Messages
import Testing

@testable import AppleClients
@testable import StoreHTTP

/// The endpoints after a grant against the scripted fake server: request shape (method, path,
/// body, bearer token), answer parsing, 429 with Retry-After, the 4040010 sandbox fallback, malformed answers.
@Suite("Apple clients: App Store Server API after a grant", .serialized, .timeLimit(.minutes(2)))
struct AppleClientsServerAPILifecycleTests {
    struct Harness {
        let server: AppleClientsFakeServer
        let client: AppStoreServerAPIClient
        let signer: AppStoreTokenSigner
        let clock: AppleClientsManualClock

        var production: [AppleClientsFakeServer.Received] {
            server.received().filter { !$0.path.hasPrefix("/sandbox") }
        }
        var sandbox: [AppleClientsFakeServer.Received] { server.received().filter { $0.path.hasPrefix("/sandbox") } }

        func expectBearer(_ request: AppleClientsFakeServer.Received?) throws {
            #expect(request?.headers["authorization"] == "Bearer " + (try signer.token()))
        }
    }

    static let notFound = AppleClientsFakeServer.Reply.json(
        #"{"errorCode":4040010,"errorMessage":"Transaction id not found."}"#, status: 404)

    private func withHarness(_ body: (Harness) async throws -> Void) async throws {
        let server = AppleClientsFakeServer()
        let port = try await server.start()
        let clock = AppleClientsManualClock()
        let key = try AppStoreConnectKey(
            keyID: "KEY123", issuerID: "issuer-uuid", bundleID: "com.example",
            privateKeyPEM: P256.Signing.PrivateKey().pemRepresentation)
        let signer = AppStoreTokenSigner(key: key, now: { clock.now })
        let base = "http://127.0.0.1:\(port)"
        let client = AppStoreServerAPIClient(
            transport: try CurlHTTPEngine(),
            configuration: AppStoreServerAPIConfiguration(productionBaseURL: base, sandboxBaseURL: base + "/sandbox"),
            signer: signer, verifier: AppleClientsFakeVerifier(), logger: AppleClientsLogCapture().logger,
            now: { clock.now })
        defer { server.retire() }
        try await body(Harness(server: server, client: client, signer: signer, clock: clock))
    }

    @Test("The default base URLs are Apple's domains since 2026-05-05")
    func defaultBaseURLs() {
        let configuration = AppStoreServerAPIConfiguration()
        #expect(configuration.productionBaseURL == "https://api.storekit.apple.com")
        #expect(configuration.sandboxBaseURL == "https://api.storekit-sandbox.apple.com")
    }

    @Test("Get Notification History: POST with the query as JSON, pages by paginationToken, payloads verified")
    func notificationHistory() async throws {
        try await withHarness { harness in
            let one = AppleClientsFakeVerifier.jws(#"{"notificationType":"REFUND"}"#)
            let two = AppleClientsFakeVerifier.jws(#"{"notificationType":"DID_RENEW"}"#)
            harness.server.enqueue(
                "/inApps/v1/notifications/history",
                .json(
                    #"{"hasMore":true,"paginationToken":"page-2","notificationHistory":[{"signedPayload":"\#(one)","sendAttempts":[{"attemptDate":1698148900000,"sendAttemptResult":"NO_RESPONSE"}]}]}"#
                ),
                .json(#"{"hasMore":false,"notificationHistory":[{"signedPayload":"\#(two)"}]}"#))
            let query = NotificationHistoryQuery(
                startDate: Date(timeIntervalSince1970: 1_698_000_000),
                endDate: Date(timeIntervalSince1970: 1_698_100_000),
                onlyFailures: true, transactionID: "2000000000")
            let first = try #require(
                try await harness.client.notificationHistory(query, environment: .production).answer)
            #expect(first.notifications.map(\.signedPayload) == [one])
            #expect(first.notifications[0].sendAttempts.first?.result == "NO_RESPONSE")
            #expect(
                first.notifications[0].sendAttempts.first?.attemptDate == Date(timeIntervalSince1970: 1_698_148_900))
            #expect(first.hasMore && first.paginationToken == "page-2")
            let second = try #require(
                try await harness.client.notificationHistory(
                    query, paginationToken: first.paginationToken, environment: .production
                ).answer)
            #expect(second.notifications.map(\.signedPayload) == [two])
            #expect(!second.hasMore)

            let requests = harness.server.received(path: "/inApps/v1/notifications/history")
            #expect(requests.map(\.method) == ["POST", "POST"])
            #expect(requests.map(\.query) == ["", "paginationToken=page-2"])
            #expect(requests[0].headers["content-type"] == "application/json")
            let body = try #require(requests[0].jsonBody)
            #expect((body["startDate"] as? NSNumber)?.int64Value == 1_698_000_000_000)
            #expect((body["endDate"] as? NSNumber)?.int64Value == 1_698_100_000_000)
            #expect(body["onlyFailures"] as? Bool == true)
            #expect(body["transactionId"] as? String == "2000000000")
            #expect(body["notificationType"] == nil)
            try harness.expectBearer(requests.first)
        }
    }

    @Test("Get Notification History asks only the environment it is given, and rejects malformed pages")
    func notificationHistoryMalformed() async throws {
        try await withHarness { harness in
            let forged = AppleClientsFakeVerifier.jws("{}", signature: "forged")
            harness.server.enqueue(
                "/sandbox/inApps/v1/notifications/history",
                .json(#"{"notificationHistory":{}}"#),
                .json(#"{"hasMore":true,"notificationHistory":[]}"#),
                .json(#"{"notificationHistory":[{"signedPayload":"\#(forged)"}]}"#),
                .json(#"{"notificationHistory":[{"sendAttempts":[]}]}"#),
                .init(status: 200, body: Array("not json".utf8)))
            let query = NotificationHistoryQuery(startDate: Date(timeIntervalSince1970: 0), endDate: Date())
            var codes: [AppleClientError.Code] = []
            for _ in 0..<5 {
                guard
                    case .failed(let error) = try await harness.client.notificationHistory(query, environment: .sandbox)
                else {
                    Issue.record("a malformed page was accepted")
                    continue
                }
                codes.append(error.code)
            }
            #expect(
                codes == [
                    .malformedResponse, .malformedResponse, .signatureInvalid, .malformedResponse, .malformedResponse,
                ])
            #expect(harness.production.isEmpty)
        }
    }

    @Test("Get Refund History: GET v2 by revision, with the sandbox fallback")
    func refundHistory() async throws {
        try await withHarness { harness in
            let refunded = AppleClientsFakeVerifier.jws(
                #"{"transactionId":"555","revocationDate":1698148900000,"revocationReason":0}"#)
            harness.server.enqueue("/inApps/v2/refund/lookup/555", Self.notFound)
            harness.server.enqueue(
                "/sandbox/inApps/v2/refund/lookup/555",
                .json(#"{"signedTransactions":["\#(refunded)"],"revision":"r2","hasMore":true}"#))
            let page = try #require(try await harness.client.refundHistory(transactionID: "555").answer)
            #expect(page.answeredBy == .sandbox)
            #expect(page.transactions.map(\.transactionID) == ["555"])
            #expect(page.transactions[0].revocationDate == Date(timeIntervalSince1970: 1_698_148_900))
            #expect(page.revision == "r2" && page.hasMore)
            #expect(harness.production.map(\.method) == ["GET"])
            #expect(harness.sandbox.map(\.method) == ["GET"])

            harness.server.enqueue("/sandbox/inApps/v2/refund/lookup/555", .json(#"{"signedTransactions":"x"}"#))
            guard
                case .failed(let error) = try await harness.client.refundHistory(
                    transactionID: "555", revision: "r2", environment: .sandbox)
            else {
                Issue.record("a malformed refund page was accepted")
                return
            }
            #expect(error.code == .malformedResponse)
            #expect(harness.sandbox.last?.query == "revision=r2")
        }
    }

    @Test("Send Consumption Information V2: PUT with the V2 body, 202 without a body is an acknowledgement")
    func consumptionInformation() async throws {
        try await withHarness { harness in
            harness.server.enqueue("/inApps/v2/transactions/consumption/777", .init(status: 202))
            let information = ConsumptionInformation(
                customerConsented: true, deliveryStatus: .undeliveredServerOutage, sampleContentProvided: false,
                refundPreference: .grantProrated, consumptionPercentage: 25_000)
            let answer = try #require(
                try await harness.client.sendConsumptionInformation(transactionID: "777", information).answer)
            #expect(answer.answeredBy == .production)
            let request = try #require(harness.server.received(path: "/inApps/v2/transactions/consumption/777").first)
            #expect(request.method == "PUT")
            #expect(request.headers["content-type"] == "application/json")
            try harness.expectBearer(request)
            let body = try #require(request.jsonBody)
            #expect(body["customerConsented"] as? Bool == true)
            #expect(body["deliveryStatus"] as? String == "UNDELIVERED_SERVER_OUTAGE")
            #expect(body["sampleContentProvided"] as? Bool == false)
            #expect(body["refundPreference"] as? String == "GRANT_PRORATED")
            #expect((body["consumptionPercentage"] as? NSNumber)?.intValue == 25_000)

            // Optional fields are left out, not sent as null.
            harness.server.enqueue("/inApps/v2/transactions/consumption/778", .init(status: 202))
            _ = try await harness.client.sendConsumptionInformation(
                transactionID: "778",
                ConsumptionInformation(customerConsented: true, deliveryStatus: .delivered, sampleContentProvided: true)
            )
            let minimal = try #require(
                harness.server.received(path: "/inApps/v2/transactions/consumption/778").first?.jsonBody)
            #expect(Set(minimal.keys) == ["customerConsented", "deliveryStatus", "sampleContentProvided"])
        }
    }

    @Test("Finish Transaction: POST, 4040010 falls back to sandbox, a pinned environment does not")
    func finishTransaction() async throws {
        try await withHarness { harness in
            harness.server.enqueue("/inApps/v1/transactions/900/finish", Self.notFound)
            harness.server.enqueue("/sandbox/inApps/v1/transactions/900/finish", .init(status: 200))
            let answer = try #require(try await harness.client.finishTransaction(transactionID: "900").answer)
            #expect(answer.answeredBy == .sandbox)
            #expect(harness.production.map(\.method) == ["POST"])
            #expect(harness.sandbox.map(\.method) == ["POST"])
            try harness.expectBearer(harness.sandbox.first)

            harness.server.enqueue("/inApps/v1/transactions/901/finish", Self.notFound)
            guard
                case .failed(let error) = try await harness.client.finishTransaction(
                    transactionID: "901", environment: .production)
            else {
                Issue.record("a pinned call fell back")
                return
            }
            #expect(error.appleErrorCode == 4_040_010)
            #expect(harness.sandbox.count == 1)
        }
    }

    @Test("429 with Retry-After is retryable on every endpoint, and never falls back to sandbox")
    func rateLimited() async throws {
        try await withHarness { harness in
            let retryAt = Int64(harness.clock.now.timeIntervalSince1970 * 1000) + 2000
            let limited = AppleClientsFakeServer.Reply.json(
                #"{"errorCode":4290000,"errorMessage":"Rate limit exceeded."}"#, status: 429,
                headers: ["Retry-After": "\(retryAt)"])
            for path in [
                "/inApps/v1/transactions/42/finish", "/inApps/v2/transactions/consumption/42",
                "/inApps/v1/transactions/42/appAccountToken", "/inApps/v1/transactions/appTransactions/42",
                "/inApps/v2/refund/lookup/42", "/inApps/v1/notifications/history", "/inApps/v1/notifications/test",
                "/inApps/v1/notifications/test/abc-1_2",
            ] {
                harness.server.enqueue(path, limited)
            }
            let client = harness.client
            let query = NotificationHistoryQuery(startDate: Date(timeIntervalSince1970: 0), endDate: Date())
            let information = ConsumptionInformation(
                customerConsented: true, deliveryStatus: .delivered, sampleContentProvided: false)
            let advices: [AppleRetryAdvice?] = [
                try await client.finishTransaction(transactionID: "42").retryAdvice,
                try await client.sendConsumptionInformation(transactionID: "42", information).retryAdvice,
                try await client.setAppAccountToken(originalTransactionID: "42", token: UUID()).retryAdvice,
                try await client.appTransactionInfo(transactionID: "42").retryAdvice,
                try await client.refundHistory(transactionID: "42").retryAdvice,
                try await client.notificationHistory(query, environment: .production).retryAdvice,
                try await client.requestTestNotification(environment: .production).retryAdvice,
                try await client.testNotificationStatus(token: "abc-1_2", environment: .production).retryAdvice,
            ]
            for advice in advices {
                #expect(advice?.reason == .httpStatus(429))
                #expect(advice?.retryAfter == .seconds(2))
            }
            #expect(harness.sandbox.isEmpty)
        }
    }

    @Test("Set App Account Token: PUT on the original transaction with the token in lower case")
    func appAccountToken() async throws {
        try await withHarness { harness in
            let token = try #require(UUID(uuidString: "7E3FB20B-4CDB-47CC-936D-99D65F608138"))
            harness.server.enqueue("/inApps/v1/transactions/1000/appAccountToken", .init(status: 200))
            #expect(
                try await harness.client.setAppAccountToken(originalTransactionID: "1000", token: token).answer != nil)
            let request = try #require(
                harness.server.received(path: "/inApps/v1/transactions/1000/appAccountToken").first)
            #expect(request.method == "PUT")
            #expect(request.jsonBody?["appAccountToken"] as? String == "7e3fb20b-4cdb-47cc-936d-99d65f608138")
            try harness.expectBearer(request)

            harness.server.enqueue(
                "/inApps/v1/transactions/1001/appAccountToken",
                .json(#"{"errorCode":4000183,"errorMessage":"Invalid app account token."}"#, status: 400))
            guard
                case .failed(let error) = try await harness.client.setAppAccountToken(
                    originalTransactionID: "1001", token: token)
            else {
                Issue.record("a refused token was accepted")
                return
            }
            #expect(error.appleErrorCode == 4_000_183)
            #expect(harness.sandbox.isEmpty)
        }
    }

    @Test("Get App Transaction Info: GET, the signed app transaction is verified and decoded")
    func appTransactionInfo() async throws {
        try await withHarness { harness in
            let signed = AppleClientsFakeVerifier.jws(
                #"{"appTransactionId":"704","bundleId":"com.example","appAppleId":1234,"applicationVersion":"2.1","originalApplicationVersion":"1.0","originalPurchaseDate":1698148900000,"originalPlatform":"iOS","receiptType":"Sandbox"}"#
            )
            harness.server.enqueue(
                "/inApps/v1/transactions/appTransactions/704", .json(#"{"signedAppTransactionInfo":"\#(signed)"}"#),
                .json(#"{"other":1}"#))
            let info = try #require(try await harness.client.appTransactionInfo(transactionID: "704").answer)
            #expect(info.appTransactionID == "704")
            #expect(info.appAppleID == 1234)
            #expect(info.originalApplicationVersion == "1.0")
            #expect(info.originalPlatform == "iOS")
            #expect(info.environment == .sandbox)
            #expect(info.answeredBy == .production)
            #expect(harness.production.first?.method == "GET")
            guard case .failed(let error) = try await harness.client.appTransactionInfo(transactionID: "704") else {
                Issue.record("an answer without the signed app transaction was accepted")
                return
            }
            #expect(error.code == .malformedResponse)
        }
    }

    @Test("Test notifications: POST to request one, GET its status by token; bad tokens never leave the process")
    func testNotifications() async throws {
        try await withHarness { harness in
            let token = "ce3af791-365e-4c60-841b-1674b43c1609_1698148900000"
            let payload = AppleClientsFakeVerifier.jws(#"{"notificationType":"TEST"}"#)
            harness.server.enqueue(
                "/sandbox/inApps/v1/notifications/test", .json(#"{"testNotificationToken":"\#(token)"}"#),
                .json(#"{"testNotificationToken":"../x"}"#))
            harness.server.enqueue(
                "/sandbox/inApps/v1/notifications/test/\(token)",
                .json(
                    #"{"signedPayload":"\#(payload)","sendAttempts":[{"attemptDate":1698148950000,"sendAttemptResult":"SUCCESS"}]}"#
                ),
                .json(#"{"signedPayload":"\#(payload)","firstSendAttemptResult":"TIMED_OUT"}"#))
            let received = try #require(try await harness.client.requestTestNotification(environment: .sandbox).answer)
            #expect(received == token)
            #expect(harness.sandbox.first?.method == "POST")
            let status = try #require(
                try await harness.client.testNotificationStatus(token: received, environment: .sandbox).answer)
            #expect(status.signedPayload == payload)
            #expect(status.sendAttempts.map(\.result) == ["SUCCESS"])
            let older = try #require(
                try await harness.client.testNotificationStatus(token: received, environment: .sandbox).answer)
            #expect(older.sendAttempts.map(\.result) == ["TIMED_OUT"])
            #expect(try await harness.client.requestTestNotification(environment: .sandbox).answer == nil)
            let sentBefore = harness.server.received().count
            #expect(
                try await harness.client.testNotificationStatus(token: "../../etc", environment: .sandbox).answer == nil
            )
            #expect(try await harness.client.finishTransaction(transactionID: "1/../2").answer == nil)
            #expect(harness.server.received().count == sentBefore)
            #expect(harness.production.isEmpty)
        }
    }
}

extension AppleOutcome {
    /// The advice of a retryable outcome (tests).
    fileprivate var retryAdvice: AppleRetryAdvice? {
        if case .retryable(let advice) = self { return advice }
        return nil
    }
}
