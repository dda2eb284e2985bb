import Foundation
import Testing

@testable import AppleClients
@testable import StoreHTTP

@Suite("Apple clients: curl header lists", .serialized, .timeLimit(.minutes(2)))
struct AppleClientsHeaderListTests {
    @Test("A reused handle's header list is sent again for the same headers and replaced for others")
    func headerListReuse() async throws {
        // One handle: the list built for the first request is reused by the second, then rebuilt twice.
        let engine = try CurlHTTPEngine(configuration: HTTPEngineConfiguration(easyHandlePoolSize: 1))
        defer { engine.shutdown() }
        try await AppleClientsFakeServer.withRunning { server, base in
            server.setFallback("/h", .json("{}"))
            let first: [(name: String, value: String)] = [("X-A", "1"), ("Content-Type", "application/json")]
            for headers in [first, first, [("X-B", "2")], first] {
                _ = try await engine.execute(
                    TransportRequest(method: .post, url: base + "/h", headers: headers, body: Array("{}".utf8)))
            }
            let seen = server.received(path: "/h")
            #expect(seen.map { $0.headers["x-a"] } == ["1", "1", nil, "1"])
            #expect(seen.map { $0.headers["x-b"] } == [nil, nil, "2", nil])
            #expect(seen.allSatisfy { $0.headers["expect"] == nil })
        }
    }
}
