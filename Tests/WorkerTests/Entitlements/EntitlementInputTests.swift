import Entitlements
import Foundation
import Messages
import Operations
import Testing

/// Bad input never crashes and never becomes an entitlement: the verdict reader, the catalog, the tokens file and
/// the configuration each give a clear answer.
@Suite("Entitlement inputs")
struct EntitlementInputTests {
    typealias F = EntitlementFixtures
    static let verdict = F.verdict(
        "j1", account: "a1", .granted, decided: 10, transactions: [F.transaction("t1", product: "no.ads")])

    func unreadable(_ bytes: [UInt8], maximum: Int = 1 << 20) -> UnreadableMessage? {
        if case .unreadable(let message) = VerdictReader(maximumMessageBytes: maximum).read(bytes, position: "v/0/1") {
            return message
        }
        return nil
    }

    @Test("a verdict of this schema is read as a verdict")
    func readable() {
        guard case .verdict(let read, _) = VerdictReader().read(MessageCodec().encode(Self.verdict), position: "v/0/1")
        else {
            Issue.record("not read")
            return
        }
        #expect(read == Self.verdict)
    }

    @Test(
        "unknown schema, unknown outcome, wrong types, not JSON and oversized messages are each named, not guessed",
        arguments: [
            ("schema", "receipt-verdict/v2", "unsupported_schema"),
            ("outcome", "granted_twice", "unknown_outcome"),
            ("decided_by", "oracle", "invalid_verdict"),
            ("transactions", "t1", "invalid_verdict"),
            ("decided_at", "yesterday", "invalid_verdict"),
            ("account_id", "<null>", "invalid_verdict"),
            ("account_id", String(repeating: "x", count: 300), "invalid_identifier"),
            ("account_id", "a\u{0}b", "invalid_identifier"),
        ])
    func namedProblems(field: String, value: String, code: String) {
        let replacement: Any = value == "<null>" ? NSNull() : value
        let message = unreadable(F.verdictJSON(Self.verdict, replacing: [field: replacement]))
        #expect(message?.code == code)
        #expect(message?.dedupeID == Self.verdict.verdictID)
    }

    @Test("an unknown outcome keeps its account, so the history shows what was ignored")
    func envelopeKept() {
        let message = unreadable(F.verdictJSON(Self.verdict, replacing: ["outcome": "granted_twice"]))
        #expect(message?.accountID == "a1")
        #expect(message?.outcome == "granted_twice")
    }

    @Test("not JSON and oversized messages are ignored with their position as de-duplication id")
    func positions() {
        #expect(unreadable(Array("not json".utf8))?.code == "not_json")
        #expect(unreadable(Array("not json".utf8))?.dedupeID == "v/0/1")
        let big = unreadable(MessageCodec().encode(Self.verdict), maximum: 64)
        #expect(big?.code == "oversized")
        #expect(big?.accountID == nil)
        #expect(unreadable([])?.code != nil)
        #expect(unreadable(Array("[1,2,3]".utf8)) != nil)
    }

    @Test("an overlong transaction id in a verdict is refused, not stored")
    func overlongTransaction() {
        var verdict = Self.verdict
        verdict.transactions = [F.transaction(String(repeating: "9", count: 257), product: "no.ads")]
        let message = unreadable(MessageCodec().encode(verdict))
        #expect(message?.code == "invalid_identifier")
        #expect(message?.accountID == "a1")
    }

    @Test("the catalog maps products to entitlements; a bad catalog names the product and the problem")
    func catalog() throws {
        let catalog = try Catalog.load(
            json: Data(
                #"{"bundle_ids":["x"],"products":[{"id":"m","type":"auto_renewable","entitlements":["premium","ad_free"]},{"id":"c","type":"consumable"},{"id":"n","type":"non_consumable"}]}"#
                    .utf8), for: .entitlements)
        #expect(catalog.entitlements(of: "m", type: .autoRenewable) == ["premium", "ad_free"])
        #expect(catalog.entitlements(of: "n", type: .nonConsumable) == ["n"])
        #expect(catalog.entitlements(of: "c", type: .consumable) == [])
        #expect(catalog.type(of: "unknown", expiresDate: nil) == .nonConsumable)
        #expect(catalog.type(of: "unknown", expiresDate: Date()) == .autoRenewable)
        for (json, fragment) in [
            (#"[]"#, "not a JSON object"), (#"{"products":[{"id":"m","type":"lifetime"}]}"#, "product m"),
            (#"{"products":[{"id":"c","type":"consumable","entitlements":["x"]}]}"#, "consumable"),
            (#"{"products":[{"type":"consumable"}]}"#, "products[0]"),
            (#"{"products":[{"id":"m","type":"auto_renewable","entitlements":[1]}]}"#, "entitlements"),
        ] {
            #expect(throws: CatalogError.self) { try Catalog.load(json: Data(json.utf8), for: .entitlements) }
            do {
                _ = try Catalog.load(json: Data(json.utf8), for: .entitlements)
            } catch {
                #expect(error.description.contains(fragment), "\(error.description)")
            }
        }
    }

    @Test("tokens: labelled or not, compared whole; short, spaced or duplicate tokens refuse the file")
    func tokens() throws {
        let tokens = try AccessTokens(
            contents: "# support staff\nalice:aaaaaaaaaaaaaaaaaaaaaaaaaaaa\n\nbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\n")
        #expect(tokens.count == 2)
        #expect(tokens.authenticate("aaaaaaaaaaaaaaaaaaaaaaaaaaaa") == "alice")
        #expect(tokens.authenticate("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb") == "token-4")
        #expect(tokens.authenticate("aaaaaaaaaaaaaaaaaaaaaaaaaaa") == nil)
        #expect(tokens.authenticate("aaaaaaaaaaaaaaaaaaaaaaaaaaaaa") == nil)
        #expect(tokens.authenticate("") == nil)
        #expect(AccessTokens.bearerToken(in: "Bearer abc") == "abc")
        #expect(AccessTokens.bearerToken(in: "bearer  abc ") == "abc")
        #expect(AccessTokens.bearerToken(in: "Basic abc") == nil)
        #expect(AccessTokens.bearerToken(in: nil) == nil)
        for contents in [
            "short", "", "# only a comment", "a:has space in it 0123456789abcdef",
            "x:\(String(repeating: "a", count: 30))\nx:\(String(repeating: "b", count: 30))",
        ] {
            do {
                _ = try AccessTokens(contents: contents)
                Issue.record("accepted: \(contents.prefix(10))")
            } catch {
                #expect(!error.description.contains("aaaa"))
            }
        }
    }

    @Test("the entitlements command reads the shared key table: defaults, required files, secrets")
    func configuration() throws {
        let environment = [
            "VERIFY_CATALOG_FILE": "/etc/catalog.json", "VERIFY_ENTITLEMENTS_TOKENS_FILE": "/run/tokens",
        ]
        let defaults = try EntitlementsConfiguration.load(arguments: [], environment: environment)
        #expect(defaults.port == 8090)
        #expect(defaults.groupID == "verify-entitlements")
        #expect(defaults.verdictsTopic == "receipt-verdicts")
        #expect(defaults.eventsTopic == "entitlement-events")
        #expect(defaults.storeURL == "sqlite:verify-entitlements.sqlite")
        let flags = try EntitlementsConfiguration.load(
            arguments: ["--entitlements-port", "9000", "--entitlements-store-url=postgres://u@db/e"],
            environment: environment)
        #expect(flags.port == 9000 && flags.storeURL == "postgres://u@db/e")
        func problem(_ extra: [String: String], _ arguments: [String] = []) -> String? {
            do {
                _ = try EntitlementsConfiguration.load(
                    arguments: arguments, environment: environment.merging(extra) { $1 },
                    readFile: { _ in "s3cret-value" })
                return nil
            } catch {
                return error.key
            }
        }
        #expect(problem(["VERIFY_ENTITLEMENTS_TOKENS_FILE": ""]) == "entitlements_tokens_file")
        #expect(problem(["VERIFY_ENTITLEMENTS_STORE_URL": "mysql://x"]) == "entitlements_store_url")
        #expect(problem(["VERIFY_ENTITLEMENTS_PORT": "99999"]) == "entitlements_port")
        #expect(
            problem(["VERIFY_ENTITLEMENTS_WEBHOOK_URLS": "https://hooks.example/x"]) == "entitlements_webhook_secret")
        #expect(
            problem(["VERIFY_ENTITLEMENTS_WEBHOOK_URLS": "ftp://x", "VERIFY_ENTITLEMENTS_WEBHOOK_SECRET": "k"])
                == "entitlements_webhook_urls")
        #expect(problem([:], ["--entitlements-webhook-secret", "k"]) == "entitlements_webhook_secret")
        #expect(problem([:], ["--max-in-flight", "3"]) == "--max-in-flight")
        let withSecret = try EntitlementsConfiguration.load(
            arguments: [],
            environment: environment.merging([
                "VERIFY_ENTITLEMENTS_WEBHOOK_URLS": "https://a.example/h, https://b.example/h",
                "VERIFY_ENTITLEMENTS_WEBHOOK_SECRET_FILE": "/run/hook",
            ]) { $1 }, readFile: { _ in "k3y\n" })
        #expect(withSecret.webhookURLs == ["https://a.example/h", "https://b.example/h"])
        #expect(withSecret.webhookSecret == "k3y")
    }

    @Test("docs/CONFIGURATION.md carries the entitlements section generated from its key table")
    func reference() throws {
        let url = TestEnvironment.packageRoot.appendingPathComponent("docs/CONFIGURATION.md")
        let onDisk = try String(contentsOf: url, encoding: .utf8)
        let section = EntitlementsConfiguration.table.referenceMarkdown(heading: "## `verify-worker entitlements`")
        #expect(onDisk.contains(section), "regenerate with `verify-worker config-reference`")
    }
}
