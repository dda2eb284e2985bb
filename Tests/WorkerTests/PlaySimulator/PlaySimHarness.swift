import Crypto
import Foundation
import Logging
import Messages
import PlaySimulator
import StoreHTTP
import Testing
import _CryptoExtras

/// An in-process Google Play simulator on a free port with a manual clock, a service account it issued, and a small
/// JSON client for it.
struct PlaySimHarness {
    static let package = "com.example.app"

    let simulator: PlaySimulator
    let task: Task<Void, any Error>
    let base: String
    let account: PlayServiceAccount

    var clock: PlaySimulatorClock { simulator.clock }

    /// Starts a simulator, runs `body`, and stops the simulator whatever happens.
    static func with<T>(
        _ configure: (inout PlaySimulatorConfiguration) -> Void = { _ in },
        _ body: (PlaySimHarness) async throws -> T
    ) async throws -> T {
        var configuration = PlaySimulatorConfiguration()
        // Stopping by cancellation makes Hummingbird log "Waiting on child channel: CancellationError()".
        configuration.logger.logLevel = .critical
        configuration.clock = .manual()
        configuration.licensingKeys = [package: try sharedKeys.get().licensing]
        configure(&configuration)
        let simulator = PlaySimulator(configuration: configuration)
        let task = Task { try await simulator.run() }
        let port = try await simulator.waitUntilReady()
        let harness = PlaySimHarness(
            simulator: simulator, task: task, base: "http://127.0.0.1:\(port)",
            account: try simulator.issueServiceAccount(key: try sharedKeys.get().serviceAccount))
        do {
            let result = try await body(harness)
            await harness.stop()
            return result
        } catch {
            await harness.stop()
            throw error
        }
    }

    /// One licensing key, one service-account key and one stranger's key for the whole run.
    static let sharedKeys = Result {
        (
            licensing: try _RSA.Signing.PrivateKey(keySize: .bits2048),
            serviceAccount: try _RSA.Signing.PrivateKey(keySize: .bits2048),
            stranger: try _RSA.Signing.PrivateKey(keySize: .bits2048)
        )
    }

    func stop() async {
        task.cancel()
        _ = await task.result
    }

    // MARK: HTTP

    struct Reply {
        var status: Int
        var data: Data
        var headers: [String: String]
        var json: [String: Any] { ((try? JSONSerialization.jsonObject(with: data)) as? [String: Any]) ?? [:] }
        /// `error.errors[0].reason` of Google's error envelope.
        var reason: String? {
            (((json["error"] as? [String: Any])?["errors"] as? [[String: Any]])?.first?["reason"]) as? String
        }
    }

    func request(
        _ method: String, _ path: String, body: [UInt8]? = nil, contentType: String = "application/json",
        bearer: String? = nil
    ) async throws -> Reply {
        let transportMethod = try #require(TransportRequest.Method(rawValue: method), "method \(method)")
        var headers: [(name: String, value: String)] = []
        if body != nil { headers.append((name: "Content-Type", value: contentType)) }
        if let bearer { headers.append((name: "Authorization", value: "Bearer \(bearer)")) }
        let response = try await TestHTTP.execute(
            TransportRequest(
                method: transportMethod, url: base + "/" + path, headers: headers, body: body,
                timeout: .seconds(60)))
        var replyHeaders: [String: String] = [:]
        for header in response.headers { replyHeaders[header.name.lowercased()] = header.value }
        return Reply(status: response.status, data: Data(response.body), headers: replyHeaders)
    }

    func post(_ path: String, _ object: [String: Any], bearer: String? = nil) async throws -> Reply {
        try await request("POST", path, body: Array(try JSONSerialization.data(withJSONObject: object)), bearer: bearer)
    }

    func get(_ path: String, bearer: String? = nil) async throws -> Reply {
        try await request("GET", path, bearer: bearer)
    }

    /// Mints over `POST /sim/mint` and returns its answer.
    func mint(
        product: String = "com.example.app.coins", type: String = "consumable", extra: [String: Any] = [:]
    ) async throws -> [String: Any] {
        var object: [String: Any] = ["package_name": Self.package, "product_id": product, "type": type]
        object.merge(extra) { _, new in new }
        let reply = try await post("sim/mint", object)
        #expect(reply.status == 200, "mint failed: \(String(decoding: reply.data, as: UTF8.self))")
        return reply.json
    }

    func truth(_ token: String) async throws -> [String: Any] {
        let reply = try await get("sim/purchases/\(token)")
        #expect(reply.status == 200)
        return reply.json
    }

    func advance(days: Double) { clock.advance(by: days * 86_400) }

    // MARK: OAuth

    /// A service-account assertion as Google's client libraries make it: RS256, `kid`, and the claims.
    func assertion(
        key: _RSA.Signing.PrivateKey? = nil, audience: String? = nil,
        scope: String = "https://www.googleapis.com/auth/androidpublisher",
        issuedAt: Date? = nil, lifetime: TimeInterval = 3600
    ) throws -> String {
        let iat = Int((issuedAt ?? clock.now()).timeIntervalSince1970)
        let header = Base64URL.encode(
            try JSONSerialization.data(withJSONObject: ["alg": "RS256", "typ": "JWT", "kid": account.privateKeyId]))
        let claims = Base64URL.encode(
            try JSONSerialization.data(withJSONObject: [
                "iss": account.clientEmail, "scope": scope, "aud": audience ?? account.tokenURI, "iat": iat,
                "exp": iat + Int(lifetime),
            ]))
        let signature = try (key ?? account.privateKey).signature(
            for: SHA256.hash(data: Data("\(header).\(claims)".utf8)), padding: .insecurePKCS1v1_5)
        return "\(header).\(claims).\(Base64URL.encode(signature.rawRepresentation))"
    }

    /// `POST /token` with an assertion.
    func exchange(_ assertion: String) async throws -> Reply {
        let form = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)"
        return try await request(
            "POST", "token", body: Array(form.utf8), contentType: "application/x-www-form-urlencoded")
    }

    /// A valid access token.
    func accessToken() async throws -> String {
        let reply = try await exchange(try assertion())
        #expect(reply.status == 200, "token: \(String(decoding: reply.data, as: UTF8.self))")
        return try #require(reply.json["access_token"] as? String)
    }

    // MARK: The API's paths

    static let api = "androidpublisher/v3/applications/\(package)/purchases/"

    static func subscriptionPath(_ token: String) -> String { api + "subscriptionsv2/tokens/\(token)" }
    static func productPath(_ token: String) -> String { api + "productsv2/tokens/\(token)" }
    static func acknowledgePath(product: String, _ token: String) -> String {
        api + "products/\(product)/tokens/\(token):acknowledge"
    }
    static func consumePath(product: String, _ token: String) -> String {
        api + "products/\(product)/tokens/\(token):consume"
    }
    static func subscriptionAcknowledgePath(subscription: String, _ token: String) -> String {
        api + "subscriptions/\(subscription)/tokens/\(token):acknowledge"
    }
}
