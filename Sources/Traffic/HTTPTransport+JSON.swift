import StoreHTTP

extension HTTPTransport {
    /// POSTs a JSON body (`Content-Type: application/json`): how the harness drives the services it started (the
    /// simulator's control endpoints, the gateway, a worker's operations port).
    package func postJSON(_ url: String, body: [UInt8], timeout: Duration) async throws -> TransportResponse {
        try await execute(
            TransportRequest(
                method: .post, url: url, headers: [("Content-Type", "application/json")], body: body, timeout: timeout))
    }
}
