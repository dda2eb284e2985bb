import Crypto
import Decision
import Foundation
import Messages
import Synchronization
import Testing
import Traffic

@testable import AppleClients
@testable import StoreHTTP

/// A stand-in for the Receipts verifier: accepts `header.payload.signature` unless the signature is `forged`,
/// and returns the payload. (The real chain check lives in Receipts and is tested there.)
struct AppleClientsFakeVerifier: SignedPayloadVerifier {
    struct Rejected: Error, CustomStringConvertible {
        var description: String { "signature rejected" }
    }

    func verifiedPayload(of jws: String) async throws -> [UInt8] {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[2] != "forged", let payload = Base64URL.decode(parts[1]) else { throw Rejected() }
        return Array(payload)
    }

    /// A JWS-shaped string around `payload` (unsigned: only this fake accepts it).
    static func jws(_ payload: String, signature: String = "c2ln") -> String {
        Base64URL.encode(Data(#"{"alg":"ES256"}"#.utf8)) + "." + Base64URL.encode(Data(payload.utf8)) + "." + signature
    }
}

/// A wall clock the test moves by hand.
final class AppleClientsManualClock: Sendable {
    private let current = Mutex(Date(timeIntervalSince1970: 1_700_000_000))
    var now: Date { current.withLock { $0 } }
    func advance(by seconds: TimeInterval) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }
}

@Suite("Apple clients: App Store Server API", .serialized, .timeLimit(.minutes(2)))
struct AppleClientsServerAPITests {
    static let transactionPayload =
        #"{"transactionId":"23456","originalTransactionId":"12345","bundleId":"com.example","productId":"com.example.product","purchaseDate":1698148900000,"expiresDate":1698149000000,"quantity":1,"type":"Auto-Renewable Subscription","environment":"Sandbox","isUpgraded":true,"revocationReason":1}"#

    struct Harness {
        let server: AppleClientsFakeServer
        let client: AppStoreServerAPIClient
        let signer: AppStoreTokenSigner
        let clock: AppleClientsManualClock
        let publicKey: P256.Signing.PublicKey

        var production: [AppleClientsFakeServer.Received] {
            server.received().filter { !$0.path.hasPrefix("/sandbox") }
        }
        var sandbox: [AppleClientsFakeServer.Received] { server.received().filter { $0.path.hasPrefix("/sandbox") } }
    }

    private func withHarness(_ body: (Harness) async throws -> Void) async throws {
        let server = AppleClientsFakeServer()
        let port = try await server.start()
        let clock = AppleClientsManualClock()
        let privateKey = P256.Signing.PrivateKey()
        let key = try AppStoreConnectKey(
            keyID: "KEY123", issuerID: "issuer-uuid", bundleID: "com.example",
            privateKeyPEM: privateKey.pemRepresentation)
        let signer = AppStoreTokenSigner(key: key, now: { clock.now })
        let base = "http://127.0.0.1:\(port)"
        let client = AppStoreServerAPIClient(
            transport: try CurlHTTPEngine(),
            configuration: AppStoreServerAPIConfiguration(productionBaseURL: base, sandboxBaseURL: base + "/sandbox"),
            signer: signer, verifier: AppleClientsFakeVerifier(), logger: AppleClientsLogCapture().logger,
            now: { clock.now })
        do {
            try await body(
                Harness(server: server, client: client, signer: signer, clock: clock, publicKey: privateKey.publicKey))
        } catch {
            server.retire()
            throw error
        }
        server.retire()
    }

    @Test("The bearer token is an ES256 JWT with Apple's claims, reused until near expiry")
    func bearerToken() async throws {
        try await withHarness { harness in
            let token = try harness.signer.token()
            let parts = token.split(separator: ".").map(String.init)
            try #require(parts.count == 3)
            let header =
                try JSONSerialization.jsonObject(with: try #require(Base64URL.decode(parts[0]))) as? [String: Any]
            let claims =
                try JSONSerialization.jsonObject(with: try #require(Base64URL.decode(parts[1]))) as? [String: Any]
            #expect(header?["alg"] as? String == "ES256")
            #expect(header?["kid"] as? String == "KEY123")
            #expect(header?["typ"] as? String == "JWT")
            #expect(claims?["iss"] as? String == "issuer-uuid")
            #expect(claims?["aud"] as? String == "appstoreconnect-v1")
            #expect(claims?["bid"] as? String == "com.example")
            #expect((claims?["iat"] as? NSNumber)?.int64Value == 1_700_000_000)
            #expect((claims?["exp"] as? NSNumber)?.int64Value == 1_700_000_300)
            let signature = try P256.Signing.ECDSASignature(rawRepresentation: try #require(Base64URL.decode(parts[2])))
            #expect(harness.publicKey.isValidSignature(signature, for: Data((parts[0] + "." + parts[1]).utf8)))

            harness.clock.advance(by: 200)
            #expect(try harness.signer.token() == token)
            #expect(harness.signer.tokensSigned == 1)
            harness.clock.advance(by: 50)  // 250 s: within the 60 s refresh margin of the 300 s lifetime
            #expect(try harness.signer.token() != token)
            #expect(harness.signer.tokensSigned == 2)
        }
    }

    @Test("Get Transaction Info: production answers, the JWS is verified and decoded")
    func transactionInfo() async throws {
        try await withHarness { harness in
            harness.server.enqueue(
                "/inApps/v1/transactions/23456",
                .json(#"{"signedTransactionInfo":"\#(AppleClientsFakeVerifier.jws(Self.transactionPayload))"}"#))
            let answer = try #require(try await harness.client.transactionInfo(transactionID: "23456").answer)
            #expect(answer.answeredBy == .production)
            #expect(answer.transaction.transactionID == "23456")
            #expect(answer.transaction.originalTransactionID == "12345")
            #expect(answer.transaction.productID == "com.example.product")
            #expect(answer.transaction.expiresDate == Date(timeIntervalSince1970: 1_698_149_000))
            #expect(answer.transaction.isUpgraded == true)
            #expect(answer.transaction.environment == .sandbox)
            let authorization = try #require(harness.production.first?.headers["authorization"])
            #expect(authorization == "Bearer " + (try harness.signer.token()))
        }
    }

    @Test("A revoked transaction's revocationType, revocationPercentage and inAppOwnershipType reach the facts")
    func revocationFixture() throws {
        let json = LenientJSON.parse(
            Array(try TestEnvironment.fixture("apple-swift/models/signedTransactionWithRevocation.json")))
        let decoded = try SignedTransaction(payload: try #require(json))
        #expect(decoded.revocationType == "REFUND_PRORATED")
        #expect(decoded.revocationPercentage == 50_000)
        let purchase = decoded.purchase
        #expect(purchase.revokedAt == Date(timeIntervalSince1970: 1_698_148_950))
        #expect(purchase.revocation == Revocation(type: .refundProrated, percentage: 50_000, reason: 1))
        #expect(purchase.ownershipType == .purchased)
        // Not revoked: Apple's leftover fields say nothing about a revocation.
        var live = decoded
        live.revocationDate = nil
        #expect(live.purchase.revocation == nil)
    }

    @Test("The fixture models decode (apple/app-store-server-library-swift)")
    func fixtureModels() async throws {
        let transaction = LenientJSON.parse(
            Array(try TestEnvironment.fixture("apple-swift/models/signedTransaction.json")))
        let decoded = try SignedTransaction(payload: try #require(transaction))
        #expect(decoded.transactionID == "23456")
        #expect(decoded.webOrderLineItemID == "34343")
        #expect(decoded.revocationReason == 1)
        #expect(decoded.environment == .localTesting)
        let renewal = LenientJSON.parse(
            Array(try TestEnvironment.fixture("apple-swift/models/signedRenewalInfo.json")))
        let decodedRenewal = try SignedRenewalInfo(payload: try #require(renewal))
        #expect(decodedRenewal.autoRenewProductID == "com.example.product.2")
        #expect(decodedRenewal.autoRenewStatus == 1)
        #expect(decodedRenewal.isInBillingRetryPeriod == true)
    }

    @Test("Production 4040010 and 401 send the call to sandbox")
    func sandboxFallback() async throws {
        try await withHarness { harness in
            let reply = AppleClientsFakeServer.Reply.json(
                #"{"signedTransactionInfo":"\#(AppleClientsFakeVerifier.jws(Self.transactionPayload))"}"#)
            harness.server.enqueue(
                "/inApps/v1/transactions/23456",
                .json(#"{"errorCode":4040010,"errorMessage":"Transaction id not found."}"#, status: 404),
                .init(status: 401))
            harness.server.enqueue("/sandbox/inApps/v1/transactions/23456", reply, reply)
            let result1 = try await harness.client.transactionInfo(transactionID: "23456")
            #expect(result1.answer?.answeredBy == .sandbox)
            let result2 = try await harness.client.transactionInfo(transactionID: "23456")
            #expect(result2.answer?.answeredBy == .sandbox)
            #expect(harness.production.count == 2)
            #expect(harness.sandbox.count == 2)
            #expect(harness.sandbox.allSatisfy { $0.headers["authorization"]?.hasPrefix("Bearer ") == true })
        }
    }

    @Test("429 carries Retry-After, a UNIX time in milliseconds")
    func rateLimited() async throws {
        try await withHarness { harness in
            let retryAt = Int64(harness.clock.now.timeIntervalSince1970 * 1000) + 1500
            harness.server.enqueue(
                "/inApps/v1/transactions/1",
                .json(
                    String(
                        decoding: try TestEnvironment.fixture("apple-swift/models/apiTooManyRequestsException.json"),
                        as: UTF8.self),
                    status: 429, headers: ["Retry-After": "\(retryAt)"]))
            guard case .retryable(let advice) = try await harness.client.transactionInfo(transactionID: "1") else {
                Issue.record("429 not retryable")
                return
            }
            #expect(advice.reason == .httpStatus(429))
            #expect(advice.retryAfter == .milliseconds(1500))
            #expect(harness.sandbox.isEmpty)
        }
    }

    @Test(
        "Error codes: retryable ones ask for a retry, the others fail",
        arguments: [
            (404, 4_040_002, true), (404, 4_040_004, true), (404, 4_040_006, true), (500, 5_000_001, true),
            (500, 5_000_000, true), (404, 4_040_005, false), (400, 4_000_006, false),
        ])
    func errorCodes(status: Int, code: Int, retryable: Bool) async throws {
        try await withHarness { harness in
            harness.server.enqueue(
                "/inApps/v1/subscriptions/7", .json(#"{"errorCode":\#(code),"errorMessage":"x"}"#, status: status))
            let outcome = try await harness.client.subscriptionStatuses(transactionID: "7")
            #expect(outcome.isRetryable == retryable, "\(outcome)")
            if case .failed(let error) = outcome {
                #expect(error.appleErrorCode == code)
            }
        }
    }

    @Test("Transaction history is read page by page with revision, from the environment that answered")
    func historyPagination() async throws {
        try await withHarness { harness in
            let one = AppleClientsFakeVerifier.jws(Self.transactionPayload)
            let two = AppleClientsFakeVerifier.jws(#"{"transactionId":"23457","productId":"p"}"#)
            harness.server.enqueue(
                "/inApps/v2/history/12345",
                .json(#"{"errorCode":4040010,"errorMessage":"Transaction id not found."}"#, status: 404))
            harness.server.enqueue(
                "/sandbox/inApps/v2/history/12345",
                .json(#"{"revision":"rev-1","hasMore":true,"environment":"Sandbox","signedTransactions":["\#(one)"]}"#),
                .json(
                    #"{"revision":"rev-2","hasMore":"false","environment":"Sandbox","signedTransactions":["\#(two)"]}"#)
            )
            let history = try #require(
                try await harness.client.completeTransactionHistory(transactionID: "12345").answer)
            #expect(history.transactions.map(\.transactionID) == ["23456", "23457"])
            #expect(history.hasMore == false)
            #expect(history.revision == "rev-2")
            #expect(history.answeredBy == .sandbox)
            #expect(harness.production.count == 1)
            #expect(harness.sandbox.map(\.query) == ["", "revision=rev-1"])
        }
    }

    @Test("Get All Subscription Statuses verifies every signed transaction and renewal info")
    func subscriptionStatuses() async throws {
        try await withHarness { harness in
            var fixture = String(
                decoding: try TestEnvironment.fixture("apple-swift/models/getAllSubscriptionStatusesResponse.json"),
                as: UTF8.self)
            for name in ["one", "two", "three"] {
                fixture = fixture.replacingOccurrences(
                    of: "signed_transaction_\(name)",
                    with: AppleClientsFakeVerifier.jws(#"{"transactionId":"t-\#(name)"}"#))
                fixture = fixture.replacingOccurrences(
                    of: "signed_renewal_\(name)",
                    with: AppleClientsFakeVerifier.jws(#"{"autoRenewStatus":1,"originalTransactionId":"o-\#(name)"}"#))
            }
            harness.server.enqueue("/inApps/v1/subscriptions/3749183", .json(fixture))
            let answer = try #require(try await harness.client.subscriptionStatuses(transactionID: "3749183").answer)
            #expect(answer.environment == .localTesting)
            #expect(answer.appAppleID == 5_454_545)
            #expect(answer.groups.map(\.subscriptionGroupIdentifier) == ["sub_group_one", "sub_group_two"])
            #expect(answer.groups[0].lastTransactions.map(\.status) == [1, 5])
            #expect(answer.groups[0].lastTransactions[1].transaction?.transactionID == "t-two")
            #expect(answer.groups[1].lastTransactions[0].renewalInfo?.originalTransactionID == "o-three")
        }
    }

    @Test("A payload that fails verification fails the call; bad ids never leave the process")
    func rejectedPayloadAndBadID() async throws {
        try await withHarness { harness in
            harness.server.enqueue(
                "/inApps/v1/transactions/1",
                .json(#"{"signedTransactionInfo":"\#(AppleClientsFakeVerifier.jws("{}", signature: "forged"))"}"#))
            guard case .failed(let error) = try await harness.client.transactionInfo(transactionID: "1") else {
                Issue.record("forged payload accepted")
                return
            }
            #expect(error.code == .signatureInvalid)

            guard case .failed(let badID) = try await harness.client.transactionInfo(transactionID: "../../x") else {
                Issue.record("bad id accepted")
                return
            }
            #expect(badID.code == .invalidRequest)
            #expect(harness.server.received().count == 1)
        }
    }

    @Test("The key's description hides the private key")
    func keyRedacted() throws {
        let privateKey = P256.Signing.PrivateKey()
        let key = AppStoreConnectKey(keyID: "K", issuerID: "I", bundleID: "B", privateKey: privateKey)
        let pemBody = privateKey.pemRepresentation.split(separator: "\n")[1]
        var dumped = ""
        dump(key, to: &dumped)
        for text in ["\(key)", String(reflecting: key), dumped] {
            #expect(!text.contains(pemBody))
            #expect(!text.contains("rawRepresentation"))
        }
        #expect(throws: AppleClientError.self) {
            try AppStoreConnectKey(keyID: "K", issuerID: "I", bundleID: "B", privateKeyPEM: "not a key")
        }
    }
}
