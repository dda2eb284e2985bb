import AppleClients
import Entitlements
import Foundation
import Logging
import Messages
import Operations
import StoreHTTP
import Testing

/// An entitlement API on a free port over a SQLite store holding the given verdicts, and a client for it.
struct EntitlementAPIHarness {
    static let token = "support-token-0123456789abcdef"
    static let otherToken = "robot-token-abcdef0123456789"
    static let tokensFile = "support:\(token)\nrobot:\(otherToken)\n"

    let store: SQLiteEntitlementStore
    let api: EntitlementAPI
    let port: Int
    let http: CurlHTTPEngine
    let task: Task<Void, any Error>
    let directory: URL

    static func with<T>(
        verdicts: [Verdict] = [], raw: [[UInt8]] = [], limits: RequestLimiter.Limits = .init(),
        now: Date = EntitlementFixtures.at(10 * EntitlementFixtures.day), asOf: Date? = nil,
        tokensFile: String = Self.tokensFile, _ body: (EntitlementAPIHarness) async throws -> T
    ) async throws -> T {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "entitlements-api-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var logger = Logger(label: "entitlements-test")
        logger.logLevel = .critical
        let store = try SQLiteEntitlementStore(path: directory.appendingPathComponent("e.sqlite").path, logger: logger)
        try await store.migrate()
        let reader = VerdictReader()
        var inputs = verdicts.map { ProjectionInput.verdict($0) }
        for (index, bytes) in raw.enumerated() { inputs.append(reader.read(bytes, position: "test/0/\(index)")) }
        if !inputs.isEmpty {
            _ = try await store.project(
                ProjectionBatch(
                    inputs: inputs,
                    positions: [
                        TopicPosition(
                            topic: "receipt-verdicts", partition: 0, nextOffset: Int64(inputs.count),
                            recordTime: asOf ?? now.addingTimeInterval(-90))
                    ]),
                catalog: EntitlementFixtures.catalog, recordedAt: now)
        }
        let api = EntitlementAPI(
            configuration: .init(host: "127.0.0.1", port: 0, limits: limits), store: store,
            catalog: EntitlementFixtures.catalog, tokens: try AccessTokens(contents: tokensFile),
            registry: MetricsBootstrap.registry(), logger: logger, now: { now }, readiness: { .ready })
        let task = Task { try await api.run() }
        guard let port = await api.waitUntilListening() else {
            task.cancel()
            throw EntitlementTestFailure("the entitlement API did not start listening")
        }
        let harness = EntitlementAPIHarness(
            store: store, api: api, port: port, http: try CurlHTTPEngine(), task: task, directory: directory)
        do {
            let result = try await body(harness)
            await harness.stop()
            return result
        } catch {
            await harness.stop()
            throw error
        }
    }

    func stop() async {
        task.cancel()
        _ = await task.result
        http.shutdown()
        await store.close()
        try? FileManager.default.removeItem(at: directory)
    }

    struct Reply {
        var status: Int
        var body: [UInt8]
        var headers: [(name: String, value: String)]
        var json: [String: Any] { ((try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]) ?? [:] }
        var text: String { String(decoding: body, as: UTF8.self) }
        func header(_ name: String) -> String? { headers.first { $0.name.lowercased() == name.lowercased() }?.value }
    }

    /// GET `path` (already percent-encoded) with `token` as a bearer token (nil: no Authorization header).
    func get(_ path: String, token: String? = Self.token, authorization: String? = nil) async throws -> Reply {
        var headers: [(name: String, value: String)] = []
        if let authorization {
            headers.append(("Authorization", authorization))
        } else if let token {
            headers.append(("Authorization", "Bearer \(token)"))
        }
        let response = try await http.execute(
            TransportRequest(url: "http://127.0.0.1:\(port)\(path)", headers: headers, timeout: .seconds(30)))
        return Reply(status: response.status, body: response.body, headers: response.headers)
    }
}

struct EntitlementTestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
