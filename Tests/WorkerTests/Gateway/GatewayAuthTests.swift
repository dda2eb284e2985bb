import Chaos
import Foundation
import Kafka
import Messages
import Operations
import Testing

@testable import AppleSimulator
@testable import Gateway

@Suite("Gateway: who may publish", .timeLimit(.minutes(2)))
struct GatewayAuthTests {
    static var job: [String: Any] { ["account_id": "acct-auth", "receipt": "MIIbase64"] }

    @Test("POST /v1/receipts: no token or a wrong one is 401 with WWW-Authenticate, the right one 202")
    func bearerTokens() async throws {
        try await GatewayTestHarness.with { harness in
            func expectUnauthorized(_ reply: GatewayTestHarness.Reply) {
                #expect(reply.status == 401, "\(reply.text)")
                #expect(reply.json["error"] as? String == "unauthorized", "\(reply.text)")
                #expect(reply.header("WWW-Authenticate")?.hasPrefix("Bearer") == true)
                #expect(!reply.text.contains(GatewayTestHarness.token))
            }
            expectUnauthorized(try await harness.post("v1/receipts", json: Self.job, authorization: nil))
            expectUnauthorized(
                try await harness.post("v1/receipts", json: Self.job, authorization: "Bearer wrong-token-0123456789"))
            // The right token with a byte more or less, or under another scheme, is no token.
            expectUnauthorized(
                try await harness.post(
                    "v1/receipts", json: Self.job, authorization: "Bearer \(GatewayTestHarness.token)x"))
            expectUnauthorized(
                try await harness.post(
                    "v1/receipts", json: Self.job, authorization: "Bearer \(GatewayTestHarness.token.dropLast())"))
            expectUnauthorized(
                try await harness.post(
                    "v1/receipts", json: Self.job, authorization: "Basic \(GatewayTestHarness.token)"))
            // Refused before the body is read: an oversized body without a token is 401, not 413.
            expectUnauthorized(
                try await harness.post(
                    "v1/receipts", Array(repeating: UInt8(ascii: "A"), count: 2 << 20), authorization: nil))
            #expect(try await harness.messageCount() == 0, "a refused request reached Kafka")

            let accepted = try await harness.post(
                "v1/receipts", json: Self.job, authorization: "bearer  \(GatewayTestHarness.token)")
            #expect(accepted.status == 202, "the scheme is case-insensitive: \(accepted.text)")
            #expect(try await harness.messageCount() == 1)

            let metrics = try await harness.operations("metrics").text
            #expect(metrics.contains(#"error="unauthorized""#))
        }
    }

    @Test("VERIFY_GATEWAY_AUTH=disabled: jobs without a token are accepted")
    func disabled() async throws {
        try await GatewayTestHarness.with { configuration in
            configuration.authentication = .disabled
            configuration.tokensFile = nil
        } _: { harness in
            let reply = try await harness.post("v1/receipts", json: Self.job, authorization: nil)
            #expect(reply.status == 202, "\(reply.text)")
        }
    }

    @Test(
        "a frontend's job with a notification or correction job id is 400 reserved_id; with the notification account 400 invalid_value"
    )
    func reservedNamespace() async throws {
        try await GatewayTestHarness.with { harness in
            for jobID in [
                "apple-notification-0f3a2b1c-1111-4222-8333-444455556666", "Apple-Notification-x",
                "reconcile-reversal-1700000000000-2000000000000041-0-0", "Reconcile-x",
            ] {
                let reply = try await harness.post(
                    "v1/receipts", json: ["job_id": jobID, "account_id": "acct-1", "receipt": "MIIbase64"])
                #expect(reply.status == 400, "\(reply.text)")
                #expect(reply.json["error"] as? String == "reserved_id")
                #expect(reply.json["field"] as? String == "job_id")
            }
            // The account and its lanes: `apple-notification/<originalTransactionId>` is a notification job's key.
            for accountID in [
                "apple-notification", "Apple-Notification", "apple-notification/2000000000000041",
                "APPLE-NOTIFICATION/x",
            ] {
                let account = try await harness.post(
                    "v1/receipts", json: ["job_id": "j-1", "account_id": accountID, "receipt": "MIIbase64"])
                #expect(account.status == 400, "\(accountID): \(account.text)")
                #expect(account.json["error"] as? String == "invalid_value", "\(accountID): \(account.text)")
                #expect(account.json["field"] as? String == "account_id")
            }
            #expect(try await harness.messageCount() == 0)
            // Only the account itself and its lanes: a look-alike account is an ordinary one.
            let alike = try await harness.post(
                "v1/receipts", json: ["job_id": "j-2", "account_id": "apple-notifications", "receipt": "MIIbase64"])
            #expect(alike.status == 202, "\(alike.text)")
        }
    }

    @Test("the configured notification account and its lanes are refused 400 invalid_value, whatever its name")
    func configuredNotificationAccount() async throws {
        try await GatewayTestHarness.with { configuration in
            configuration.notificationAccountID = "asn"
        } _: { harness in
            for accountID in ["asn", "ASN", "asn/2000000000000041"] {
                let reply = try await harness.post(
                    "v1/receipts", json: ["job_id": "j-1", "account_id": accountID, "receipt": "MIIbase64"])
                #expect(reply.status == 400, "\(accountID): \(reply.text)")
                #expect(reply.json["error"] as? String == "invalid_value", "\(accountID): \(reply.text)")
                #expect(reply.json["field"] as? String == "account_id")
            }
            #expect(try await harness.messageCount() == 0)
        }
    }

    /// The message contract refuses these in `ReceiptJob.validate()`, at every entrance; the gateway answers them as
    /// every contract error, 400 `invalid_value`.
    @Test("ids the message contract refuses (control characters, the default notification lanes) are 400 invalid_value")
    func contractRefusedIdentifiers() async throws {
        try await GatewayTestHarness.with { configuration in
            configuration.notificationAccountID = "asn"
        } _: { harness in
            let jobs: [[String: Any]] = [
                ["job_id": "j-1", "account_id": "acct\u{0}1", "receipt": "MIIbase64"],
                ["job_id": "j-\u{0}2", "account_id": "acct-2", "receipt": "MIIbase64"],
                ["job_id": "j-3", "account_id": "acct\u{7}3", "receipt": "MIIbase64"],
                ["job_id": "j-4", "account_id": "apple-notification/2000000000000041", "receipt": "MIIbase64"],
            ]
            for job in jobs {
                let reply = try await harness.post("v1/receipts", json: job)
                #expect(reply.status == 400, "\(reply.text)")
                #expect(reply.json["error"] as? String == "invalid_value", "\(reply.text)")
            }
            #expect(try await harness.messageCount() == 0)
        }
    }

    @Test("the adversarial corpus's hostile identifiers: 400 invalid_value or 202 as the codec decides, then a job")
    func corpusHostileIdentifiers() async throws {
        try await GatewayTestHarness.with { harness in
            var corpus = AdversarialJobCorpus(seed: 2_025, tag: "gw")
            corpus.heavyShare = 0
            let codec = MessageCodec()
            var accepted: Int64 = 0
            var refused = 0
            let messages = corpus.generate(count: 16 * 40).filter { $0.kind == .hostileIdentifier }
            for message in messages {
                let reply = try await harness.post("v1/receipts", message.value)
                switch AdversarialJobCorpus.classify(message.value, codec: codec) {
                case .deadLetter:
                    #expect(reply.status == 400, "\(message.key): \(reply.text)")
                    #expect(
                        ["invalid_value", "not_json", "wrong_type"].contains(reply.json["error"] as? String ?? ""),
                        "\(message.key): \(reply.text)")
                    refused += 1
                case .job:
                    #expect(reply.status == 202, "\(message.key): \(reply.text)")
                    accepted += 1
                }
                let next = try await harness.post("v1/receipts", try #require(message.followUp))
                #expect(next.status == 202, "the follow-up of \(message.key): \(next.text)")
                accepted += 1
            }
            #expect(refused > 10)
            #expect(try await harness.messageCount() == accepted)
        }
    }

    @Test("unsigned, tampered or foreign-signed notifications get 403 and cost no Kafka write; Apple's get 200")
    func notificationSignatures() async throws {
        try await GatewayTestHarness.with { harness in
            func expectRefused(_ body: [String: Any], _ what: String) async throws {
                let reply = try await harness.post("apple/notifications", json: body, authorization: nil)
                #expect(reply.status == 403, "\(what): \(reply.text)")
                #expect(reply.json["error"] as? String == "untrusted_signature", "\(what): \(reply.text)")
            }
            try await expectRefused(try GatewayTestData.notification(uuid: UUID().uuidString), "unsigned")
            let foreign = try GatewayTestData.foreignPKI.get()
            try await expectRefused(
                try GatewayTestData.signedNotification(uuid: UUID().uuidString, pki: foreign), "foreign-signed")
            // A genuine notification with its payload swapped: the signature no longer covers it.
            let genuine = try #require(
                try GatewayTestData.signedNotification(uuid: UUID().uuidString)["signedPayload"] as? String)
            let other = try #require(
                try GatewayTestData.signedNotification(uuid: UUID().uuidString)["signedPayload"] as? String)
            let parts = genuine.split(separator: ".")
            let tampered = [parts[0], other.split(separator: ".")[1], parts[2]].joined(separator: ".")
            try await expectRefused(["signedPayload": tampered], "tampered")
            #expect(try await harness.messageCount() == 0, "a refused notification reached Kafka")

            let uuid = UUID().uuidString
            let signed = try await harness.post(
                "apple/notifications", json: try GatewayTestData.signedNotification(uuid: uuid), authorization: nil)
            #expect(signed.status == 200, "\(signed.text)")
            #expect(signed.json["job_id"] as? String == JobIntake.notificationJobIDPrefix + uuid.lowercased())
            #expect(try await harness.messageCount() == 1)
        }
    }
}

@Suite("Gateway: bearer tokens file")
struct GatewayBearerTokensTests {
    @Test("one token per line; comments, blank lines and surrounding spaces are ignored")
    func parses() throws {
        let tokens = try BearerTokens(
            fileContents: "# frontends\n\n  token-one-0123456789abcdef  \r\n# old: x\ntoken-two-0123456789abcdef\n")
        #expect(tokens.count == 2)
        #expect(tokens.accepts("token-one-0123456789abcdef"))
        #expect(tokens.accepts("token-two-0123456789abcdef"))
        #expect(!tokens.accepts("token-three-0123456789abcdef"))
        #expect(!tokens.accepts("token-one-0123456789abcde"))
        #expect(!tokens.accepts(""))
        #expect(!tokens.accepts("# frontends"))
    }

    @Test("an empty file, a short token or one with spaces is refused, naming the line and never the token")
    func refusals() throws {
        let empty = #expect(throws: ConfigurationError.self) {
            try BearerTokens(fileContents: "# nothing yet\n\n")
        }
        #expect(empty?.key == "gateway_tokens_file")
        let short = #expect(throws: ConfigurationError.self) {
            try BearerTokens(fileContents: "token-one-0123456789abcdef\nshort-secret\n")
        }
        #expect(short?.description.contains("line 2") == true)
        #expect(short?.description.contains("short-secret") == false)
        let spaced = #expect(throws: ConfigurationError.self) {
            try BearerTokens(fileContents: "token one 0123456789abcdef\n")
        }
        #expect(spaced?.description.contains("line 1") == true)
        let unreadable = #expect(throws: ConfigurationError.self) {
            try BearerTokens.load(path: "/nonexistent/tokens")
        }
        #expect(unreadable?.description.contains("cannot read") == true)
    }

    @Test("the comparison looks at every byte: equal only when all bytes are")
    func constantTimeEqual() {
        let a: [UInt8] = Array(repeating: 7, count: 32)
        #expect(AccessTokens.constantTimeEqual(a, a))
        for index in [0, 15, 31] {
            var b = a
            b[index] ^= 0x01
            #expect(!AccessTokens.constantTimeEqual(a, b), "a difference at byte \(index) was missed")
        }
        #expect(!AccessTokens.constantTimeEqual(a, Array(a.dropLast())))
        #expect(AccessTokens.constantTimeEqual([], []))
    }

    @Test("the Authorization header: Bearer (any case), one token, nothing else")
    func authorizationHeader() {
        #expect(BearerTokens.token(fromAuthorization: "Bearer abc") == "abc")
        #expect(BearerTokens.token(fromAuthorization: "bearer   abc  ") == "abc")
        #expect(BearerTokens.token(fromAuthorization: "BEARER abc") == "abc")
        #expect(BearerTokens.token(fromAuthorization: "Bearer ") == nil)
        #expect(BearerTokens.token(fromAuthorization: "Basic abc") == nil)
        #expect(BearerTokens.token(fromAuthorization: "Bearerabc") == nil)
        #expect(BearerTokens.token(fromAuthorization: nil) == nil)
    }
}
