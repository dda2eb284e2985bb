import StoreHTTP

/// The result of one call to the Google Play Developer API, every HTTP status and failure mapped to one case.
///
/// The client never grants or judges: an answer is what Google says about the purchase; the decision reads it.
public enum GooglePlayOutcome<Answer: Sendable>: Sendable {
    /// 200: Google answered (the purchase's state, or an acknowledge or consume accepted).
    case answered(Answer)
    /// 404 (the token never existed for this package) or 410 (it no longer exists): a definitive "no such purchase".
    case purchaseNotFound(status: Int)
    /// 400 on an API call: Google refused the request about this purchase (a malformed token, a product that does not
    /// match): definitive, about the purchase, not about this deployment.
    case rejected(GooglePlayAPIError)
    /// Google refused this deployment's credentials: the token endpoint refused the service account's key (400
    /// `invalid_grant`, 401), the API answered 401 after one refresh, or 403 (the account has no access to the app).
    /// Held like a wrong App Store secret (`StoreAnswer.Status.refusedRequest`): retrying the purchase cannot help,
    /// fixing the configuration can.
    case configurationRefused(GooglePlayAPIError)
    /// The call may succeed later: 429, 5xx, a retryable transport failure or a timeout.
    case retryable(GooglePlayRetryAdvice)
    /// The call failed in a way retrying cannot fix: a body that is not Google's JSON, a TLS verification failure.
    case failed(GooglePlayAPIError)

    /// The answer, if there is one.
    public var answer: Answer? {
        if case .answered(let answer) = self { return answer }
        return nil
    }
}

/// Why a call should be repeated, and not before when.
public struct GooglePlayRetryAdvice: Sendable, Hashable, CustomStringConvertible {
    /// What made the call fail for now.
    public enum Reason: Sendable, Hashable, CustomStringConvertible {
        /// An HTTP status: 429 (quota), 500, 502, 503, 504…
        case httpStatus(Int)
        /// The request got no complete response.
        case transport(HTTPTransportError.Code)
        /// The call gate gave no permit (deadline, open breaker, full queue, spent quota).
        case gate(String)

        public var description: String {
            switch self {
            case .httpStatus(let status): "HTTP \(status)"
            case .transport(let code): "transport: \(code)"
            case .gate(let code): "call gate: \(code)"
            }
        }
    }

    /// What made the call fail for now.
    public var reason: Reason
    /// Google's `Retry-After`, when it sent one.
    public var retryAfter: Duration?

    public var description: String {
        "retryable (\(reason))" + (retryAfter.map { ", retry after \($0)" } ?? "")
    }
}

/// A failure of a call to Google. Its description names the endpoint, the status and Google's error status and
/// message at most: never a token, an access token, an assertion or a key.
public struct GooglePlayAPIError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of failure.
    public enum Code: String, Sendable, Hashable {
        /// The token endpoint refused the service account (`invalid_grant`, `unauthorized_client`, 401).
        case credentialsRefused = "credentials refused"
        /// The API refused the access token twice (401), or the account may not act for the app (403).
        case accessDenied = "access denied"
        /// 400 from the API.
        case badRequest = "bad request"
        /// The body was not the JSON Google documents.
        case malformedResponse = "malformed response"
        /// An HTTP status the API does not document for this call.
        case unexpectedStatus = "unexpected HTTP status"
        /// The transport failed in a way retrying cannot fix (TLS verification, oversized answer).
        case transport = "transport failure"
        /// The request could not be built (a URL that is not one).
        case invalidRequest = "invalid request"
    }

    public var code: Code
    /// The HTTP status, when there was a response.
    public var httpStatus: Int?
    /// Google's error: `error.status` (`INVALID_ARGUMENT`…) or the token endpoint's `error` (`invalid_grant`).
    public var googleStatus: String?
    /// Details safe to log.
    public var detail: String

    public init(code: Code, httpStatus: Int? = nil, googleStatus: String? = nil, detail: String) {
        self.code = code
        self.httpStatus = httpStatus
        self.googleStatus = googleStatus
        self.detail = detail
    }

    public var description: String {
        var text = "Google Play: \(code.rawValue): \(detail)"
        if let httpStatus { text += " (HTTP \(httpStatus))" }
        if let googleStatus { text += " (\(googleStatus))" }
        return text
    }
}
