/// A failure to obtain an HTTP response: the request never got a complete answer.
///
/// An HTTP error status is not a transport error. `description` names the host at most: never a body, a header
/// value or a credential.
public struct HTTPTransportError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, in categories that decide between retrying and giving up.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        fileprivate enum Base: String, Sendable {
            case connectFailed = "connect failed"
            case timeout = "timeout"
            case tlsHandshakeFailed = "TLS handshake failed"
            case tlsVerificationFailed = "TLS verification failed"
            case connectionLost = "connection lost"
            case responseTooLarge = "response too large"
            case cancelled = "cancelled"
            case invalidRequest = "invalid request"
            case engineShutDown = "engine shut down"
            case other = "transport failure"
        }

        fileprivate let base: Base

        /// The TCP connection could not be opened (refused, unreachable, name not resolved).
        public static let connectFailed = Code(base: .connectFailed)
        /// The connect or total time limit passed.
        public static let timeout = Code(base: .timeout)
        /// The TLS handshake broke off (often a reset during the handshake); the peer was not judged.
        public static let tlsHandshakeFailed = Code(base: .tlsHandshakeFailed)
        /// The peer's certificate chain or host name did not verify. Retrying cannot help.
        public static let tlsVerificationFailed = Code(base: .tlsVerificationFailed)
        /// The connection closed or failed while sending or receiving.
        public static let connectionLost = Code(base: .connectionLost)
        /// The body exceeded the configured limit; the transfer was aborted.
        public static let responseTooLarge = Code(base: .responseTooLarge)
        /// The transfer was aborted on purpose.
        public static let cancelled = Code(base: .cancelled)
        /// The request itself is unusable (bad URL, forbidden scheme).
        public static let invalidRequest = Code(base: .invalidRequest)
        /// The engine was shut down before the request finished.
        public static let engineShutDown = Code(base: .engineShutDown)
        /// Any other libcurl failure.
        public static let other = Code(base: .other)

        /// Whether the same request may succeed later.
        public var isRetryable: Bool {
            switch base {
            case .connectFailed, .timeout, .tlsHandshakeFailed, .connectionLost: true
            case .tlsVerificationFailed, .responseTooLarge, .cancelled, .invalidRequest, .engineShutDown, .other:
                false
            }
        }

        public var description: String { base.rawValue }
    }

    /// The category.
    public var code: Code
    /// libcurl's own result code, when the failure came from libcurl.
    public var curlCode: Int?
    /// A short explanation (libcurl's error text, which names host and port but never a body).
    public var detail: String
    /// Where the error was raised.
    public var file: String
    /// Where the error was raised.
    public var line: Int

    /// Creates an error.
    public init(code: Code, curlCode: Int? = nil, detail: String, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.curlCode = curlCode
        self.detail = detail
        self.file = file
        self.line = line
    }

    /// Whether the same request may succeed later.
    public var isRetryable: Bool { code.isRetryable }

    public var description: String {
        let curl = curlCode.map { " (curl \($0))" } ?? ""
        return "HTTP transport: \(code)\(curl): \(detail)"
    }
}
