/// Performs one HTTP exchange. `CurlHTTPEngine` is the production implementation; tests may inject doubles.
///
/// Implementations throw ``HTTPTransportError`` for transport failures and `CancellationError` when the
/// calling task is cancelled; an HTTP error status is a normal ``TransportResponse``, not an error.
public protocol HTTPTransport: Sendable {
    /// Sends `request` and returns the whole response.
    func execute(_ request: TransportRequest) async throws -> TransportResponse
}

/// One HTTP request. Bodies are small (receipts, JSON), so they are held in memory.
public struct TransportRequest: Sendable {
    /// The HTTP methods the Apple clients need.
    public enum Method: String, Sendable {
        case get = "GET"
        case post = "POST"
        /// Send Consumption Information and Set App Account Token replace a resource.
        case put = "PUT"
    }

    /// The method. Default: `GET`.
    public var method: Method
    /// The absolute URL (`https://…`, or `http://…` for local tests and the simulator).
    public var url: String
    /// Request headers as sent, in order.
    public var headers: [(name: String, value: String)]
    /// The request body, if any.
    public var body: [UInt8]?
    /// A total time limit for this request that overrides the engine's default. Default: nil.
    public var timeout: Duration?

    /// Creates a request.
    public init(
        method: Method = .get, url: String, headers: [(name: String, value: String)] = [], body: [UInt8]? = nil,
        timeout: Duration? = nil
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }
}

/// One complete HTTP response.
public struct TransportResponse: Sendable {
    /// The HTTP status code (200, 404, 503…).
    public var status: Int
    /// Response headers in the order received (of the final response, not of `100 Continue`).
    public var headers: [(name: String, value: String)]
    /// The whole body.
    public var body: [UInt8]

    /// Creates a response.
    public init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The first value of the header `name`, compared case-insensitively.
    public func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first { $0.name.lowercased() == lowered }?.value
    }
}
