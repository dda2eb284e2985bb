import Foundation
import Messages
import Operations
import Testing

@testable import Entitlements

/// What support staff get from the API for a customer who "paid and has nothing": the rejected verdicts with their
/// reasons in words, the owner of a replayed purchase (support tokens only), and lookups by every id a customer
/// may quote.
@Suite("Entitlement API for support", .timeLimit(.minutes(2)))
struct EntitlementSupportAPITests {
    typealias F = EntitlementFixtures

    static let owner = "acct-owner-1"
    static let replayer = "acct-replayer-2"
    static let verdicts = [
        F.verdict(
            "buy", account: owner, .granted, decided: 1 * F.day,
            transactions: [F.transaction("2000000111", product: "lifetime", purchased: 1 * F.day)]),
        F.verdict(
            "replay", account: replayer, .rejected, reason: .replayed, decided: 2 * F.day,
            transactions: [F.transaction("2000000111", product: "lifetime", purchased: 1 * F.day)], by: .ledger),
        F.verdict(
            "android", account: "acct-play", .granted, decided: 3 * F.day,
            transactions: [
                F.transaction(
                    "play-txn-9", product: "premium_sub", original: "play-token-9", purchased: 3 * F.day,
                    expires: 40 * F.day, orderID: "GPA.9999-0000-1111-22223..0", purchaseToken: "play-token-9")
            ], store: .googlePlay),
    ]

    /// The harness's token file, with the `support` label's token given the support scope.
    static let scopedTokens =
        "support:\(EntitlementAPIHarness.token) support\nrobot:\(EntitlementAPIHarness.otherToken)\n"

    @Test("a replayed account: 200 with its rejection in words; the owner's id for a support token only")
    func replayedOwner() async throws {
        try await EntitlementAPIHarness.with(verdicts: Self.verdicts, tokensFile: Self.scopedTokens) { h in
            let entitlements = try await h.get("/v1/accounts/\(Self.replayer)/entitlements")
            #expect(entitlements.status == 200)
            #expect((entitlements.json["entitlements"] as? [Any])?.isEmpty == true)

            let support = try await h.get("/v1/accounts/\(Self.replayer)/history")
            #expect(support.status == 200)
            let entry = try #require((support.json["entries"] as? [[String: Any]])?.first)
            #expect(entry["reason"] as? String == "replayed")
            #expect((entry["explanation"] as? String)?.contains("already owned by another account") == true)
            #expect(entry["belongs_to_another_account"] as? Bool == true)
            #expect(entry["owner_account_id"] as? String == Self.owner)

            let robot = try await h.get(
                "/v1/accounts/\(Self.replayer)/history", token: EntitlementAPIHarness.otherToken)
            let hidden = try #require((robot.json["entries"] as? [[String: Any]])?.first)
            #expect(hidden["belongs_to_another_account"] as? Bool == true)
            #expect(hidden["owner_account_id"] == nil)
            #expect(!robot.text.contains(Self.owner))

            #expect(try await h.get("/v1/session").json["scopes"] as? [String] == ["support"])
            #expect(
                try await h.get("/v1/session", token: EntitlementAPIHarness.otherToken).json["scopes"] as? [String]
                    == [])
            // The owner's own history has no such field.
            let own = try await h.get("/v1/accounts/\(Self.owner)/history")
            #expect(!own.text.contains("owner_account_id"))
        }
    }

    @Test("a replayed subscription period this store never saw is answered by its subscription's owner")
    func replayedRenewalOwner() async throws {
        let verdicts = [
            F.verdict(
                "sub", account: Self.owner, .granted, decided: 1 * F.day,
                transactions: [F.transaction("2000000555", purchased: 1 * F.day, expires: 31 * F.day)]),
            F.verdict(
                "replay-renewal", account: Self.replayer, .rejected, reason: .replayed, decided: 32 * F.day,
                transactions: [
                    F.transaction("2000000999", original: "2000000555", purchased: 31 * F.day, expires: 61 * F.day)
                ], by: .ledger),
        ]
        try await EntitlementAPIHarness.with(verdicts: verdicts, tokensFile: Self.scopedTokens) { h in
            let entry = try #require(
                (try await h.get("/v1/accounts/\(Self.replayer)/history").json["entries"] as? [[String: Any]])?.first)
            #expect(entry["owner_account_id"] as? String == Self.owner)
        }
    }

    @Test("a purchase is looked up by a Google Play order id and purchase token, matched_by naming which")
    func lookupByOrder() async throws {
        try await EntitlementAPIHarness.with(verdicts: Self.verdicts) { h in
            for (id, matched) in [
                ("GPA.9999-0000-1111-22223..0", "order_id"), ("play-token-9", "original_transaction_id"),
                ("play-txn-9", "transaction_id"), ("2000000111", "transaction_id"),
            ] {
                let reply = try await h.get("/v1/transactions/\(id)")
                #expect(reply.status == 200, "\(id)")
                #expect(reply.json["matched_by"] as? String == matched, "\(id)")
            }
            #expect(try await h.get("/v1/transactions/GPA.0000").json["error"] as? String == "unknown_transaction")
        }
    }

    @Test("a verdict's revocation fields are read when present: a partial refund and a family revocation in words")
    func revocationsInWords() async throws {
        let grant = F.verdict(
            "buy", account: "acct-family", .granted, decided: 1 * F.day,
            transactions: [
                F.transaction("2000000301", product: "pro.monthly", purchased: 1 * F.day, expires: 31 * F.day)
            ])
        let revoke = F.verdict(
            "revoke", account: "acct-family", .rejected, reason: .revoked, decided: 5 * F.day,
            transactions: [
                F.transaction(
                    "2000000301", product: "pro.monthly", purchased: 1 * F.day, expires: 31 * F.day, revoked: 5 * F.day)
            ])
        let prorated = F.verdictJSON(
            revoke,
            replacing: [
                "transactions": [
                    Self.transactionJSON(
                        of: revoke,
                        extra: [
                            "revocation_type": "REFUND_PRORATED", "revocation_percentage": 40_000,
                            "revocation_reason": 1,
                        ])
                ]
            ])
        let reader = VerdictReader()
        guard case .verdict(_, let revocations) = reader.read(prorated, position: "v/0/1") else {
            Issue.record("not read as a verdict")
            return
        }
        #expect(
            revocations == [
                TransactionRevocation(
                    transactionID: "2000000301", type: "REFUND_PRORATED", percentage: 40_000, reason: "1")
            ])
        // Out of range: left out, the verdict still read (a field of the wrong type makes no verdict at all).
        let odd = F.verdictJSON(
            revoke,
            replacing: [
                "transactions": [
                    Self.transactionJSON(
                        of: revoke, extra: ["revocation_percentage": 400_000])
                ]
            ])
        guard case .verdict(_, let none) = reader.read(odd, position: "v/0/2") else {
            Issue.record("not read as a verdict")
            return
        }
        #expect(none.isEmpty)

        #expect(
            ReasonText.explain(
                outcome: "rejected", reason: "revoked",
                revocations: [TransactionRevocation(transactionID: "x", type: "REFUND_PRORATED", percentage: 33_333)])
                == "Apple refunded part of the purchase (33.3 % of the price), prorated: its entitlement ends.")
        #expect(
            ReasonText.explain(
                outcome: "rejected", reason: "revoked",
                revocations: [TransactionRevocation(transactionID: "x", type: "FAMILY_REVOKE")])?.contains(
                    "Family Sharing ended") == true)

        try await EntitlementAPIHarness.with(verdicts: [grant], raw: [prorated]) { h in
            let history = try await h.get("/v1/accounts/acct-family/history")
            let entry = try #require(
                (history.json["entries"] as? [[String: Any]])?.first { $0["kind"] as? String == "verdict" })
            #expect(entry["reason"] as? String == "revoked")
            #expect((entry["explanation"] as? String)?.contains("(40 % of the price)") == true)
            let stored = try #require((entry["revocations"] as? [[String: Any]])?.first)
            #expect(stored["revocation_type"] as? String == "REFUND_PRORATED")
            #expect(stored["revocation_percentage"] as? Int == 40_000)
        }
    }

    @Test("the new answers match their schemas: an owner, revocations, a lookup by order id, a session")
    func schemas() async throws {
        let revoke = F.verdict(
            "revoke", account: Self.owner, .rejected, reason: .revoked, decided: 4 * F.day,
            transactions: [F.transaction("2000000111", product: "lifetime", purchased: 1 * F.day, revoked: 4 * F.day)])
        let raw = [
            F.verdictJSON(
                revoke,
                replacing: [
                    "transactions": [
                        Self.transactionJSON(
                            of: revoke, extra: ["revocation_type": "REFUND_PRORATED", "revocation_percentage": 25_000])
                    ]
                ])
        ]
        try await EntitlementAPIHarness.with(verdicts: Self.verdicts, raw: raw, tokensFile: Self.scopedTokens) { h in
            let history = [
                try await h.get("/v1/accounts/\(Self.replayer)/history").body,
                try await h.get("/v1/accounts/\(Self.replayer)/history", token: EntitlementAPIHarness.otherToken).body,
                try await h.get("/v1/accounts/\(Self.owner)/history").body,
            ]
            #expect(String(decoding: history[0], as: UTF8.self).contains("owner_account_id"))
            #expect(String(decoding: history[2], as: UTF8.self).contains("REFUND_PRORATED"))
            #expect(
                try await SchemaValidator.validate(history, schema: "entitlements-history.v1.schema.json")
                    == ["ok", "ok", "ok"])
            let lookups = [
                try await h.get("/v1/transactions/GPA.9999-0000-1111-22223..0").body,
                try await h.get("/v1/transactions/play-token-9").body,
            ]
            #expect(
                try await SchemaValidator.validate(lookups, schema: "entitlements-transaction.v1.schema.json")
                    == ["ok", "ok"])
        }
    }

    /// The verdict's first transaction as the worker writes it, with `extra` fields added.
    static func transactionJSON(of verdict: Verdict, extra: [String: Any]) -> [String: Any] {
        let object = try! JSONSerialization.jsonObject(with: Data(MessageCodec().encode(verdict))) as! [String: Any]
        var transaction = (object["transactions"] as! [[String: Any]])[0]
        for (key, value) in extra { transaction[key] = value }
        return transaction
    }

    @Test("every reason code Messages defines has its own words, in both stores' texts")
    func everyReasonInWords() throws {
        let source = try String(
            contentsOf: TestEnvironment.packageRoot.appendingPathComponent("Sources/Messages/Verdict.swift"),
            encoding: .utf8)
        let pattern = try NSRegularExpression(pattern: #"public static let \w+ = Reason\("([a-z_0-9]+)"\)"#)
        let codes = pattern.matches(in: source, range: NSRange(source.startIndex..., in: source)).map {
            String(source[Range($0.range(at: 1), in: source)!])
        }
        #expect(codes.count >= 20, "the Reason constants were found in Verdict.swift")
        for code in codes {
            for store in [Store.appStore, .googlePlay] {
                let text = ReasonText.explain(outcome: "rejected", reason: code, store: store)
                #expect(text?.contains("does not know") == false, "\(code) (\(store.rawValue)) has no words")
            }
        }
    }

    @Test("a token line may end with the support scope; any other word after the token is refused unquoted")
    func tokenScopes() throws {
        let tokens = try AccessTokens(
            contents: "alice : \(String(repeating: "a", count: 28)) support\nbot:\(String(repeating: "b", count: 28))\n"
        )
        #expect(tokens.authenticate(String(repeating: "a", count: 28)) == "alice")
        #expect(tokens.scopes(of: "alice") == [AccessTokens.supportScope])
        #expect(tokens.scopes(of: "bot").isEmpty)
        do {
            _ = try AccessTokens(contents: "carol:\(String(repeating: "c", count: 28)) secretword")
            Issue.record("an unknown scope was accepted")
        } catch {
            #expect(!error.description.contains("secretword"))
            #expect(error.description.contains("line 1"))
        }
    }
}
