import CodedErrors
import Foundation
import Hummingbird
import Logging
import Messages
import Metrics
import NIOCore
import Observability
import Operations
import Prometheus
import ServiceLifecycle

/// The request context of the entitlement port: Hummingbird's core storage and the client's address (for the
/// per-address limit on failed authentications).
public struct EntitlementRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}

/// The HTTP side of `verify-worker entitlements`, on one port (`VERIFY_ENTITLEMENTS_PORT`, 8090):
///
/// - `GET /v1/accounts/{account_id}/entitlements`, `…/history`, `…/transactions`, `GET /v1/transactions/{id}`:
///   JSON, each behind `Authorization: Bearer <token>` (tokens from ``AccessTokens``; 401 otherwise) and rate
///   limited per caller (429 with `Retry-After`); failed authentications are limited per client address.
/// - `GET /console`: the support console (``ConsoleAssets``), which logs in with the same tokens.
/// - `GET /healthz`, `/readyz`, `/metrics`: as on the worker's operations port.
///
/// Errors are `{"error": code, "message": …}`; a message never quotes a token or an id from the request.
public final class EntitlementAPI: Service, Sendable {
    public struct Configuration: Sendable {
        /// Interface and port to bind; port 0 picks a free one (``waitUntilListening()``). Default: 0.0.0.0:8090.
        public var host: String
        public var port: Int
        public var limits: RequestLimiter.Limits
        /// The most history entries one page returns. Default: 200.
        public var maximumPageSize: Int

        public init(
            host: String = "0.0.0.0", port: Int = 8090, limits: RequestLimiter.Limits = .init(),
            maximumPageSize: Int = 200
        ) {
            self.host = host
            self.port = port
            self.limits = limits
            self.maximumPageSize = maximumPageSize
        }
    }

    public let configuration: Configuration
    private let store: any EntitlementStore
    private let catalog: Catalog
    private let tokens: AccessTokens
    private let limiter: RequestLimiter
    private let readiness: @Sendable () async -> Readiness
    private let registry: PrometheusCollectorRegistry
    private let logger: Logger
    private let now: @Sendable () -> Date
    private let listening = OneShot<Int?>()

    public init(
        configuration: Configuration, store: any EntitlementStore, catalog: Catalog, tokens: AccessTokens,
        registry: PrometheusCollectorRegistry = MetricsBootstrap.registry(), logger: Logger,
        now: @escaping @Sendable () -> Date = { Date() },
        readiness: @escaping @Sendable () async -> Readiness
    ) {
        self.configuration = configuration
        self.store = store
        self.catalog = catalog
        self.tokens = tokens
        self.limiter = RequestLimiter(limits: configuration.limits)
        self.readiness = readiness
        self.registry = registry
        self.logger = logger
        self.now = now
    }

    /// Serves until graceful shutdown or cancellation.
    public func run() async throws {
        try await HTTPServing.run(
            makeRouter(), host: configuration.host, port: configuration.port, backlog: 1024, logger: logger,
            listening: listening
        ) { [logger] port in
            logger.notice("entitlements: API and console listening", metadata: [LogKeys.httpPort: "\(port)"])
        }
    }

    /// The bound port once the server listens; nil if it stopped or failed first.
    public func waitUntilListening() async -> Int? { await listening.wait() ?? nil }

    // MARK: Routes

    func makeRouter() -> Router<EntitlementRequestContext> {
        // HEAD is answered as GET without a body (/healthz, /readyz and /metrics are probed here too).
        let router = Router(context: EntitlementRequestContext.self, options: .autoGenerateHeadEndpoints)
        OperationsServer.addRoutes(
            to: router, registry: registry, declaredMetrics: MetricNames.names(of: [.entitlements]),
            readiness: readiness)
        router.get("v1/session") { request, context in
            await self.guarded(request, context, route: "session") { caller in
                APIModels.Session(
                    caller: caller, scopes: self.tokens.scopes(of: caller).sorted(),
                    asOf: try await self.store.progress().asOf)
            }
        }
        router.get("v1/accounts/:account/entitlements") { request, context in
            await self.guarded(request, context, route: "entitlements") { _ in
                try await self.entitlements(account: try Self.identifier(context, "account"))
            }
        }
        router.get("v1/accounts/:account/transactions") { request, context in
            await self.guarded(request, context, route: "account_transactions") { _ in
                try await self.accountTransactions(account: try Self.identifier(context, "account"))
            }
        }
        router.get("v1/accounts/:account/history") { request, context in
            await self.guarded(request, context, route: "history") { caller in
                try await self.history(
                    account: try Self.identifier(context, "account"), request: request,
                    support: self.tokens.scopes(of: caller).contains(AccessTokens.supportScope))
            }
        }
        router.get("v1/transactions/:transaction") { request, context in
            await self.guarded(request, context, route: "transaction") { _ in
                try await self.transaction(id: try Self.identifier(context, "transaction"))
            }
        }
        // Any other path under /v1 is a clear JSON 404, after authentication (the API's shape is not public).
        router.get("v1/**") { request, context in
            await self.guarded(request, context, route: "unknown") { _ in
                throw APIFailure(.notFound, "not_found", "no such resource")
            }
        }
        for (path, asset) in ConsoleAssets.routes {
            router.get(RouterPath(path)) { _, _ in ConsoleAssets.response(asset) }
        }
        return router
    }

    /// Authenticates, rate limits, runs `body`, and turns every outcome into a JSON response with metrics.
    private func guarded(
        _ request: Request, _ context: EntitlementRequestContext, route: String,
        _ body: (_ caller: String) async throws -> any Encodable
    ) async -> Response {
        let started = ContinuousClock.now
        let response: Response
        do {
            let caller = try authenticate(request, context)
            guard limiter.admitCaller(caller) else {
                throw APIFailure(.tooManyRequests, "rate_limited", "too many requests for this token; retry shortly")
            }
            response = Self.json(.ok, try await body(caller))
        } catch let failure as APIFailure {
            response = Self.failure(failure)
        } catch let error as EntitlementStoreError {
            logger.warning(
                "entitlements: store failed during a request",
                metadata: [LogKeys.httpRoute: "\(route)", LogKeys.error: "\(error.code.rawValue)"])
            response = Self.failure(
                APIFailure(.serviceUnavailable, "store_unavailable", "the store did not answer; retry"))
        } catch {
            response = Self.failure(APIFailure(.internalServerError, "internal", "the request could not be answered"))
        }
        let elapsed = ContinuousClock.now - started
        Counter(
            label: MetricNames.entitlementsRequests,
            dimensions: [("route", route), ("status", "\(response.status.code)")]
        )
        .increment()
        Timer(label: MetricNames.entitlementsRequestDuration, dimensions: [("route", route)]).recordNanoseconds(
            elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000)
        return response
    }

    private func authenticate(_ request: Request, _ context: EntitlementRequestContext) throws(APIFailure) -> String {
        let address = context.remoteAddress?.ipAddress ?? "unknown"
        guard limiter.addressMayTry(address) else {
            throw APIFailure(.tooManyRequests, "rate_limited", "too many failed authentications from this address")
        }
        guard let token = AccessTokens.bearerToken(in: request.headers[.authorization]),
            let label = tokens.authenticate(token)
        else {
            limiter.recordFailure(address)
            Counter(label: MetricNames.entitlementsAuthenticationFailures).increment()
            throw APIFailure(.unauthorized, "unauthorized", "a valid Authorization: Bearer token is required")
        }
        return label
    }

    // MARK: Handlers

    private func entitlements(account: String) async throws -> any Encodable {
        guard let record = try await store.account(account) else { throw try await unknownAccount() }
        let instant = now()
        let summaries = EntitlementSummary.summarize(record.transactions, catalog: catalog, at: instant)
        return APIModels.Entitlements(
            accountID: account, asOf: try await store.progress().asOf,
            entitlements: summaries.map { APIModels.Entitlement($0, at: instant) },
            consumables: record.consumables.filter { $0.value > 0 }.sorted { $0.key < $1.key }.map {
                APIModels.Consumable(productID: $0.key.productID, count: $0.value, store: $0.key.store.rawValue)
            })
    }

    private func accountTransactions(account: String) async throws -> any Encodable {
        guard let record = try await store.account(account) else { throw try await unknownAccount() }
        let instant = now()
        let ordered = record.transactions.sorted {
            ($0.purchaseDate ?? .distantPast, $0.transactionID) > ($1.purchaseDate ?? .distantPast, $1.transactionID)
        }
        return APIModels.AccountTransactions(
            accountID: account, asOf: try await store.progress().asOf,
            transactions: ordered.map { APIModels.Transaction($0, catalog: catalog, at: instant) })
    }

    private func history(account: String, request: Request, support: Bool) async throws -> any Encodable {
        let query = request.uri.queryParameters
        var limit = 50
        if let text = query["limit"] {
            guard let value = Int(String(text)), value >= 1, value <= configuration.maximumPageSize else {
                throw APIFailure(
                    .badRequest, "invalid_parameter", "limit must be 1 to \(configuration.maximumPageSize)")
            }
            limit = value
        }
        var before: Int64?
        if let text = query["before"] {
            guard let value = Int64(String(text)), value > 0 else {
                throw APIFailure(.badRequest, "invalid_parameter", "before must be a positive sequence number")
            }
            before = value
        }
        guard try await store.account(account) != nil else { throw try await unknownAccount() }
        let entries = try await store.history(of: account, before: before, limit: limit + 1)
        let page = Array(entries.prefix(limit))
        var shown: [APIModels.Entry] = []
        for entry in page {
            let explanation: String? =
                switch entry.kind {
                case .verdict:
                    ReasonText.explain(
                        outcome: entry.outcome, reason: entry.reason, store: entry.store,
                        revocations: entry.revocations)
                case .event: entry.event.map { ReasonText.explain(event: $0.kind, store: $0.store) }
                case .ignored: entry.problem.map(ReasonText.explain(problem:))
                }
            var item = APIModels.Entry(entry: entry, explanation: explanation)
            if entry.kind == .verdict, entry.reason == Verdict.Reason.replayed.rawValue,
                let owner = try await owner(of: entry, other: account)
            {
                item.belongsToAnotherAccount = true
                item.ownerAccountID = support ? owner : nil
            }
            shown.append(item)
        }
        return APIModels.History(
            accountID: account, asOf: try await store.progress().asOf, entries: shown,
            nextBefore: entries.count > limit ? page.last?.sequence : nil)
    }

    /// The account this store recorded as owning a transaction of a `replayed` verdict, when it is not `account`:
    /// the worker's ledger granted it there, and the same verdicts brought it here. A subscription's period this
    /// store never saw is answered by the owner of its subscription (original id).
    private func owner(of entry: HistoryEntry, other account: String) async throws -> String? {
        let store = entry.store ?? .appStore
        for item in entry.transactions {
            let found = try await self.store.transactions(matching: item.transactionID)
            if let owned = found.first(where: {
                $0.transactionID == item.transactionID && $0.store == store && $0.accountID != account
            }) {
                return owned.accountID
            }
        }
        for original in Set(entry.transactions.compactMap(\.originalTransactionID)) {
            let found = try await self.store.transactions(matching: original)
            if let owned = found.first(where: {
                $0.originalTransactionID == original && $0.store == store && $0.accountID != account
            }) {
                return owned.accountID
            }
        }
        return nil
    }

    private func transaction(id: String) async throws -> any Encodable {
        let found = try await store.transactions(matching: id)
        guard !found.isEmpty else {
            throw APIFailure(.notFound, "unknown_transaction", "no verdict read so far names this transaction")
        }
        let instant = now()
        let ordered = found.sorted {
            ($0.purchaseDate ?? .distantPast, $0.transactionID) > ($1.purchaseDate ?? .distantPast, $1.transactionID)
        }
        let matched = TransactionMatch.kind(of: ordered, for: id) ?? .originalTransactionID
        let speaking = ordered.first { $0.transactionID == id } ?? ordered[0]
        return APIModels.TransactionLookup(
            transactionID: id, matchedBy: matched.rawValue,
            accountID: speaking.accountID, state: speaking.state(at: instant), asOf: try await store.progress().asOf,
            transactions: ordered.map { APIModels.Transaction($0, catalog: catalog, at: instant) })
    }

    private func unknownAccount() async throws -> APIFailure {
        APIFailure(.notFound, "unknown_account", "no verdict for this account has been read so far")
    }

    // MARK: Helpers

    /// A path parameter, percent-decoded and checked against the contract's identifier bounds.
    static func identifier(_ context: EntitlementRequestContext, _ name: String) throws(APIFailure) -> String {
        guard let raw = context.parameters.get(name), raw.utf8.count <= Identifier.maximumBytes * 3,
            let decoded = raw.removingPercentEncoding, Identifier.isValid(decoded)
        else {
            throw APIFailure(
                .badRequest, "invalid_id",
                "\(name) id must be 1 to \(Identifier.maximumBytes) bytes without control characters")
        }
        return decoded
    }

    /// Writes the bodies (``APIModels``) with their properties' names in snake_case; the stored documents nested in
    /// them (history entries, events, transactions) name their keys so already.
    static let encoder: JSONEncoder = {
        let encoder = RFC3339.jsonEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        return encoder
    }()

    static func json(_ status: HTTPResponse.Status, _ body: any Encodable) -> Response {
        let bytes = (try? encoder.encode(body)) ?? Data("{}".utf8)
        var headers = securityHeaders
        headers[.contentType] = "application/json"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    static func failure(_ failure: APIFailure) -> Response {
        var response = json(failure.status, APIModels.Failure(error: failure.code, message: failure.message))
        if failure.status == .unauthorized { response.headers[.wwwAuthenticate] = "Bearer" }
        if failure.status == .tooManyRequests { response.headers[.retryAfter] = "1" }
        return response
    }

    static var securityHeaders: HTTPFields {
        [
            .cacheControl: "no-store", HTTPFields.Element.Name("X-Content-Type-Options")!: "nosniff",
            HTTPFields.Element.Name("Referrer-Policy")!: "no-referrer",
        ]
    }
}

/// An API error answer: a status, a stable code and a message that quotes nothing from the request.
struct APIFailure: Error {
    var status: HTTPResponse.Status
    var code: String
    var message: String
    init(_ status: HTTPResponse.Status, _ code: String, _ message: String) {
        self.status = status
        self.code = code
        self.message = message
    }
}
