import Messages
import StoreHTTP

/// The result of one logical call to Apple (environment hops included): a final answer, advice to retry
/// later, or a failure that retrying cannot fix.
///
/// The clients never sleep and retry on their own: the caller (the rate limiter) decides when to try again.
public enum AppleOutcome<Answer: Sendable>: Sendable {
    /// Apple answered for good (this includes definitive rejections such as verifyReceipt 21003).
    case answered(Answer)
    /// The call may succeed later.
    case retryable(AppleRetryAdvice)
    /// The call cannot succeed as it is (broken response, TLS verification failure, bad signature…).
    case failed(AppleClientError)

    /// The answer, if there is one.
    public var answer: Answer? {
        if case .answered(let answer) = self { return answer }
        return nil
    }

    /// Whether trying again later may help.
    public var isRetryable: Bool {
        if case .retryable = self { return true }
        return false
    }
}

/// Why a call should be repeated, and not before when.
public struct AppleRetryAdvice: Sendable, Hashable, CustomStringConvertible {
    /// What made the call fail temporarily.
    public enum Reason: Sendable, Hashable, CustomStringConvertible {
        /// A verifyReceipt status that asks for a retry (21005, 21009, retryable 211xx).
        case receiptStatus(Int)
        /// A Server API error code that Apple marks retryable (4040002, 4040004, 4040006, 5000001).
        case apiErrorCode(Int)
        /// An HTTP status such as 429, 500 or 503.
        case httpStatus(Int)
        /// The request did not get a complete response.
        case transport(HTTPTransportError.Code)

        public var description: String {
            switch self {
            case .receiptStatus(let status): "verifyReceipt status \(status)"
            case .apiErrorCode(let code): "App Store Server API error \(code)"
            case .httpStatus(let status): "HTTP \(status)"
            case .transport(let code): "transport: \(code)"
            }
        }
    }

    /// What made the call fail temporarily.
    public var reason: Reason
    /// Apple's `Retry-After`, as a time span from when the answer arrived; nil when Apple gave none.
    public var retryAfter: Duration?
    /// The environment the failing request was sent to.
    public var environment: AppleEnvironment?

    /// Creates advice.
    public var description: String {
        var text = "retryable (\(reason))"
        if let retryAfter { text += ", retry after \(retryAfter)" }
        return text
    }
}

/// A failure of a call to Apple that retrying cannot fix. The description never holds a receipt, a shared
/// secret, a token or a private key.
public struct AppleClientError: Error, Sendable, CustomStringConvertible {
    /// The kind of failure.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        fileprivate let name: String

        /// The response was not the JSON Apple documents (not JSON, missing status, wrong structure).
        public static let malformedResponse = Code(name: "malformed response")
        /// The transport failed in a way retrying cannot fix (TLS verification, oversized response…).
        public static let transport = Code(name: "transport failure")
        /// An HTTP status that is neither success nor retryable (400, 403, 404…).
        public static let httpStatus = Code(name: "unexpected HTTP status")
        /// A Server API error that is final (invalid transaction id, transaction not found…).
        public static let apiError = Code(name: "App Store Server API error")
        /// A signed payload in the answer failed verification.
        public static let signatureInvalid = Code(name: "signed payload rejected")
        /// The request could not be built (bad configuration or bad input).
        public static let invalidRequest = Code(name: "invalid request")

        public var description: String { name }
    }

    /// The kind of failure.
    public var code: Code
    /// Details safe to log.
    public var detail: String
    /// The HTTP status, when there was a response.
    public var httpStatus: Int?
    /// Apple's numeric error code (Server API `errorCode`), when there was one.
    public var appleErrorCode: Int?
    /// Where the error was raised.
    public var file: String
    /// Where the error was raised.
    public var line: Int

    /// Creates an error.
    public init(
        code: Code, detail: String, httpStatus: Int? = nil, appleErrorCode: Int? = nil, file: String = #fileID,
        line: Int = #line
    ) {
        self.code = code
        self.detail = detail
        self.httpStatus = httpStatus
        self.appleErrorCode = appleErrorCode
        self.file = file
        self.line = line
    }

    public var description: String {
        var text = "Apple client: \(code): \(detail)"
        if let httpStatus { text += " (HTTP \(httpStatus))" }
        if let appleErrorCode { text += " (Apple error \(appleErrorCode))" }
        return text
    }
}
