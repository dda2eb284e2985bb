import Entitlements
import Foundation
import Messages
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The HTTP API: shapes, authentication, rate limits and bad input, against a real server and store.
@Suite("Entitlement API", .timeLimit(.minutes(2)))
struct EntitlementAPITests {
    typealias F = EntitlementFixtures
    typealias H = EntitlementAPIHarness
    static let day = EntitlementFixtures.day

    static let verdicts = [
        F.verdict(
            "j1", account: "acct-1", .granted, decided: 10, transactions: [F.transaction("t1", expires: 30 * day)]),
        F.verdict(
            "j2", account: "acct-1", .granted, decided: 20,
            transactions: [F.transaction("c1", product: "coins.100", quantity: 2)]),
        F.verdict(
            "j3", account: "acct-2", .rejected, reason: .replayed, decided: 30,
            transactions: [F.transaction("t1", expires: 30 * day)]),
        F.verdict(
            "j4", account: "acct-1", .granted, decided: 40, transactions: [F.transaction("t9", product: "no.ads")]),
        F.verdict(
            "n1", account: "acct-1", .rejected, reason: .revoked, decided: 50,
            transactions: [F.transaction("t9", product: "no.ads", revoked: 45)]),
    ]

    @Test("GET entitlements: the documented shape, active premium, refunded no.ads, consumables counted")
    func entitlements() async throws {
        try await H.with(verdicts: Self.verdicts, asOf: F.at(9 * Self.day)) { h in
            let reply = try await h.get("/v1/accounts/acct-1/entitlements")
            #expect(reply.status == 200)
            #expect(reply.header("Content-Type") == "application/json")
            #expect(reply.header("Cache-Control") == "no-store")
            let json = reply.json
            #expect(json["account_id"] as? String == "acct-1")
            #expect(json["as_of"] as? String == RFC3339.format(F.at(9 * Self.day)))
            let list = json["entitlements"] as? [[String: Any]] ?? []
            #expect(list.map { $0["id"] as? String } == ["no.ads", "premium"])
            let premium = list.first { $0["id"] as? String == "premium" } ?? [:]
            #expect(premium["active"] as? Bool == true)
            #expect(premium["product_id"] as? String == "pro.monthly")
            #expect(premium["expires_at"] as? String == RFC3339.format(F.at(30 * Self.day)))
            #expect(premium["will_renew"] is NSNull)
            #expect(premium["in_grace_period"] as? Bool == false)
            #expect(premium["in_billing_retry"] as? Bool == false)
            #expect(premium["original_transaction_id"] as? String == "t1")
            #expect(premium["environment"] as? String == "Production")
            #expect(premium["updated_at"] is String)
            #expect(
                Set(premium.keys) == [
                    "id", "active", "product_id", "expires_at", "will_renew", "in_grace_period", "in_billing_retry",
                    "original_transaction_id", "store", "environment", "updated_at",
                ])
            #expect(premium["store"] as? String == "app_store")
            let noAds = list.first { $0["id"] as? String == "no.ads" } ?? [:]
            #expect(noAds["active"] as? Bool == false)
            let consumables = json["consumables"] as? [[String: Any]] ?? []
            #expect(consumables.count == 1)
            #expect(consumables.first?["product_id"] as? String == "coins.100")
            #expect(consumables.first?["count"] as? Int == 2)
        }
    }

    @Test("GET history: newest first, reasons explained, paginated with next_before")
    func history() async throws {
        try await H.with(verdicts: Self.verdicts) { h in
            let first = try await h.get("/v1/accounts/acct-1/history?limit=2").json
            let entries = first["entries"] as? [[String: Any]] ?? []
            #expect(entries.count == 2)
            let sequences = entries.compactMap { $0["sequence"] as? Int }
            #expect(sequences == sequences.sorted(by: >))
            #expect((entries.first?["event"] as? [String: Any])?["type"] as? String == "refund")
            #expect((entries.first?["explanation"] as? String)?.contains("refunded") == true)
            let next = try #require(first["next_before"] as? Int)
            let rest = try await h.get("/v1/accounts/acct-1/history?limit=50&before=\(next)").json
            let older = rest["entries"] as? [[String: Any]] ?? []
            #expect(older.allSatisfy { ($0["sequence"] as? Int ?? .max) < next })
            #expect(rest["next_before"] is NSNull)
            let revoked = older.first { $0["reason"] as? String == nil && $0["outcome"] as? String == "granted" }
            #expect(revoked != nil)
            let replayed = try await h.get("/v1/accounts/acct-2/history").json["entries"] as? [[String: Any]] ?? []
            #expect(replayed.first?["reason"] as? String == "replayed")
            #expect((replayed.first?["explanation"] as? String)?.contains("another account") == true)
            #expect(try await h.get("/v1/accounts/acct-1/history?limit=0").status == 400)
            #expect(try await h.get("/v1/accounts/acct-1/history?before=abc").status == 400)
        }
    }

    @Test("GET transactions/{id}: the owner and the state, by transaction id or by original transaction id")
    func transactionLookup() async throws {
        let renewal = F.verdict(
            "r1", account: "acct-1", .granted, decided: 29 * Self.day,
            transactions: [F.transaction("t2", original: "t1", purchased: 29 * Self.day, expires: 60 * Self.day)])
        try await H.with(verdicts: Self.verdicts + [renewal]) { h in
            let direct = try await h.get("/v1/transactions/t9").json
            #expect(direct["account_id"] as? String == "acct-1")
            #expect(direct["state"] as? String == "revoked")
            #expect(direct["matched_by"] as? String == "transaction_id")
            let renewed = try await h.get("/v1/transactions/t2").json
            #expect(renewed["state"] as? String == "active")
            let unknown = try await h.get("/v1/transactions/nope")
            #expect(unknown.status == 404)
            #expect(unknown.json["error"] as? String == "unknown_transaction")
        }
        let groupOnly = [
            F.verdict(
                "g1", account: "acct-3", .granted, decided: 10,
                transactions: [F.transaction("p2", original: "p1", expires: 30 * Self.day)])
        ]
        try await H.with(verdicts: groupOnly) { h in
            let byOriginal = try await h.get("/v1/transactions/p1").json
            #expect(byOriginal["matched_by"] as? String == "original_transaction_id")
            #expect(byOriginal["account_id"] as? String == "acct-3")
        }
    }

    @Test("no token, a wrong token or another scheme is 401 with WWW-Authenticate; nothing of the request is echoed")
    func authentication() async throws {
        try await H.with(verdicts: Self.verdicts) { h in
            for reply in [
                try await h.get("/v1/accounts/acct-1/entitlements", token: nil),
                try await h.get("/v1/accounts/acct-1/entitlements", token: "support-token-0123456789abcdeX"),
                try await h.get("/v1/accounts/acct-1/entitlements", authorization: "Basic \(H.token)"),
                try await h.get("/v1/accounts/acct-1/entitlements", authorization: "Bearer"),
                try await h.get("/v1/transactions/t1", token: String(repeating: "x", count: 5000)),
            ] {
                #expect(reply.status == 401)
                #expect(reply.json["error"] as? String == "unauthorized")
                #expect(reply.header("WWW-Authenticate") == "Bearer")
                #expect(!reply.text.contains("acct-1") && !reply.text.contains("token-0123"))
            }
            #expect(try await h.get("/v1/accounts/acct-1/entitlements", token: H.otherToken).status == 200)
            #expect(try await h.get("/v1/session").json["caller"] as? String == "support")
            // Unknown API paths are 404 only once authenticated.
            #expect(try await h.get("/v1/secrets", token: nil).status == 401)
            #expect(try await h.get("/v1/secrets").json["error"] as? String == "not_found")
        }
    }

    @Test("unknown accounts, oversized ids, control characters and encoded slashes get a clear 4xx")
    func badIdentifiers() async throws {
        try await H.with(verdicts: Self.verdicts) { h in
            let unknown = try await h.get("/v1/accounts/nobody/entitlements")
            #expect(unknown.status == 404)
            #expect(unknown.json["error"] as? String == "unknown_account")
            #expect(try await h.get("/v1/accounts/nobody/history").status == 404)
            let long = String(repeating: "a", count: 257)
            let oversized = try await h.get("/v1/accounts/\(long)/entitlements")
            #expect(oversized.status == 400)
            #expect(oversized.json["error"] as? String == "invalid_id")
            #expect(!oversized.text.contains(long))
            #expect(try await h.get("/v1/accounts/\(String(repeating: "a", count: 256))/entitlements").status == 404)
            #expect(try await h.get("/v1/accounts/a%00b/entitlements").status == 400)
            #expect(try await h.get("/v1/accounts/a%0Ab/entitlements").status == 400)
            #expect(try await h.get("/v1/accounts/%FF%FE/entitlements").status == 400)
            #expect(try await h.get("/v1/transactions/%2e%2e%2f%2e%2e%2fetc%2fpasswd").status == 404)
            #expect(try await h.get("/v1/accounts/..%2Facct-1/entitlements").status == 404)
            let huge = String(repeating: "%41", count: 10_000)
            #expect(try await h.get("/v1/accounts/\(huge)/entitlements").status == 400)
        }
    }

    @Test("an account id with a slash or unicode, percent-encoded, is found as the verdict named it")
    func encodedIdentifiers() async throws {
        let verdict = F.verdict(
            "j1", account: "org/42 ünï", .granted, decided: 10, transactions: [F.transaction("tx/1", product: "no.ads")]
        )
        try await H.with(verdicts: [verdict]) { h in
            let reply = try await h.get("/v1/accounts/org%2F42%20%C3%BCn%C3%AF/entitlements")
            #expect(reply.status == 200)
            #expect(reply.json["account_id"] as? String == "org/42 ünï")
            #expect(try await h.get("/v1/transactions/tx%2F1").json["account_id"] as? String == "org/42 ünï")
        }
    }

    @Test("each token is rate limited: past the burst, 429 with Retry-After; other tokens are unaffected")
    func rateLimit() async throws {
        try await H.with(verdicts: Self.verdicts, limits: .init(perCaller: 0.01, callerBurst: 3)) { h in
            var statuses: [Int] = []
            for _ in 0..<5 { statuses.append(try await h.get("/v1/accounts/acct-1/entitlements").status) }
            #expect(statuses == [200, 200, 200, 429, 429])
            let limited = try await h.get("/v1/accounts/acct-1/entitlements")
            #expect(limited.header("Retry-After") == "1")
            #expect(limited.json["error"] as? String == "rate_limited")
            #expect(try await h.get("/v1/accounts/acct-1/entitlements", token: H.otherToken).status == 200)
        }
    }

    @Test("repeated failed authentications from one address are refused with 429 before the token is checked")
    func failureLimit() async throws {
        try await H.with(limits: .init(failuresPerAddress: 0.01, failureBurst: 3)) { h in
            var statuses: [Int] = []
            for _ in 0..<4 {
                statuses.append(try await h.get("/v1/session", token: "wrong-token-wrong-token-00").status)
            }
            #expect(statuses == [401, 401, 401, 429])
            // Even the right token waits now: guessing cannot go faster than the limit.
            #expect(try await h.get("/v1/session").status == 429)
        }
    }

    @Test("the console is three fixed files, no third-party resource, a strict CSP; path tricks under it are 404")
    func consolePaths() async throws {
        try await H.with(verdicts: Self.verdicts) { h in
            let page = try await h.get("/console", token: nil)
            #expect(page.status == 200)
            #expect(page.header("Content-Type")?.hasPrefix("text/html") == true)
            #expect(page.header("Content-Security-Policy")?.hasPrefix("default-src 'none'; script-src 'self'") == true)
            #expect(page.header("X-Frame-Options") == "DENY")
            var bodies = [page.text]
            for asset in ["/console/app.js", "/console/app.css"] {
                let reply = try await h.get(asset, token: nil)
                #expect(reply.status == 200, "\(asset)")
                bodies.append(reply.text)
            }
            for body in bodies {
                #expect(!body.contains("http://") && !body.contains("https://") && !body.contains("//cdn"))
                #expect(!body.contains("innerHTML") && !body.contains("eval("))
            }
            for path in [
                "/console/../v1/session", "/console/..%2f..%2fetc%2fpasswd", "/console/%2e%2e/%2e%2e/etc/passwd",
                "/console/app.js/..", "/console/index.html", "/console/app.js%00.css",
                "/console/../../../../etc/passwd", "/console/.%2e/Package.swift",
            ] {
                let status = try await Self.rawStatus(port: h.port, path: path)
                #expect(status == 404 || status == 400, "\(path): \(status)")
            }
        }
    }

    /// The status of a GET sent byte for byte as written (curl would normalise `..` before sending).
    static func rawStatus(port: Int, path: String) async throws -> Int {
        try await OffPool.run {
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard descriptor >= 0 else { throw EntitlementTestFailure("socket failed") }
            defer { close(descriptor) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(port).bigEndian
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard connected == 0 else { throw EntitlementTestFailure("connect failed") }
            let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8)
            _ = request.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, 0) }
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
                if count <= 0 { break }
                received += buffer[0..<count]
                if received.count > 12 { break }
            }
            let line = String(decoding: received, as: UTF8.self)
            let parts = line.split(separator: " ")
            guard parts.count > 1, let status = Int(parts[1]) else {
                throw EntitlementTestFailure("no status line for \(path)")
            }
            return status
        }
    }

    @Test("healthz, readyz and metrics are served on the same port without a token")
    func operations() async throws {
        try await H.with(verdicts: Self.verdicts) { h in
            #expect(try await h.get("/healthz", token: nil).status == 200)
            #expect(try await h.get("/readyz", token: nil).status == 200)
            _ = try await h.get("/v1/accounts/acct-1/entitlements")
            let metrics = try await h.get("/metrics", token: nil)
            #expect(metrics.status == 200)
            #expect(metrics.text.contains("verify_entitlements_requests_total"))
        }
    }

    @Test("messages the projection could not read are in the history as ignored, with a clear problem")
    func ignoredInHistory() async throws {
        let base = F.verdict(
            "j1", account: "acct-9", .granted, decided: 10, transactions: [F.transaction("t1", product: "no.ads")])
        let raw = [
            F.verdictJSON(base, replacing: ["schema": "receipt-verdict/v2"]),
            F.verdictJSON(
                base,
                replacing: ["outcome": "granted_with_bonus", "verdict_id": "11111111-1111-5111-8111-111111111111"]),
        ]
        try await H.with(raw: raw) { h in
            let entries = try await h.get("/v1/accounts/acct-9/history").json["entries"] as? [[String: Any]] ?? []
            #expect(entries.count == 2)
            #expect(entries.allSatisfy { $0["kind"] as? String == "ignored" })
            let problems = entries.compactMap { $0["problem"] as? String }
            #expect(problems.contains { $0.hasPrefix("unsupported_schema") })
            #expect(problems.contains { $0.hasPrefix("unknown_outcome") })
            let entitlements = try await h.get("/v1/accounts/acct-9/entitlements").json
            #expect((entitlements["entitlements"] as? [Any])?.isEmpty == true)
        }
    }
}

/// The API's bodies and the lifecycle events validate against the JSON Schemas in docs/schemas (Python's
/// `jsonschema`, an independent reader), and the schemas refuse what the API never sends.
@Suite("Entitlement API schemas", .timeLimit(.minutes(2)))
struct EntitlementSchemaTests {
    typealias F = EntitlementFixtures

    static func validate(_ documents: [[UInt8]], schema: String) async throws -> [String] {
        try await SchemaValidator.validate(documents, schema: schema)
    }

    @Test("entitlements, history, transactions, errors and events match their schemas")
    func responses() async throws {
        let day = F.day
        let verdicts =
            EntitlementAPITests.verdicts + EntitlementCrossStoreAPITests.verdicts + [
                F.verdict(
                    "r1", account: "acct-1", .granted, decided: 29 * day,
                    transactions: [F.transaction("t2", original: "t1", purchased: 29 * day, expires: 60 * day)]),
                F.verdict(
                    "g1", account: "acct-1", .alreadyGranted, reason: .alreadyOwned, decided: 59 * day,
                    transactions: [
                        F.transaction(
                            "t2", original: "t1", purchased: 29 * day, expires: 75 * day, billingRetry: true,
                            grace: 75 * day)
                    ]),
            ]
        let raw = [F.verdictJSON(verdicts[0], replacing: ["schema": "receipt-verdict/v2"])]
        try await EntitlementAPIHarness.with(verdicts: verdicts, raw: raw, now: F.at(62 * day)) { h in
            let checks: [(String, [String])] = [
                (
                    "entitlements-account.v1.schema.json",
                    [
                        "/v1/accounts/acct-1/entitlements", "/v1/accounts/acct-2/entitlements",
                        "/v1/accounts/acct-x/entitlements",
                    ]
                ),
                (
                    "entitlements-history.v1.schema.json",
                    [
                        "/v1/accounts/acct-1/history", "/v1/accounts/acct-1/history?limit=1",
                        "/v1/accounts/acct-x/history",
                    ]
                ),
                (
                    "entitlements-transaction.v1.schema.json",
                    [
                        "/v1/transactions/t2", "/v1/accounts/acct-1/transactions",
                        "/v1/accounts/acct-x/transactions",
                    ]
                ),
                ("entitlements-error.v1.schema.json", ["/v1/accounts/nobody/entitlements", "/v1/transactions/x%00"]),
            ]
            for (schema, paths) in checks {
                var bodies: [[UInt8]] = []
                for path in paths { bodies.append(try await h.get(path).body) }
                bodies.append(try await h.get(paths[0], token: nil).body)
                let results = try await Self.validate(bodies, schema: schema)
                let expected =
                    Array(repeating: "ok", count: paths.count) + [
                        schema == "entitlements-error.v1.schema.json" ? "ok" : "invalid"
                    ]
                #expect(results.map { $0.hasPrefix("invalid") ? "invalid" : $0 } == expected, "\(schema): \(results)")
            }
            let events = try await h.store.unpublishedEvents(limit: 100)
            #expect(Set(events.map(\.kind)).isSuperset(of: [.initialPurchase, .refund, .renewal, .gracePeriodEntered]))
            let eventResults = try await Self.validate(
                events.map(\.json), schema: "entitlement-event.v1.schema.json")
            #expect(eventResults == Array(repeating: "ok", count: events.count))
        }
    }
}
