import CodedErrors
import Foundation
import Hummingbird
import Messages
import Operations

/// The simulator's own `/sim/*` routes: minting and the events of a purchase's life, service accounts, licensing
/// keys, the clock, faults, truth and counts. Never subject to faults; errors are `{"error": "…"}`.
extension PlaySimulator {
    func addSimulatorRoutes(to router: Router<BasicRequestContext>) {
        simPost(router, "sim/mint") { object in
            let minted = try self.mint(try Self.mintRequest(object), push: try Self.pushOptions(object["push"]))
            return Self.mintAnswer(minted.purchase, minted.signed)
        }
        simPost(router, "sim/renew") { object in
            let renewed = try self.renew(purchaseToken: try Self.token(object))
            return PlayAPIAnswers.truth(renewed, now: self.clock.now())
        }
        simPost(router, "sim/cancel") { object in
            let canceled = try self.cancelSubscription(purchaseToken: try Self.token(object))
            return PlayAPIAnswers.truth(canceled, now: self.clock.now())
        }
        simPost(router, "sim/pending/complete") { object in
            let completed = try self.completePending(purchaseToken: try Self.token(object))
            return Self.mintAnswer(completed.purchase, completed.signed)
        }
        simPost(router, "sim/pending/cancel") { object in
            let canceled = try self.cancelPending(purchaseToken: try Self.token(object))
            return PlayAPIAnswers.truth(canceled, now: self.clock.now())
        }
        simPost(router, "sim/service-accounts") { object in
            let packages = (object["packages"] as? [String]) ?? []
            let account = try self.issueServiceAccount(
                clientEmail: object["client_email"] as? String, packages: Set(packages))
            return (try? JSONSerialization.jsonObject(with: account.keyFileJSON())) as? [String: Any] ?? [:]
        }
        simPost(router, "sim/clock/advance") { object in
            guard let seconds = object["seconds"] as? Double, seconds.isFinite, (0...315_360_000).contains(seconds)
            else { throw PlaySimulatorError(.invalidRequest, "seconds must be 0 to 315360000 (ten years)") }
            self.clock.advance(by: seconds)
            return ["now_ms": self.clock.now().epochMilliseconds]
        }
        router.get("sim/clock") { _, _ -> Response in
            self.stats.record(request: "sim/clock")
            return Self.response(PlayReply(200, PlayAPIAnswers.json(["now_ms": self.clock.now().epochMilliseconds])))
        }
        router.get("sim/purchases/:token") { _, context -> Response in
            self.stats.record(request: "sim/purchases")
            guard let truth = self.truth(Self.parameter(context, "token")) else {
                return Self.simError(PlaySimulatorError(.notFound, "no such purchase token"))
            }
            return Self.response(PlayReply(200, PlayAPIAnswers.json(truth)))
        }
        router.get("sim/apps/:packageName/licensing-key") { _, context -> Response in
            self.stats.record(request: "sim/apps/licensing-key")
            let package = Self.parameter(context, "packageName")
            do {
                let key = try self.licensingKey(packageName: package)
                return Self.response(
                    PlayReply(200, PlayAPIAnswers.json(["package_name": package, "licensing_key": key])))
            } catch let error as PlaySimulatorError {
                return Self.simError(error)
            }
        }
        router.get("sim/faults") { _, _ -> Response in
            Self.response(PlayReply(200, PlayAPIAnswers.json(self.faults.report())))
        }
        router.post("sim/faults") { request, _ -> Response in
            try await Self.faultPlanAnswer(
                request, unreadable: "unreadable fault plan",
                apply: { (plan: PlayFaultPlan) throws(PlaySimulatorError) in try self.faults.set(plan) },
                report: { self.faults.report() })
        }
        addLifecycleRoutes(to: router)
        router.addSimulatorStatsRoutes(snapshot: stats.snapshot, reset: stats.reset) {
            Self.response(PlayReply($0, $1))
        }
    }

    /// A `POST /sim/…` route taking a JSON object and answering one, counted under its path.
    func simPost(
        _ router: Router<BasicRequestContext>, _ path: String,
        _ handle: @escaping @Sendable ([String: Any]) throws -> [String: Any]
    ) {
        router.post(RouterPath(path)) { request, _ -> Response in
            self.stats.record(request: path)
            let body = try await Self.bytes(of: request, upTo: self.configuration.maximumBodyBytes)
            guard
                let object = (try? JSONSerialization.jsonObject(with: Data(body.isEmpty ? Array("{}".utf8) : body)))
                    as? [String: Any]
            else { return Self.simError(PlaySimulatorError(.invalidRequest, "the body must be a JSON object")) }
            do {
                return Self.response(PlayReply(200, PlayAPIAnswers.json(try handle(object))))
            } catch let error as PlaySimulatorError {
                return Self.simError(error)
            } catch {
                return Self.simError(PlaySimulatorError(.server, "\(type(of: error))"))
            }
        }
    }

    /// Answers a `POST` of a fault plan (an empty body is `{}`): 400 `unreadable` when the body is not a plan, the
    /// error `apply` throws when it refuses the plan, else `report`, the faults now in force.
    static func faultPlanAnswer<Plan: Decodable>(
        _ request: Request, unreadable: String, apply: (Plan) throws(PlaySimulatorError) -> Void,
        report: () -> [String: Any]
    ) async throws -> Response {
        let body = try await bytes(of: request, upTo: 1 << 16)
        guard let plan = try? JSONDecoder().decode(Plan.self, from: Data(body.isEmpty ? Array("{}".utf8) : body))
        else { return simError(PlaySimulatorError(.invalidRequest, unreadable)) }
        do throws(PlaySimulatorError) {
            try apply(plan)
        } catch {
            return simError(error)
        }
        return response(PlayReply(200, PlayAPIAnswers.json(report())))
    }

    static func simError(_ error: PlaySimulatorError) -> Response {
        let status: Int
        switch error.code {
        case .invalidRequest: status = 400
        case .notFound: status = 404
        case .conflict: status = 409
        case .server: status = 500
        }
        return response(PlayReply(status, PlayAPIAnswers.json(["error": error.message])))
    }

    static func token(_ object: [String: Any]) throws(PlaySimulatorError) -> String {
        guard let token = object["purchase_token"] as? String, !token.isEmpty else {
            throw PlaySimulatorError(.invalidRequest, "purchase_token is required")
        }
        return token
    }

    /// Reads `POST /sim/mint` JSON.
    static func mintRequest(_ object: [String: Any]) throws(PlaySimulatorError) -> PlayMintRequest {
        guard let package = object["package_name"] as? String, let product = object["product_id"] as? String else {
            throw PlaySimulatorError(.invalidRequest, "package_name and product_id are required")
        }
        guard let typeName = object["type"] as? String, let type = ProductType(rawValue: typeName) else {
            throw PlaySimulatorError(.invalidRequest, "type must be consumable, non_consumable or auto_renewable")
        }
        var request = PlayMintRequest(packageName: package, productId: product, type: type)
        if let raw = object["quantity"] {
            guard let quantity = raw as? Int else {
                throw PlaySimulatorError(.invalidRequest, "quantity must be a number")
            }
            request.quantity = quantity
        }
        for (key, target) in [("test", \PlayMintRequest.isTest), ("pending", \PlayMintRequest.isPending)] {
            if let raw = object[key] {
                guard let flag = raw as? Bool else {
                    throw PlaySimulatorError(.invalidRequest, "\(key) must be a boolean")
                }
                request[keyPath: target] = flag
            }
        }
        for (key, target) in [
            ("obfuscated_account_id", \PlayMintRequest.obfuscatedAccountId),
            ("obfuscated_profile_id", \PlayMintRequest.obfuscatedProfileId),
            ("base_plan_id", \PlayMintRequest.basePlanId),
            ("linked_purchase_token", \PlayMintRequest.linkedPurchaseToken),
        ] {
            if let raw = object[key], !(raw is NSNull) {
                guard let text = raw as? String else {
                    throw PlaySimulatorError(.invalidRequest, "\(key) must be text")
                }
                request[keyPath: target] = text
            }
        }
        if let region = object["region_code"] as? String { request.regionCode = region }
        if let raw = object["period_s"] {
            guard let seconds = raw as? Double else {
                throw PlaySimulatorError(.invalidRequest, "period_s must be a number")
            }
            request.periodSeconds = seconds
        } else if let raw = object["period_days"] {
            guard let days = raw as? Double else {
                throw PlaySimulatorError(.invalidRequest, "period_days must be a number")
            }
            request.periodSeconds = days * 86_400
        }
        return request
    }

    static func mintAnswer(_ purchase: PlayPurchase, _ signed: PlaySignedPurchase) -> [String: Any] {
        var answer: [String: Any] = [
            "purchase_token": purchase.purchaseToken,
            "package_name": purchase.packageName,
            "product_id": purchase.productId,
            "type": purchase.type.rawValue,
            "purchase_time_ms": purchase.purchaseTime.epochMilliseconds,
            "purchase_json": signed.purchaseJSON,
            "signature": signed.signature,
        ]
        if let orderId = purchase.orderId { answer["order_id"] = orderId }
        if let expiry = purchase.expiryTime { answer["expiry_time_ms"] = expiry.epochMilliseconds }
        return answer
    }
}
