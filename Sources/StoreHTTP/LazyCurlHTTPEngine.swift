import Synchronization

/// A ``CurlHTTPEngine`` made at the first request, so a part that may never send (a simulator without a
/// notification URL or a push endpoint) runs no engine thread. A failure to make the engine is thrown by that
/// request, and the next request tries again.
public final class LazyCurlHTTPEngine: HTTPTransport {
    private let engine = Mutex<CurlHTTPEngine?>(nil)

    public init() {}

    /// Makes the engine if it is not there yet, then sends `request` through it (its errors and cancellation).
    public func execute(_ request: TransportRequest) async throws -> TransportResponse {
        let engine = try self.engine.withLock { current in
            if let current { return current }
            let created = try CurlHTTPEngine()
            current = created
            return created
        }
        return try await engine.execute(request)
    }
}
