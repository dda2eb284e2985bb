import CodedErrors
import Foundation
import Logging
import Observability
import RateLimiter
import StoreHTTP
import Synchronization

/// Where the Developer API client sends its calls.
public struct GooglePlayAPIConfiguration: Sendable, Hashable {
    /// The Developer API's base URL. Default: `https://androidpublisher.googleapis.com`.
    public var baseURL: String
    /// The OAuth 2.0 token URL. Default: `https://oauth2.googleapis.com/token`.
    public var tokenURL: String
    /// The time limit of one call. Default: 10 s.
    public var requestTimeout: Duration

    public init(
        baseURL: String = "https://androidpublisher.googleapis.com",
        tokenURL: String = "https://oauth2.googleapis.com/token", requestTimeout: Duration = .seconds(10)
    ) {
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.tokenURL = tokenURL
        self.requestTimeout = requestTimeout
    }
}

/// The Google Play Developer API: the purchase reads, acknowledge and consume, the voided purchases list, each call through the store's call
/// gate (its endpoint's rate, the quota budgets, AIMD, the breaker, `Retry-After` holds), retried on 429, 5xx and
/// transport failures within the retry policy and the caller's deadline, and authorised by the service account's
/// cached access token (refreshed once and the call repeated once when the API answers 401).
///
/// Every outcome is a ``GooglePlayOutcome``; nothing throws, nothing crashes on a body, and no token, access token or
/// key reaches a log line.
public final class GooglePlayAPIClient<C: GateClock>: Sendable where C.Instant: Sendable {
    private let configuration: GooglePlayAPIConfiguration
    private let transport: any HTTPTransport
    private let tokens: GooglePlayAccessTokens
    private let gate: AppleCallGate<C>
    private let clock: C
    private let retryPolicy: RetryPolicy
    private let random: Mutex<SplitMix64>
    private let logger: Logger

    /// - Parameters:
    ///   - gate: Google Play's gate (``AppleCallGateConfiguration/googlePlay(workerID:dailyQuota:minuteQuota:)``).
    ///   - clock: the gate's clock, which the client also sleeps on between retries.
    public init(
        configuration: GooglePlayAPIConfiguration = GooglePlayAPIConfiguration(), transport: any HTTPTransport,
        tokens: GooglePlayAccessTokens, gate: AppleCallGate<C>, clock: C, retryPolicy: RetryPolicy = RetryPolicy(),
        randomSeed: UInt64? = nil, logger: Logger = Logger(label: "verify.google-play")
    ) {
        self.configuration = configuration
        self.transport = transport
        self.tokens = tokens
        self.gate = gate
        self.clock = clock
        self.retryPolicy = retryPolicy
        self.random = Mutex(randomSeed.map { SplitMix64(seed: $0) } ?? SplitMix64())
        self.logger = logger
    }

    // MARK: The calls

    /// `purchases.subscriptionsv2.get`: a subscription's state by its purchase token.
    public func subscription(
        packageName: String, token: String, deadline: C.Instant? = nil
    ) async -> GooglePlayOutcome<GooglePlaySubscriptionPurchase> {
        await call(
            .playSubscriptionRead, method: .get,
            path: "applications/\(Self.segment(packageName))/purchases/subscriptionsv2/tokens/\(Self.segment(token))",
            deadline: deadline, decode: Self.decodeJSON)
    }

    /// `purchases.productsv2.getproductpurchasev2`: a one-time purchase's state by its purchase token.
    public func product(
        packageName: String, token: String, deadline: C.Instant? = nil
    ) async -> GooglePlayOutcome<GooglePlayProductPurchase> {
        await call(
            .playProductRead, method: .get,
            path: "applications/\(Self.segment(packageName))/purchases/productsv2/tokens/\(Self.segment(token))",
            deadline: deadline, decode: Self.decodeJSON)
    }

    /// `purchases.subscriptions.acknowledge` when `subscription`, else `purchases.products.acknowledge`: within three
    /// days of a purchase, or Google refunds it.
    public func acknowledge(
        packageName: String, productID: String, token: String, subscription: Bool, deadline: C.Instant? = nil
    ) async -> GooglePlayOutcome<GooglePlayAccepted> {
        await purchaseCall(
            subscription ? .playSubscriptionAcknowledge : .playProductAcknowledge, packageName: packageName,
            collection: subscription ? "subscriptions" : "products", id: productID, token: token, verb: "acknowledge",
            deadline: deadline)
    }

    /// `purchases.products.consume`: a consumable after its grant, so the customer can buy it again.
    public func consume(
        packageName: String, productID: String, token: String, deadline: C.Instant? = nil
    ) async -> GooglePlayOutcome<GooglePlayAccepted> {
        await purchaseCall(
            .playProductConsume, packageName: packageName, collection: "products", id: productID, token: token,
            verb: "consume", deadline: deadline)
    }

    /// An acknowledge (`{}` as its body) or a consume (no body) of the purchase `token` of product `id` in
    /// `collection` (`products` or `subscriptions`).
    ///
    /// Google answers 400 (`invalidPurchaseState`) to an acknowledge or consume of a purchase already acknowledged or
    /// consumed, as a repeat after a crash between the call and its record is: the purchase is read back once, and
    /// found done, the call counts as accepted. Any other outcome stands.
    private func purchaseCall(
        _ endpoint: StoreEndpoint, packageName: String, collection: String, id: String, token: String, verb: String,
        deadline: C.Instant?
    ) async -> GooglePlayOutcome<GooglePlayAccepted> {
        let consume = verb == "consume"
        let outcome = await call(
            endpoint, method: .post,
            path: "applications/\(Self.segment(packageName))/purchases/\(collection)/\(Self.segment(id))/tokens/"
                + "\(Self.segment(token)):\(verb)",
            body: consume ? nil : Array("{}".utf8), deadline: deadline, decode: Self.accepted)
        guard case .rejected = outcome,
            await isDone(
                packageName: packageName, token: token, subscription: collection == "subscriptions", consumed: consume,
                deadline: deadline)
        else { return outcome }
        return .answered(GooglePlayAccepted())
    }

    /// `orders.reviewrefund`: the developer's answer to a pending refund review of `orderID`, within Google's 24
    /// hours. Google takes one answer per review and refuses a second (400).
    public func reviewRefund(
        packageName: String, orderID: String, review: GooglePlayRefundReview, deadline: C.Instant? = nil
    ) async -> GooglePlayOutcome<GooglePlayAccepted> {
        let body: [UInt8]
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            body = Array(try encoder.encode(review))
        } catch {
            return .failed(GooglePlayAPIError(code: .malformedResponse, detail: "review not encodable"))
        }
        return await call(
            .playOrderReviewRefund, method: .post,
            path: "applications/\(Self.segment(packageName))/orders/\(Self.segment(orderID)):reviewrefund",
            body: body, deadline: deadline, decode: Self.accepted)
    }

    /// `purchases.voidedpurchases.list`: one page of the purchases voided in a window, subscriptions included
    /// (`type=1`). The window is clamped to what Google accepts at the clock's wall time
    /// (``GooglePlayVoidedPurchasesQuery/clamp(start:end:now:)``): Google answers 400 to a `startTime` older than 30
    /// days or an `endTime` in the future, so neither is ever sent. One page is one call through the gate.
    public func voidedPurchases(
        _ query: GooglePlayVoidedPurchasesQuery, deadline: C.Instant? = nil
    ) async -> GooglePlayOutcome<GooglePlayVoidedPurchasesPage> {
        let now = Date(timeIntervalSince1970: Double(clock.unixMillisecondsNow) / 1000)
        let window = GooglePlayVoidedPurchasesQuery.clamp(start: query.startTime, end: query.endTime, now: now)
        var items = [
            "startTime=\(GooglePlayVoidedPurchasesQuery.milliseconds(window.start))",
            "endTime=\(GooglePlayVoidedPurchasesQuery.milliseconds(window.end))", "type=1",
            "maxResults=\(query.maxResults)",
        ]
        if let token = query.pageToken { items.append("token=\(Self.segment(token))") }
        return await call(
            .playVoidedPurchases, method: .get,
            path: "applications/\(Self.segment(query.packageName))/purchases/voidedpurchases?"
                + items.joined(separator: "&"),
            deadline: deadline, decode: Self.decodeJSON)
    }

    static var acknowledged: String { "ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED" }

    /// Whether Google reads the purchase as acknowledged (a subscription, or a one-time product), or, `consumed`, as
    /// consumed: one read. False when Google says otherwise or does not answer.
    public func isDone(
        packageName: String, token: String, subscription: Bool, consumed: Bool, deadline: C.Instant? = nil
    ) async -> Bool {
        if subscription {
            return await self.subscription(packageName: packageName, token: token, deadline: deadline).answer?
                .acknowledgementState == Self.acknowledged
        }
        guard let purchase = await product(packageName: packageName, token: token, deadline: deadline).answer else {
            return false
        }
        return consumed
            ? purchase.productLineItems.contains { $0.consumptionState == "CONSUMPTION_STATE_CONSUMED" }
            : purchase.acknowledgementState == Self.acknowledged
    }

    // MARK: One call, its retries and its token

    private func call<Answer: Sendable>(
        _ endpoint: StoreEndpoint, method: TransportRequest.Method, path: String, body: [UInt8]? = nil,
        deadline: C.Instant?,
        decode: @Sendable (TransportResponse) -> GooglePlayOutcome<Answer>
    ) async -> GooglePlayOutcome<Answer> {
        let url = configuration.baseURL + "/androidpublisher/v3/" + path
        var attempt = 1
        var priority = CallPriority.firstAttempt
        var refreshedAfter401 = false
        // The token to send; nil: one is needed (first, or after the API refused the cached one).
        var currentToken: String?
        // The token the API refused, to be replaced.
        var refused: String?
        while true {
            if currentToken == nil {
                let result: GooglePlayAccessTokens.Result
                if let refused { result = await tokens.replace(refused) } else { result = await tokens.token() }
                switch result {
                case .token(let token):
                    currentToken = token
                    refused = nil
                case .refused(let error): return .configurationRefused(error)
                case .failed(let error): return .failed(error)
                case .unavailable(let advice):
                    // The token endpoint is down or throttled: retried within the deadline like the API's own 5xx.
                    let outcome = GooglePlayOutcome<Answer>.retryable(advice)
                    // Counted as the token endpoint's own overload or failure, as its admission reported it.
                    let tokenOutcome: CallOutcome = advice.retryAfter.map { .throttled(retryAfter: $0) } ?? .failure
                    guard await waitToRetry(.playToken, attempt: attempt, after: tokenOutcome, deadline: deadline)
                    else { return outcome }
                    attempt += 1
                    priority = .retry
                    continue
                }
            }
            guard let accessToken = currentToken else { continue }
            let permit: AppleCallGate<C>.Permit
            do {
                permit = try await gate.acquire(endpoint, priority: priority, deadline: deadline)
            } catch let error as AppleCallGateError {
                return .retryable(GooglePlayRetryAdvice(reason: .gate(error.code.rawValue)))
            } catch {
                return .retryable(GooglePlayRetryAdvice(reason: .transport(.cancelled)))
            }
            var headers: [(name: String, value: String)] = [
                ("Authorization", "Bearer \(accessToken)"), ("Accept", "application/json"),
            ]
            if body != nil { headers.append(("Content-Type", "application/json")) }
            let request = TransportRequest(
                method: method, url: url, headers: headers, body: body, timeout: configuration.requestTimeout)
            let started = clock.now
            let outcome: GooglePlayOutcome<Answer>
            let gateOutcome: CallOutcome
            do {
                let response = try await transport.execute(request)
                let latency = started.duration(to: clock.now)
                if response.status == 401 {
                    gate.report(permit, .success(latency: latency))
                    guard refreshedAfter401 == false else {
                        return .configurationRefused(
                            Self.apiError(response, code: .accessDenied, detail: "\(endpoint): access token refused"))
                    }
                    refreshedAfter401 = true
                    refused = accessToken
                    currentToken = nil
                    continue
                }
                (outcome, gateOutcome) = Self.classify(response, latency: latency, endpoint: endpoint, decode: decode)
            } catch let error as HTTPTransportError {
                outcome =
                    error.isRetryable
                    ? .retryable(GooglePlayRetryAdvice(reason: .transport(error.code)))
                    : .failed(GooglePlayAPIError(code: .transport, detail: "\(endpoint): \(error.code)"))
                gateOutcome = error.code == .timeout ? .timeout : .failure
            } catch {
                gate.report(permit, .notSent)
                return .retryable(GooglePlayRetryAdvice(reason: .transport(.cancelled)))
            }
            gate.report(permit, gateOutcome)
            guard case .retryable = outcome else { return outcome }
            guard await waitToRetry(endpoint, attempt: attempt, after: gateOutcome, deadline: deadline) else {
                return outcome
            }
            attempt += 1
            priority = .retry
        }
    }

    /// Sleeps the retry policy's delay before another attempt after a failed one (its `Retry-After` at least); false
    /// when the policy or the deadline says to stop.
    private func waitToRetry(
        _ endpoint: StoreEndpoint, attempt: Int, after outcome: CallOutcome, deadline: C.Instant?
    ) async -> Bool {
        let remaining = deadline.map { clock.now.duration(to: $0) }
        let decision = random.withLock {
            retryPolicy.decide(attempt: attempt, outcome: outcome, remainingUntilDeadline: remaining, using: &$0)
        }
        guard case .retry(let delay) = decision else { return false }
        logger.debug(
            "google play: retrying", metadata: [LogKeys.endpoint: "\(endpoint.name)", LogKeys.attempt: "\(attempt)"])
        do {
            try await clock.sleep(for: delay)
        } catch {
            return false
        }
        return true
    }

    /// Every status's outcome, and how the gate counts it: Google's answers (200, 400, 403, 404, 410) are successes
    /// of the call; 429 and 503 are overload; other 5xx are failures.
    static func classify<Answer>(
        _ response: TransportResponse, latency: Duration, endpoint: StoreEndpoint,
        decode: (TransportResponse) -> GooglePlayOutcome<Answer>
    ) -> (GooglePlayOutcome<Answer>, CallOutcome) {
        let answered = CallOutcome.success(latency: latency)
        switch response.status {
        case 200...299:
            return (decode(response), answered)
        case 404, 410:
            return (.purchaseNotFound(status: response.status), answered)
        case 400:
            return (.rejected(apiError(response, code: .badRequest, detail: "\(endpoint)")), answered)
        case 403:
            return (
                .configurationRefused(
                    apiError(response, code: .accessDenied, detail: "\(endpoint): permission denied")),
                answered
            )
        case 429, 500...599:
            let retryAfter = RetryAfter.fromHTTPHeader(response.header("Retry-After"), now: Date())
            let advice = GooglePlayRetryAdvice(reason: .httpStatus(response.status), retryAfter: retryAfter)
            let overload = response.status == 429 || response.status == 503
            return (.retryable(advice), overload ? .throttled(retryAfter: retryAfter) : .failure)
        default:
            return (.failed(apiError(response, code: .unexpectedStatus, detail: "\(endpoint)")), answered)
        }
    }

    /// Google's error envelope `{"error":{"code":…,"message":…,"status":…}}` read into an error; its message is
    /// Google's text about the request, which names no credential.
    static func apiError(
        _ response: TransportResponse, code: GooglePlayAPIError.Code, detail: String
    ) -> GooglePlayAPIError {
        let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
        let envelope = object?["error"] as? [String: Any]
        var text = detail
        if let message = envelope?["message"] as? String { text += ": " + String(message.prefix(200)) }
        return GooglePlayAPIError(
            code: code, httpStatus: response.status, googleStatus: envelope?["status"] as? String, detail: text)
    }

    @Sendable static func decodeJSON<Answer: Decodable & Sendable>(
        _ response: TransportResponse
    ) -> GooglePlayOutcome<Answer> {
        do {
            return .answered(try JSONDecoder().decode(Answer.self, from: Data(response.body)))
        } catch {
            return .failed(
                GooglePlayAPIError(
                    code: .malformedResponse, httpStatus: response.status,
                    detail: "the answer is not a \(Answer.self)"))
        }
    }

    @Sendable static func accepted(_ response: TransportResponse) -> GooglePlayOutcome<GooglePlayAccepted> {
        .answered(GooglePlayAccepted())
    }

    /// A path segment with everything but RFC 3986's unreserved characters percent-encoded.
    static func segment(_ text: String) -> String { text.percentEncodedUnreserved }
}
