import Foundation
import Hummingbird
import NIOCore

extension PlaySimulator {
    static let apiPrefix = "androidpublisher/v3/applications/:packageName/purchases/"

    func makeRouter() -> Router<BasicRequestContext> {
        let router = Router(context: BasicRequestContext.self)

        // Google's routes: counted, subject to faults, bearer tokens checked.
        router.post("token") { request, _ -> Response in
            let body = try await Self.bytes(of: request, upTo: self.configuration.maximumBodyBytes)
            return await self.googleCall(.token, authorization: nil, packageName: "") {
                let (status, object) = self.oauth.tokenAnswer(formBody: body)
                return PlayReply(status, PlayAPIAnswers.json(object))
            }
        }
        router.get(RouterPath(Self.apiPrefix + "subscriptionsv2/tokens/:token")) { request, context -> Response in
            let (package, token) = (Self.parameter(context, "packageName"), Self.parameter(context, "token"))
            return await self.googleCall(
                .subscriptionsV2Get, authorization: request.headers[.authorization], packageName: package
            ) { self.getSubscriptionV2(packageName: package, token: token) }
        }
        router.get(RouterPath(Self.apiPrefix + "productsv2/tokens/:token")) { request, context -> Response in
            let (package, token) = (Self.parameter(context, "packageName"), Self.parameter(context, "token"))
            return await self.googleCall(
                .productsV2Get, authorization: request.headers[.authorization], packageName: package
            ) { self.getProductV2(packageName: package, token: token) }
        }
        // `{token}:acknowledge` and `{token}:consume` are one path segment: the method follows the colon.
        for kind in ["products", "subscriptions"] {
            router.post(RouterPath(Self.apiPrefix + kind + "/:productId/tokens/:tokenAndMethod")) {
                request, context -> Response in
                let package = Self.parameter(context, "packageName")
                let productId = Self.parameter(context, "productId")
                let segment = Self.parameter(context, "tokenAndMethod")
                guard let colon = segment.lastIndex(of: ":") else { return Self.response(PlayReply.notFoundRoute) }
                let token = String(segment[..<colon])
                let method = String(segment[segment.index(after: colon)...])
                let route: PlayRoute
                switch (kind, method) {
                case ("products", "acknowledge"): route = .productsAcknowledge
                case ("products", "consume"): route = .productsConsume
                case ("subscriptions", "acknowledge"): route = .subscriptionsAcknowledge
                default: return Self.response(PlayReply.notFoundRoute)
                }
                let body = try await Self.bytes(of: request, upTo: self.configuration.maximumBodyBytes)
                return await self.googleCall(
                    route, authorization: request.headers[.authorization], packageName: package
                ) {
                    switch route {
                    case .productsConsume: return self.consume(packageName: package, productId: productId, token: token)
                    default:
                        return self.acknowledge(
                            packageName: package, productId: productId, token: token,
                            subscription: route == .subscriptionsAcknowledge, body: body)
                    }
                }
            }
        }

        router.get(RouterPath(Self.apiPrefix + "voidedpurchases")) { request, context -> Response in
            let package = Self.parameter(context, "packageName")
            var query: [String: String] = [:]
            for (name, value) in request.uri.queryParameters { query[String(name)] = String(value) }
            return await self.googleCall(
                .voidedPurchasesList, authorization: request.headers[.authorization], packageName: package
            ) { self.listVoidedPurchases(packageName: package, query: query) }
        }
        // `{orderId}:reviewrefund` is one path segment; order ids hold dots, so the method follows the last colon.
        router.post("androidpublisher/v3/applications/:packageName/orders/:orderAndMethod") {
            request, context -> Response in
            let package = Self.parameter(context, "packageName")
            let segment = Self.parameter(context, "orderAndMethod")
            guard let colon = segment.lastIndex(of: ":"), segment[segment.index(after: colon)...] == "reviewrefund"
            else { return Self.response(PlayReply.notFoundRoute) }
            let orderId = String(segment[..<colon])
            let body = try await Self.bytes(of: request, upTo: self.configuration.maximumBodyBytes)
            return await self.googleCall(
                .ordersReviewRefund, authorization: request.headers[.authorization], packageName: package
            ) { self.reviewRefund(packageName: package, orderId: orderId, body: body) }
        }
        // Google's public keys for the OIDC tokens of the pushes; not an API route (no token, no faults).
        router.get("oauth2/v3/certs") { _, _ -> Response in
            self.stats.record(request: "oauth2/v3/certs")
            let (body, maxAge) = self.pushes.jwks()
            var response = Self.response(PlayReply(200, PlayAPIAnswers.json(body)))
            response.headers[.cacheControl] = "public, max-age=\(maxAge)"
            return response
        }

        addSimulatorRoutes(to: router)
        return router
    }

    /// Counts the call, applies the fault plan, checks the bearer token (API routes), then answers with `body()`;
    /// every request gets exactly one counted answer.
    func googleCall(
        _ route: PlayRoute, authorization: String?, packageName: String, _ body: () -> PlayReply
    ) async -> Response {
        stats.record(request: route.rawValue)
        let (latencyMs, outcome) = faults.draw(route)
        if latencyMs > 0 {
            stats.record(fault: .latency)
            try? await Task.sleep(for: .milliseconds(Int64(latencyMs.rounded())))
        }
        let reply: PlayReply
        switch outcome {
        case .status(let kind, let retryAfterS):
            stats.record(fault: kind)
            reply = Self.faultReply(kind, route: route, retryAfterS: retryAfterS)
        case .expireToken:
            stats.record(fault: .expiredToken)
            oauth.expire(authorization)
            reply = .unauthenticated
        case .answer:
            if route == .token {
                reply = body()
            } else {
                switch oauth.checkBearer(authorization, packageName: packageName) {
                case .unauthenticated: reply = .unauthenticated
                case .permissionDenied: reply = .permissionDenied
                case .valid: reply = body()
                }
            }
        }
        stats.record(answer: reply.status, route: route.rawValue)
        return Self.response(reply)
    }

    /// Google's answers for an injected fault: the API's error envelope, or OAuth's error JSON on the token route.
    static func faultReply(_ kind: PlayFaultKind, route: PlayRoute, retryAfterS: Int) -> PlayReply {
        if route == .token {
            switch kind {
            case .http429:
                return PlayReply(
                    429,
                    PlayAPIAnswers.json(["error": "rate_limit_exceeded", "error_description": "Rate limit exceeded."]),
                    retryAfter: String(retryAfterS))
            case .http500:
                return PlayReply(
                    500, PlayAPIAnswers.json(["error": "internal_failure", "error_description": "Backend Error"]))
            default:
                return PlayReply(
                    503,
                    PlayAPIAnswers.json([
                        "error": "temporarily_unavailable",
                        "error_description": "The service is currently unavailable.",
                    ]))
            }
        }
        switch kind {
        case .http429:
            return PlayReply(
                429,
                PlayAPIAnswers.error(
                    429,
                    "Quota exceeded for quota metric 'Queries' and limit 'Queries per minute' of service "
                        + "'androidpublisher.googleapis.com'.",
                    status: "RESOURCE_EXHAUSTED", reason: "rateLimitExceeded"),
                retryAfter: String(retryAfterS))
        case .http500:
            return PlayReply(
                500,
                PlayAPIAnswers.error(500, "Internal error encountered.", status: "INTERNAL", reason: "backendError"))
        default:
            return PlayReply(
                503,
                PlayAPIAnswers.error(
                    503, "The service is currently unavailable.", status: "UNAVAILABLE", reason: "backendError"))
        }
    }

    static func response(_ reply: PlayReply) -> Response {
        var headers = HTTPFields()
        if !reply.body.isEmpty { headers[.contentType] = "application/json; charset=UTF-8" }
        if let retryAfter = reply.retryAfter { headers[.retryAfter] = retryAfter }
        if let challenge = reply.wwwAuthenticate { headers[.wwwAuthenticate] = challenge }
        return Response(
            status: HTTPResponse.Status(code: reply.status), headers: headers,
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: reply.body)))
    }

    static func parameter(_ context: BasicRequestContext, _ name: String) -> String {
        let raw = context.parameters.get(name) ?? ""
        return raw.contains("%") ? (raw.removingPercentEncoding ?? raw) : raw
    }

    static func bytes(of request: Request, upTo limit: Int) async throws -> [UInt8] {
        var request = request
        let body = try await request.collectBody(upTo: limit)
        return body.getBytes(at: body.readerIndex, length: body.readableBytes) ?? []
    }
}

extension PlayReply {
    /// A path Google does not serve.
    static let notFoundRoute = PlayReply(
        404, PlayAPIAnswers.error(404, "Not Found", status: "NOT_FOUND", reason: "notFound"))
}
