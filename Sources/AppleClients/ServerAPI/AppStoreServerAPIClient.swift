import Foundation
import Logging
import Messages
import Observability
import StoreHTTP

/// The App Store Server API: Get Transaction Info, Get Transaction History v2 and Get All Subscription Statuses
/// here; the endpoints a server that owns entitlements needs after a grant in `AppStoreServerAPIClient+Lifecycle`.
///
/// Production is asked first; sandbox when production answers 404 with `errorCode` 4040010 (transaction id not
/// found) or 401 (unreleased apps only exist in sandbox). Every JWS in an answer goes through the injected
/// ``SignedPayloadVerifier`` before its content is used. Methods throw only `CancellationError`.
public struct AppStoreServerAPIClient: Sendable {
    /// Apple's error codes that mean "try again later".
    public static let retryableErrorCodes: Set<Int> = [4_040_002, 4_040_004, 4_040_006, 5_000_001]
    /// `TransactionIdNotFoundError`: the id may belong to the other environment.
    public static let transactionIDNotFound = 4_040_010

    private let transport: any HTTPTransport
    private let configuration: AppStoreServerAPIConfiguration
    private let signer: AppStoreTokenSigner
    private let verifier: any SignedPayloadVerifier
    private let logger: Logger
    private let now: @Sendable () -> Date

    /// Creates a client. `now` reads `Retry-After` (a UNIX time in milliseconds).
    public init(
        transport: any HTTPTransport, configuration: AppStoreServerAPIConfiguration, signer: AppStoreTokenSigner,
        verifier: any SignedPayloadVerifier, logger: Logger, now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.transport = transport
        self.configuration = configuration
        self.signer = signer
        self.verifier = verifier
        self.logger = logger
        self.now = now
    }

    /// `GET /inApps/v1/transactions/{transactionId}`.
    public func transactionInfo(transactionID: String) async throws -> AppleOutcome<TransactionInfoAnswer> {
        let outcome = try await get(path: "/inApps/v1/transactions/\(transactionID)", id: transactionID)
        guard case .answered(let (json, environment)) = outcome else { return outcome.mapFailure() }
        guard let jws = json["signedTransactionInfo"]?.stringValue else {
            return .failed(malformed("no `signedTransactionInfo` in the answer"))
        }
        return try await verifying {
            TransactionInfoAnswer(transaction: try await transaction(jws), answeredBy: environment)
        }
    }

    /// One page of `GET /inApps/v2/history/{transactionId}`; pass the previous page's `revision` for the next.
    /// `environment` pins later pages to the environment that answered the first one.
    public func transactionHistory(
        transactionID: String, revision: String? = nil, environment: AppleEnvironment? = nil
    ) async throws -> AppleOutcome<TransactionHistoryPage> {
        try await signedTransactionPage(
            path: "/inApps/v2/history/\(transactionID)", id: transactionID, revision: revision,
            environment: environment
        ) { json, answeredBy, transactions in
            TransactionHistoryPage(
                revision: json["revision"]?.stringValue, hasMore: json["hasMore"]?.boolValue ?? false,
                bundleID: json["bundleId"]?.stringValue, appAppleID: json["appAppleId"]?.int64Value,
                environment: json["environment"]?.stringValue.flatMap(AppleEnvironment.init(appleName:)),
                answeredBy: answeredBy, transactions: transactions)
        }
    }

    /// Every page of the history, up to ``AppStoreServerAPIConfiguration/maximumHistoryPages``; a retryable failure
    /// on any page makes the whole call retryable. The answer's `hasMore` is true if the page limit cut it short.
    public func completeTransactionHistory(transactionID: String) async throws -> AppleOutcome<TransactionHistoryPage> {
        var combined: TransactionHistoryPage?
        for _ in 0..<max(configuration.maximumHistoryPages, 1) {
            let outcome = try await transactionHistory(
                transactionID: transactionID, revision: combined?.revision, environment: combined?.answeredBy)
            guard case .answered(let page) = outcome else { return outcome }
            if var soFar = combined {
                soFar.transactions += page.transactions
                soFar.revision = page.revision
                soFar.hasMore = page.hasMore
                combined = soFar
            } else {
                combined = page
            }
            if !page.hasMore || page.revision == nil { break }
        }
        guard let combined else { return .failed(malformed("no history page")) }
        return .answered(combined)
    }

    /// `GET /inApps/v1/subscriptions/{transactionId}`.
    public func subscriptionStatuses(transactionID: String) async throws -> AppleOutcome<SubscriptionStatusesAnswer> {
        let outcome = try await get(path: "/inApps/v1/subscriptions/\(transactionID)", id: transactionID)
        guard case .answered(let (json, answeredBy)) = outcome else { return outcome.mapFailure() }
        return try await verifying {
            var groups: [SubscriptionStatusesAnswer.Group] = []
            guard case .array(let items) = json["data"] ?? .array([]) else { throw malformed("`data` is not an array") }
            for item in items {
                guard case .array(let lastItems) = item["lastTransactions"] ?? .array([]) else {
                    throw malformed("`lastTransactions` is not an array")
                }
                var last: [SubscriptionStatusesAnswer.LastTransaction] = []
                for entry in lastItems {
                    var transactionPayload: SignedTransaction?
                    var renewalPayload: SignedRenewalInfo?
                    if let jws = entry["signedTransactionInfo"]?.stringValue {
                        transactionPayload = try await transaction(jws)
                    }
                    if let jws = entry["signedRenewalInfo"]?.stringValue {
                        renewalPayload = try SignedRenewalInfo(payload: try await verifiedJSON(jws))
                    }
                    last.append(
                        .init(
                            status: entry["status"]?.intValue,
                            originalTransactionID: entry["originalTransactionId"]?.stringValue,
                            transaction: transactionPayload, renewalInfo: renewalPayload))
                }
                groups.append(
                    .init(
                        subscriptionGroupIdentifier: item["subscriptionGroupIdentifier"]?.stringValue,
                        lastTransactions: last))
            }
            return SubscriptionStatusesAnswer(
                environment: json["environment"]?.stringValue.flatMap(AppleEnvironment.init(appleName:)),
                bundleID: json["bundleId"]?.stringValue, appAppleID: json["appAppleId"]?.int64Value, groups: groups,
                answeredBy: answeredBy)
        }
    }

    // MARK: - Plumbing

    /// One page of a GET that answers `signedTransactions` (the transaction history, the refund history): the
    /// previous page's `revision` asks for the next; `page` builds the answer from the page's verified transactions.
    func signedTransactionPage<Page: Sendable>(
        path: String, id: String, revision: String?, environment: AppleEnvironment?,
        page: (LenientJSON, AppleEnvironment, [SignedTransaction]) -> Page
    ) async throws -> AppleOutcome<Page> {
        var query: [URLQueryItem] = []
        if let revision { query.append(URLQueryItem(name: "revision", value: revision)) }
        let outcome = try await get(path: path, id: id, query: query, only: environment)
        guard case .answered(let (json, answeredBy)) = outcome else { return outcome.mapFailure() }
        let signed: [LenientJSON]
        switch json["signedTransactions"] {
        case nil: signed = []
        case .array(let items): signed = items
        default: return .failed(malformed("`signedTransactions` is not an array"))
        }
        return try await verifying {
            var transactions: [SignedTransaction] = []
            for item in signed {
                guard let jws = item.stringValue else { throw malformed("a signed transaction is not a string") }
                transactions.append(try await transaction(jws))
            }
            return page(json, answeredBy, transactions)
        }
    }

    func transaction(_ jws: String) async throws -> SignedTransaction {
        try SignedTransaction(payload: try await verifiedJSON(jws))
    }

    func verifiedJSON(_ jws: String) async throws -> LenientJSON {
        let payload: [UInt8]
        do {
            payload = try await verifier.verifiedPayload(of: jws)
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw AppleClientError(code: .signatureInvalid, detail: "\(error)")
        }
        guard let json = LenientJSON.parse(payload) else { throw malformed("a signed payload is not JSON") }
        return json
    }

    /// Runs the decoding of an answer, turning its errors into a failed outcome.
    func verifying<Answer: Sendable>(
        _ body: () async throws -> Answer
    ) async throws -> AppleOutcome<Answer> {
        do {
            return .answered(try await body())
        } catch let error as AppleClientError {
            logger.debug("App Store Server API: answer rejected", metadata: [LogKeys.error: "\(error)"])
            return .failed(error)
        }
    }

    /// GETs `path` at production, then at sandbox when production says the id is not there.
    func get(
        path: String, id: String, query: [URLQueryItem] = [], only: AppleEnvironment? = nil
    ) async throws -> AppleOutcome<(LenientJSON, AppleEnvironment)> {
        try await send(.get, path: path, id: id, query: query, only: only)
    }

    /// Sends one call at production, then at sandbox when production says the id is not there (404 with 4040010)
    /// or does not know the app (401). `only` pins the call to one environment, without fallback. `id` is the
    /// path's identifier, checked before anything is sent; a 2xx answer with an empty body reads as `{}`.
    func send(
        _ method: TransportRequest.Method, path: String, id: String, idKind: PathIDKind = .transaction,
        query: [URLQueryItem] = [], body: [UInt8]? = nil, only: AppleEnvironment? = nil
    ) async throws -> AppleOutcome<(LenientJSON, AppleEnvironment)> {
        guard idKind.accepts(id) else {
            return .failed(AppleClientError(code: .invalidRequest, detail: idKind.problem))
        }
        let environments: [AppleEnvironment] = only.map { [$0] } ?? [.production, .sandbox]
        var last: AppleOutcome<(LenientJSON, AppleEnvironment)> = .failed(
            AppleClientError(code: .invalidRequest, detail: "no environment to ask"))
        for environment in environments {
            let token: String
            do {
                token = try signer.token()
            } catch {
                return .failed(AppleClientError(code: .invalidRequest, detail: "the bearer token could not be signed"))
            }
            var components = URLComponents(string: configuration.baseURL(for: environment) + path)
            if !query.isEmpty { components?.queryItems = query }
            guard let url = components?.string else {
                return .failed(AppleClientError(code: .invalidRequest, detail: "the base URL is not a URL"))
            }
            var headers = [("Authorization", "Bearer \(token)"), ("Accept", "application/json")]
            if body != nil { headers.append(("Content-Type", "application/json")) }
            let request = TransportRequest(
                method: method, url: url, headers: headers, body: body, timeout: configuration.requestTimeout)
            let response: TransportResponse
            switch try await transport.exchange(
                request, environment: environment, logger: logger, label: "App Store Server API")
            {
            case .success(let answer): response = answer
            case .failure(let failure): return failure.result()
            }
            last = classify(response, environment: environment)
            guard case .failed(let error) = last, environment == .production, only == nil else { return last }
            let isNotFound = error.httpStatus == 404 && error.appleErrorCode == Self.transactionIDNotFound
            guard isNotFound || error.httpStatus == 401 else { return last }
            logger.debug(
                "App Store Server API: not in production, asking sandbox",
                metadata: [LogKeys.appleErrorCode: "\(error.appleErrorCode ?? error.httpStatus ?? 0)"])
        }
        return last
    }

    private func classify(
        _ response: TransportResponse, environment: AppleEnvironment
    ) -> AppleOutcome<(LenientJSON, AppleEnvironment)> {
        if (200..<300).contains(response.status) {
            // Send Consumption Information (202), Finish Transaction and Set App Account Token answer no body.
            if response.body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
                return .answered((.object([:]), environment))
            }
            guard let json = LenientJSON.parse(response.body), json.objectValue != nil else {
                return .failed(malformed("the answer is not a JSON object"))
            }
            return .answered((json, environment))
        }
        let errorCode = LenientJSON.parse(response.body)?["errorCode"]?.intValue
        if response.status == 429 {
            let retryAfter = RetryAfter.fromUnixMilliseconds(response.header("Retry-After"), now: now())
            return .retryable(
                AppleRetryAdvice(reason: .httpStatus(429), retryAfter: retryAfter, environment: environment))
        }
        if let errorCode, Self.retryableErrorCodes.contains(errorCode) {
            return .retryable(AppleRetryAdvice(reason: .apiErrorCode(errorCode), environment: environment))
        }
        if response.status >= 500 {
            let retryAfter = RetryAfter.fromUnixMilliseconds(response.header("Retry-After"), now: now())
            return .retryable(
                AppleRetryAdvice(reason: .httpStatus(response.status), retryAfter: retryAfter, environment: environment)
            )
        }
        return .failed(
            AppleClientError(
                code: errorCode == nil ? .httpStatus : .apiError,
                detail: "the App Store Server API refused the request", httpStatus: response.status,
                appleErrorCode: errorCode))
    }
}

extension AppleOutcome {
    /// Carries a retry or failure over to another answer type (never called on `.answered`).
    func mapFailure<Other: Sendable>() -> AppleOutcome<Other> {
        switch self {
        case .answered: .failed(AppleClientError(code: .malformedResponse, detail: "internal: answered"))
        case .retryable(let advice): .retryable(advice)
        case .failed(let error): .failed(error)
        }
    }
}
