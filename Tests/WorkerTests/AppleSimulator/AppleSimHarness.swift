import AppleClients
import AppleSimulator
import Crypto
import Foundation
import Logging
import StoreHTTP
import Testing

/// An in-process simulator on a free port, and a small JSON client for it.
struct AppleSimHarness {
    let simulator: AppleSimulator
    let task: Task<Void, any Error>
    let base: URL

    /// Starts a simulator, runs `body`, and stops the simulator whatever happens.
    static func with<T>(
        _ configure: (inout AppleSimulatorConfiguration) -> Void = { _ in },
        _ body: (AppleSimHarness) async throws -> T
    ) async throws -> T {
        let harness = try await start(configure)
        do {
            let result = try await body(harness)
            await harness.stop()
            return result
        } catch {
            await harness.stop()
            throw error
        }
    }

    static func start(_ configure: (inout AppleSimulatorConfiguration) -> Void = { _ in }) async throws -> Self {
        var configuration = AppleSimulatorConfiguration()
        // Stopping by cancellation makes Hummingbird log "Waiting on child channel: CancellationError()".
        configuration.logger.logLevel = .critical
        configuration.pki = try sharedPKI.get()
        configure(&configuration)
        let simulator = try AppleSimulator(configuration: configuration)
        let task = Task { try await simulator.run() }
        let port = try await simulator.waitUntilReady()
        return AppleSimHarness(
            simulator: simulator, task: task, base: URL(string: "http://127.0.0.1:\(port)")!)
    }

    /// One PKI for every in-process simulator of the test run (RSA key generation is slow in debug builds).
    /// Tests that need a fresh PKI set `configuration.pki = nil`.
    static let sharedPKI = Result { try SimulatorPKI.generate() }

    func stop() async {
        task.cancel()
        _ = await task.result
    }

    // MARK: HTTP

    struct Reply {
        var status: Int
        var data: Data
        var headers: [AnyHashable: Any]
        var json: [String: Any] { ((try? JSONSerialization.jsonObject(with: data)) as? [String: Any]) ?? [:] }
    }

    func request(
        _ method: String, _ path: String, body: Data? = nil, headers: [String: String] = [:]
    ) async throws -> Reply {
        let transportMethod = try #require(TransportRequest.Method(rawValue: method), "method \(method)")
        var requestHeaders = headers.map { (name: $0.key, value: $0.value) }
        if body != nil { requestHeaders.append((name: "Content-Type", value: "application/json")) }
        let response = try await TestHTTP.execute(
            TransportRequest(
                method: transportMethod, url: base.absoluteString + "/" + path, headers: requestHeaders,
                body: body.map { Array($0) }, timeout: .seconds(60)))
        var replyHeaders: [AnyHashable: Any] = [:]
        for header in response.headers { replyHeaders[header.name] = header.value }
        return Reply(status: response.status, data: Data(response.body), headers: replyHeaders)
    }

    func post(_ path: String, _ object: [String: Any]) async throws -> Reply {
        try await request("POST", path, body: JSONSerialization.data(withJSONObject: object))
    }

    func mint(
        bundle: String = "com.example.app", product: String = "com.example.app.coins", format: String,
        environment: String, extra: [String: Any] = [:]
    ) async throws -> [String: Any] {
        var object: [String: Any] = [
            "bundle_id": bundle, "product_id": product, "format": format, "environment": environment,
        ]
        object.merge(extra) { _, new in new }
        let reply = try await post("sim/mint", object)
        #expect(reply.status == 200, "mint failed: \(String(decoding: reply.data, as: UTF8.self))")
        return reply.json
    }

    func verify(
        _ receipt: String, sandbox: Bool, password: String? = nil, excludeOld: Bool? = nil
    ) async throws
        -> [String: Any]
    {
        var object: [String: Any] = ["receipt-data": receipt]
        if let password { object["password"] = password }
        if let excludeOld { object["exclude-old-transactions"] = excludeOld }
        let reply = try await post(sandbox ? "sandbox/verifyReceipt" : "verifyReceipt", object)
        #expect(reply.status == 200)
        return reply.json
    }

    /// A Server API bearer token shaped like App Store Connect's.
    static func bearerToken(
        key: P256.Signing.PrivateKey = .init(), bundle: String = "com.example.app"
    ) throws
        -> String
    {
        func b64url(_ data: Data) -> String {
            data.base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        }
        let now = Int(Date().timeIntervalSince1970)
        let header = b64url(Data(#"{"alg":"ES256","kid":"SIMKEY1234","typ":"JWT"}"#.utf8))
        let claims = b64url(
            Data(
                #"{"iss":"57246542-96fe-1a63-e053-0824d011072a","iat":\#(now),"exp":\#(now + 1200),"aud":"appstoreconnect-v1","bid":"\#(bundle)"}"#
                    .utf8))
        let signature = try key.signature(for: Data("\(header).\(claims)".utf8))
        return "Bearer \(header).\(claims).\(b64url(signature.rawRepresentation))"
    }
}

/// A random source that replays fixed numbers, so fault ratios decide deterministically.
struct AppleSimFixedRandom: SimulatorRandomSource {
    let value: Double
    init(_ value: Double) { self.value = value }
    func nextUnit() -> Double { value }
}
