import AppleClients
import Logging
import Metrics
import Operations
import StoreHTTP
import Synchronization
import Testing

@Suite("Operations port", .timeLimit(.minutes(2)))
struct OperationsServerTests {
    @Test("/healthz answers, /readyz follows readiness with its reasons, /metrics shows recorded metrics")
    func endpoints() async throws {
        let ready = Mutex(false)
        let server = OperationsServer(
            configuration: OperationsServerConfiguration(host: "127.0.0.1", port: 0),
            logger: Logger(label: "ops-test"),
            readiness: { ready.withLock { $0 } ? .ready : .notReady("not_in_group", "ledger_unreachable") })
        let task = Task { try await server.run() }
        defer { task.cancel() }
        let port = try #require(await server.waitUntilListening())
        let engine = try CurlHTTPEngine()
        defer { engine.shutdown() }
        func get(_ path: String) async throws -> (Int, String) {
            let response = try await engine.execute(
                TransportRequest(method: .get, url: "http://127.0.0.1:\(port)\(path)"))
            return (response.status, String(decoding: response.body, as: UTF8.self))
        }

        #expect(try await get("/healthz").0 == 200)
        let notReady = try await get("/readyz")
        #expect(notReady.0 == 503)
        #expect(notReady.1.contains("not_in_group") && notReady.1.contains("ledger_unreachable"))
        ready.withLock { $0 = true }
        #expect(try await get("/readyz").0 == 200)

        Metrics.Counter(label: "verify_ops_test_total", dimensions: [("outcome", "granted")]).increment(by: 3)
        let metrics = try await get("/metrics")
        #expect(metrics.0 == 200)
        #expect(metrics.1.contains(#"verify_ops_test_total{outcome="granted"} 3"#), "\(metrics.1.prefix(500))")
        #expect(try await get("/nothing-here").0 == 404)
    }
}
