import Foundation
import RateLimiter
import StoreHTTP

/// The service account's access token: exchanged at the token URL for a signed assertion, cached, and exchanged
/// again `refreshMargin` before it expires (or at once after the API refused it). Concurrent callers share one
/// exchange.
public actor GooglePlayAccessTokens {
    /// What an exchange produced.
    public enum Result: Sendable {
        /// A token to send as `Authorization: Bearer …`.
        case token(String)
        /// The token endpoint refused the account's key: a configuration fault.
        case refused(GooglePlayAPIError)
        /// The token endpoint could not answer now.
        case unavailable(GooglePlayRetryAdvice)
        /// The token endpoint's answer was not Google's JSON, or the transport failed for good.
        case failed(GooglePlayAPIError)
    }

    private let account: GooglePlayServiceAccount
    private let tokenURL: String
    private let transport: any HTTPTransport
    private let now: @Sendable () -> Date
    private let refreshMargin: Duration
    private let admission: Admission?
    private var cached: (token: String, expires: Date)?
    private var exchange: Task<Result, Never>?
    /// Exchanges made so far (tests and metrics).
    public private(set) var exchanges = 0

    /// Asks leave to make one exchange: a function to report how it ended, or nil when leave is refused.
    public typealias Admission = @Sendable () async -> (@Sendable (CallOutcome) -> Void)?

    /// Exchanges through `gate`'s `token` endpoint (``StoreEndpoint/playToken``), so a refresh loop or a token
    /// endpoint in trouble meets the same rate, breaker and `Retry-After` as the API calls.
    public static func admission<C: GateClock>(through gate: AppleCallGate<C>) -> Admission where C.Instant: Sendable {
        {
            guard let permit = try? await gate.acquire(.playToken) else { return nil }
            return { outcome in gate.report(permit, outcome) }
        }
    }

    /// - Parameters:
    ///   - now: the wall clock, injected so tests move time. Default: the system clock.
    ///   - refreshMargin: how long before expiry a token is replaced. Default: 5 minutes.
    ///   - admission: leave for each exchange, e.g. ``admission(through:)``. Default: none asked.
    public init(
        account: GooglePlayServiceAccount, tokenURL: String, transport: any HTTPTransport,
        now: @escaping @Sendable () -> Date = { Date() }, refreshMargin: Duration = .seconds(300),
        admission: Admission? = nil
    ) {
        self.admission = admission
        self.account = account
        self.tokenURL = tokenURL
        self.transport = transport
        self.now = now
        self.refreshMargin = refreshMargin
    }

    /// A valid token: the cached one while it has more than the margin left, else a new exchange.
    public func token() async -> Result {
        if let cached, now().addingTimeInterval(refreshMargin.seconds) < cached.expires {
            return .token(cached.token)
        }
        return await refresh()
    }

    /// Forgets `token` if it is the cached one (the API refused it) and returns a fresh one.
    public func replace(_ token: String) async -> Result {
        if cached?.token == token { cached = nil }
        return await self.token()
    }

    private func refresh() async -> Result {
        if let exchange { return await exchange.value }
        let task = Task { await self.exchangeAssertion() }
        exchange = task
        let result = await task.value
        exchange = nil
        return result
    }

    private func exchangeAssertion() async -> Result {
        guard let admission else { return await exchangeAssertion(report: { _ in }) }
        guard let report = await admission() else {
            return .unavailable(GooglePlayRetryAdvice(reason: .gate("token endpoint")))
        }
        return await exchangeAssertion(report: report)
    }

    private func exchangeAssertion(report: @Sendable (CallOutcome) -> Void) async -> Result {
        let started = ContinuousClock.now
        let result = await exchangeAssertionUngated()
        switch result {
        case .token, .refused, .failed:
            report(.success(latency: started.duration(to: .now)))
        case .unavailable(let advice):
            if case .httpStatus(let status) = advice.reason, status == 429 || status == 503 {
                report(.throttled(retryAfter: advice.retryAfter))
            } else if advice.reason == .transport(.timeout) {
                report(.timeout)
            } else {
                report(.failure)
            }
        }
        return result
    }

    private func exchangeAssertionUngated() async -> Result {
        exchanges += 1
        let issuedAt = now()
        let assertion: String
        do {
            assertion = try account.assertion(audience: tokenURL, issuedAt: issuedAt)
        } catch {
            return .failed(GooglePlayAPIError(code: .invalidRequest, detail: "the assertion could not be signed"))
        }
        let body = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)"
        let request = TransportRequest(
            method: .post, url: tokenURL,
            headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json")],
            body: Array(body.utf8))
        let response: TransportResponse
        do {
            response = try await transport.execute(request)
        } catch let error as HTTPTransportError {
            if error.isRetryable { return .unavailable(GooglePlayRetryAdvice(reason: .transport(error.code))) }
            return .failed(GooglePlayAPIError(code: .transport, detail: "token endpoint: \(error.code)"))
        } catch {
            return .unavailable(GooglePlayRetryAdvice(reason: .transport(.cancelled)))
        }
        let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
        switch response.status {
        case 200:
            guard let token = object?["access_token"] as? String, token.isEmpty == false,
                let expiresIn = (object?["expires_in"] as? NSNumber)?.doubleValue
            else {
                return .failed(
                    GooglePlayAPIError(
                        code: .malformedResponse, httpStatus: 200, detail: "token endpoint: no access_token"))
            }
            cached = (token, issuedAt.addingTimeInterval(expiresIn))
            return .token(token)
        case 400, 401, 403:
            // Google answers 400 invalid_grant for a key it does not know or a bad signature, 401 for a bad client.
            return .refused(
                GooglePlayAPIError(
                    code: .credentialsRefused, httpStatus: response.status, googleStatus: object?["error"] as? String,
                    detail: "the token endpoint refused \(account)"))
        case 429, 500...599:
            return .unavailable(
                GooglePlayRetryAdvice(
                    reason: .httpStatus(response.status),
                    retryAfter: RetryAfter.fromHTTPHeader(response.header("Retry-After"), now: now())))
        default:
            return .failed(
                GooglePlayAPIError(
                    code: .unexpectedStatus, httpStatus: response.status, detail: "token endpoint"))
        }
    }
}

extension Duration {
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) * 1e-18
    }
}
