import CodedErrors
import Foundation
import Hummingbird
import Messages
import NIOCore
import Operations

extension AppleSimulator {
    func makeRouter() -> Router<SimulatorRequestContext> {
        let router = Router(context: SimulatorRequestContext.self)

        // Apple's endpoints: counted, subject to faults.
        for endpoint in [VerifyReceiptEndpoint.production, .sandbox] {
            let path = endpoint == .production ? "verifyReceipt" : "sandbox/verifyReceipt"
            router.post(RouterPath(path)) { request, context -> Response in
                var request = request
                let body = try await request.collectBody(upTo: self.configuration.maximumBodyBytes)
                return await self.appleCall(
                    endpoint: path, subject: body, isVerifyReceipt: true, on: context.eventLoop
                ) {
                    let answer = self.verifyReceipt.answer(requestBody: body, endpoint: endpoint)
                    return (200, answer.buffer, String(answer.status))
                }
            }
        }
        for environment in AppleEnvironment.simulated {
            let prefix = environment == .production ? "" : "sandbox/"
            let routes: [(String, @Sendable (String, Request) -> ServerAPIService.Reply)] = [
                ("inApps/v1/transactions", { id, _ in self.serverAPI.transactionInfo(id, environment: environment) }),
                (
                    "inApps/v2/history",
                    { id, request in
                        self.serverAPI.history(
                            id, environment: environment,
                            revision: request.uri.queryParameters["revision"].map(String.init))
                    }
                ),
                ("inApps/v1/subscriptions", { id, _ in self.serverAPI.subscriptions(id, environment: environment) }),
            ]
            for (path, handler) in routes {
                let name = prefix + path
                router.get(RouterPath(name + "/:id")) { request, context -> Response in
                    let id = context.parameters.get("id") ?? ""
                    return await self.appleCall(
                        endpoint: name, subject: id, isVerifyReceipt: false, on: context.eventLoop
                    ) {
                        let reply = self.serverAPI.authorized(id, authorization: request.headers[.authorization]) {
                            handler(id, request)
                        }
                        return (reply.httpStatus, ByteBuffer(bytes: reply.body), reply.statusLabel)
                    }
                }
            }
        }

        addLifecycleServerAPIRoutes(to: router)
        addLifecycleRoutes(to: router)

        // The simulator's own control endpoints.
        router.get("sim/roots") { _, _ -> Response in
            Self.response(200, Array(try self.pki.rootsPEM().utf8), contentType: "application/x-pem-file")
        }
        router.post("sim/mint") { request, _ -> Response in
            self.stats.record(endpoint: "sim/mint")
            var request = request
            let body = try await request.collectBody(upTo: 1 << 20)
            let bytes = body.getBytes(at: body.readerIndex, length: body.readableBytes) ?? []
            do {
                let minted = try self.mint(Self.mintRequest(from: bytes))
                var answer: [String: Any] = [
                    "receipt": minted.receipt,
                    "transaction_id": minted.transaction.transactionId,
                    "original_transaction_id": minted.transaction.originalTransactionId,
                    "environment": minted.transaction.environment.rawValue,
                    "purchase_date_ms": minted.transaction.purchaseDateMs,
                ]
                if let expires = minted.transaction.expiresDateMs { answer["expires_date_ms"] = expires }
                if let wolii = minted.transaction.webOrderLineItemId { answer["web_order_line_item_id"] = wolii }
                return Self.response(200, VerifyReceiptService.json(answer))
            } catch let error as AppleSimulatorError {
                return Self.response(400, VerifyReceiptService.json(["error": error.message]))
            }
        }
        router.post("sim/refund") { request, _ -> Response in
            self.stats.record(endpoint: "sim/refund")
            var request = request
            let body = try await request.collectBody(upTo: 1 << 16)
            let bytes = body.getBytes(at: body.readerIndex, length: body.readableBytes) ?? []
            guard let object = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any],
                let id = object["transaction_id"] as? String
            else { return Self.response(400, VerifyReceiptService.json(["error": "transaction_id is required"])) }
            let at = Self.milliseconds(object["revoked_at"]).map(AppleDates.date)
            let reason = (object["reason"] as? Int) ?? 0
            let percentage = object["percentage"] as? Int
            if object["percentage"] != nil, percentage == nil {
                return Self.response(400, VerifyReceiptService.json(["error": "percentage must be an integer"]))
            }
            let refunded: SimulatedTransaction?
            do {
                refunded = try self.refund(transactionId: id, at: at, reason: reason, percentage: percentage)
            } catch let error as AppleSimulatorError {
                return Self.errorResponse(error)
            }
            guard let revoked = refunded else {
                return Self.response(404, VerifyReceiptService.json(["error": "unknown transaction_id"]))
            }
            return Self.response(
                200,
                VerifyReceiptService.json([
                    "transaction_id": revoked.transactionId,
                    "revocation_date_ms": revoked.revocationDateMs ?? 0,
                    "revocation_type": revoked.revocationType ?? "REFUND_FULL",
                    "revocation_percentage": revoked.revocationPercentage.map { $0 as Any } ?? NSNull(),
                ]))
        }
        router.get("sim/faults") { _, _ -> Response in
            Self.response(200, self.faultsJSON())
        }
        router.post("sim/faults") { request, _ -> Response in
            var request = request
            let body = try await request.collectBody(upTo: 1 << 16)
            let bytes = body.getBytes(at: body.readerIndex, length: body.readableBytes) ?? []
            guard
                let plan = try? JSONDecoder().decode(
                    FaultPlan.self, from: Data(bytes.isEmpty ? Array("{}".utf8) : bytes))
            else { return Self.response(400, VerifyReceiptService.json(["error": "unreadable fault plan"])) }
            self.faults.set(plan)
            return Self.response(200, self.faultsJSON())
        }
        router.addSimulatorStatsRoutes(snapshot: stats.snapshot, reset: stats.reset) { Self.response($0, $1) }
        return router
    }

    /// Counts the call (and what it asks about), applies the fault plan, then answers with `body()` (HTTP status,
    /// body, status label).
    func appleCall<Subject: Hashable>(
        endpoint: String, subject: Subject, isVerifyReceipt: Bool, on eventLoop: any EventLoop,
        _ body: () -> (Int, ByteBuffer, String)
    ) async -> Response {
        stats.record(endpoint: endpoint, subject: subject)
        let (delayMs, outcome) = faults.draw()
        // On the connection's event loop: a timer there costs far less than a Task.sleep per request.
        if delayMs > 0 { await eventLoop.simulatorDelay(milliseconds: delayMs) }
        switch outcome {
        case .timeout(let holdMs):
            stats.record(status: "timeout")
            await eventLoop.simulatorDelay(milliseconds: Double(holdMs))
            return Self.response(504, [])
        case .http503:
            stats.record(status: "http_503")
            return Self.response(503, [])
        case .http429(let retryAfterMs):
            stats.record(status: "http_429")
            var response = Self.response(
                429, VerifyReceiptService.json(["errorCode": 4_290_000, "errorMessage": "Rate limit exceeded."]))
            response.headers[.retryAfter] = String(retryAfterMs)
            return response
        case .status21005:
            if isVerifyReceipt {
                stats.record(status: "21005")
                return Self.response(200, VerifyReceiptService.statusOnly(21005).body)
            }
            stats.record(status: "5000001")
            return Self.response(
                500,
                VerifyReceiptService.json([
                    "errorCode": 5_000_001, "errorMessage": "An unknown error occurred. Please try again.",
                ]))
        case .answer:
            let (status, buffer, label) = body()
            stats.record(status: label)
            return Self.response(status, buffer)
        }
    }

    private func faultsJSON() -> [UInt8] {
        let (plan, remaining) = faults.current()
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        var object =
            ((try? JSONSerialization.jsonObject(with: encoder.encode(plan))) as? [String: Any]) ?? [:]
        if let remaining { object["remaining_s"] = remaining }
        return VerifyReceiptService.json(object)
    }

    static func response(_ status: Int, _ body: [UInt8], contentType: String = "application/json") -> Response {
        response(status, ByteBuffer(bytes: body), contentType: contentType)
    }

    static func response(_ status: Int, _ body: ByteBuffer, contentType: String = "application/json") -> Response {
        var headers = HTTPFields()
        if body.readableBytes > 0 { headers[.contentType] = contentType }
        return Response(
            status: HTTPResponse.Status(code: status), headers: headers, body: ResponseBody(byteBuffer: body))
    }

    /// Reads `POST /sim/mint` JSON.
    static func mintRequest(from bytes: [UInt8]) throws -> MintRequest {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any] else {
            throw AppleSimulatorError(.invalidRequest, "the body must be a JSON object")
        }
        guard let bundleId = object["bundle_id"] as? String, let productId = object["product_id"] as? String else {
            throw AppleSimulatorError(.invalidRequest, "bundle_id and product_id are required")
        }
        let format =
            try (object["format"] as? String).map {
                guard let format = SimulatedReceiptFormat(rawValue: $0) else {
                    throw AppleSimulatorError(
                        .invalidRequest, "format must be app_receipt, transaction_receipt or signed_transaction")
                }
                return format
            } ?? .appReceipt
        let environment =
            try (object["environment"] as? String).map {
                guard let environment = AppleEnvironment(rawValue: $0), AppleEnvironment.simulated.contains(environment)
                else {
                    throw AppleSimulatorError(.invalidRequest, "environment must be Production or Sandbox")
                }
                return environment
            } ?? .production
        var expires: Int64?
        if let raw = object["expires_at"], !(raw is NSNull) {
            guard let ms = milliseconds(raw) else {
                throw AppleSimulatorError(.invalidRequest, "expires_at must be RFC 3339 or milliseconds since 1970")
            }
            expires = ms
        }
        var purchase: Int64?
        if let raw = object["purchase_date"], !(raw is NSNull) {
            guard let ms = milliseconds(raw) else {
                throw AppleSimulatorError(.invalidRequest, "purchase_date must be RFC 3339 or milliseconds")
            }
            purchase = ms
        }
        return MintRequest(
            bundleId: bundleId, productId: productId, format: format, environment: environment,
            expiresDateMs: expires, quantity: (object["quantity"] as? Int) ?? 1,
            originalTransactionId: object["original_transaction_id"] as? String, purchaseDateMs: purchase,
            productType: object["type"] as? String, appAccountToken: object["app_account_token"] as? String)
    }

    /// RFC 3339 text, a number of milliseconds, or such a number as text.
    static func milliseconds(_ raw: Any?) -> Int64? {
        switch raw {
        case let number as Int: return Int64(number)
        case let number as Double where number.isFinite && abs(number) < 1e15: return Int64(number)
        case let text as String: return Int64(text) ?? AppleDates.parseRFC3339(text)
        default: return nil
        }
    }
}
