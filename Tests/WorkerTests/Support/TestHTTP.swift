import AppleClients
import Foundation
import StoreHTTP

/// The test run's small HTTP calls (simulator endpoints, a child's `/metrics`), through the project's own curl
/// engine rather than URLSession: on Linux URLSession watches curl's sockets with dispatch sources, and a socket
/// closed under its source crashes the process in libdispatch (`_dispatch_event_loop_drain`, a known
/// FoundationNetworking problem; connection refused and timeouts are its usual triggers, which a test polling a
/// starting or stopped child meets all the time). One engine serves the whole run.
enum TestHTTP {
    static let engine = Result { try CurlHTTPEngine() }

    static func execute(_ request: TransportRequest) async throws -> TransportResponse {
        try await engine.get().execute(request)
    }

    /// Status and body of a GET, or nil when nothing answered.
    static func get(_ url: String, timeout: Duration = .seconds(5)) async -> (status: Int, body: String)? {
        guard let response = try? await execute(TransportRequest(url: url, timeout: timeout)) else { return nil }
        return (response.status, String(decoding: response.body, as: UTF8.self))
    }

    /// Status of a POST of a JSON body.
    static func post(_ url: String, json: String, timeout: Duration = .seconds(30)) async throws -> Int {
        try await execute(
            TransportRequest(
                method: .post, url: url, headers: [("Content-Type", "application/json")], body: Array(json.utf8),
                timeout: timeout)
        ).status
    }
}
