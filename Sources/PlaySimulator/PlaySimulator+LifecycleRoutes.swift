import CodedErrors
import Foundation
import Hummingbird
import Messages

/// The `/sim/*` routes of a purchase's life after the grant: lifecycle events, test notifications, the push
/// configuration and faults, and the truth, reviews and pushes the chaos harness compares with the ledger.
extension PlaySimulator {
    func addLifecycleRoutes(to router: Router<BasicRequestContext>) {
        simPost(router, "sim/lifecycle") { object in
            guard let name = object["event"] as? String, let event = PlayLifecycleEvent(rawValue: name) else {
                throw PlaySimulatorError(
                    .invalidRequest,
                    "event must be one of \(PlayLifecycleEvent.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            let result = try self.lifecycle(try Self.token(object), event, options: try Self.lifecycleOptions(object))
            var answer: [String: Any] = [
                "purchase": PlayAPIAnswers.truth(result.purchase, now: self.clock.now()),
                "message_ids": result.messageIds,
            ]
            if let replacement = result.replacement, let signed = result.replacementSigned {
                answer["replacement"] = Self.mintAnswer(replacement, signed)
            }
            if let signed = result.signed {
                answer["purchase_json"] = signed.purchaseJSON
                answer["signature"] = signed.signature
            }
            if let review = result.review {
                answer["review"] = [
                    "order_id": review.orderId, "pending_refund_token": review.pendingRefundToken,
                    "created_at_ms": review.createdAt.epochMilliseconds,
                    "deadline_ms": review.deadline.epochMilliseconds,
                ]
            }
            return answer
        }
        simPost(router, "sim/test-notification") { object in
            guard let package = (object["package_name"] ?? object["package"]) as? String else {
                throw PlaySimulatorError(.invalidRequest, "package_name is required")
            }
            let messageId = try self.sendTestNotification(
                packageName: package, push: try Self.pushOptions(object["push"]))
            return messageId.map { ["message_id": $0] } ?? [:]
        }
        simPost(router, "sim/push/config") { object in
            try self.pushes.apply(object)
            return self.pushes.configurationReport()
        }
        router.get("sim/push/config") { _, _ -> Response in
            Self.response(PlayReply(200, PlayAPIAnswers.json(self.pushes.configurationReport())))
        }
        router.post("sim/push/faults") { request, _ -> Response in
            self.stats.record(request: "sim/push/faults")
            return try await Self.faultPlanAnswer(
                request, unreadable: "unreadable push fault plan",
                apply: { (plan: PlayPushFaultPlan) throws(PlaySimulatorError) in try self.pushes.setFaults(plan) },
                report: { self.pushes.faultReport() })
        }
        router.get("sim/push/faults") { _, _ -> Response in
            Self.response(PlayReply(200, PlayAPIAnswers.json(self.pushes.faultReport())))
        }
        router.post("sim/push/deliver") { _, _ -> Response in
            self.stats.record(request: "sim/push/deliver")
            let sent = await self.deliverDue()
            return Self.response(PlayReply(200, PlayAPIAnswers.json(["sent": sent])))
        }
        router.get("sim/pushes") { _, _ -> Response in
            self.stats.record(request: "sim/pushes")
            return Self.response(PlayReply(200, PlayAPIAnswers.json(self.pushes.report())))
        }
        router.get("sim/reviews") { _, _ -> Response in
            self.stats.record(request: "sim/reviews")
            return Self.response(PlayReply(200, PlayAPIAnswers.json(self.reviewsReport())))
        }
        router.get("sim/truth") { request, _ -> Response in
            self.stats.record(request: "sim/truth")
            let package = request.uri.queryParameters.get("package").map { String($0) }
            return Self.response(
                PlayReply(
                    200,
                    PlayAPIAnswers.json([
                        "now_ms": self.clock.now().epochMilliseconds,
                        "purchases": self.allTruth(packageName: package?.isEmpty == true ? nil : package),
                    ])))
        }
    }

    /// Reads `POST /sim/lifecycle`'s options.
    static func lifecycleOptions(_ object: [String: Any]) throws(PlaySimulatorError) -> PlayLifecycleOptions {
        var options = PlayLifecycleOptions()
        func seconds(_ key: String) throws(PlaySimulatorError) -> Double? {
            guard let raw = object[key] else { return nil }
            guard let value = raw as? Double, value.isFinite else {
                throw PlaySimulatorError(.invalidRequest, "\(key) must be a number")
            }
            return value
        }
        if let value = try seconds("grace_period_s") { options.gracePeriodSeconds = value }
        options.pauseSeconds = try seconds("pause_s")
        options.periodSeconds = try seconds("period_s")
        try readFlags(
            [("refund", \PlayLifecycleOptions.refund), ("approve", \PlayLifecycleOptions.approve)], of: object,
            into: &options)
        if let raw = object["quantity"] {
            guard let quantity = raw as? Int else {
                throw PlaySimulatorError(.invalidRequest, "quantity must be a number")
            }
            options.quantity = quantity
        }
        for (key, target) in [
            ("product_id", \PlayLifecycleOptions.productId), ("base_plan_id", \PlayLifecycleOptions.basePlanId),
        ] {
            if let raw = object[key] {
                guard let text = raw as? String, PlayIdentifiers.isName(text) else {
                    throw PlaySimulatorError(.invalidRequest, "\(key) must be 1-200 of [A-Za-z0-9._-]")
                }
                options[keyPath: target] = text
            }
        }
        options.push = try pushOptions(object["push"])
        return options
    }

    /// Sets each boolean `object` holds at one of `keys`; any other value there is refused, named by `prefix` and
    /// its key.
    static func readFlags<Options>(
        _ keys: [(String, WritableKeyPath<Options, Bool>)], of object: [String: Any], into options: inout Options,
        prefix: String = ""
    ) throws(PlaySimulatorError) {
        for (key, target) in keys {
            if let raw = object[key] {
                guard let flag = raw as? Bool else {
                    throw PlaySimulatorError(.invalidRequest, "\(prefix)\(key) must be a boolean")
                }
                options[keyPath: target] = flag
            }
        }
    }

    /// Reads a request's `push` object: `{"drop", "duplicate", "delay_s", "bad_token"}`.
    static func pushOptions(_ raw: Any?) throws(PlaySimulatorError) -> PlayPushOptions {
        var options = PlayPushOptions()
        guard let raw, !(raw is NSNull) else { return options }
        guard let object = raw as? [String: Any] else {
            throw PlaySimulatorError(.invalidRequest, "push must be an object")
        }
        try readFlags(
            [("drop", \PlayPushOptions.drop), ("duplicate", \PlayPushOptions.duplicate)], of: object, into: &options,
            prefix: "push.")
        if let value = object["delay_s"] {
            guard let delay = value as? Double, delay.isFinite, (0...(7 * 86_400)).contains(delay) else {
                throw PlaySimulatorError(.invalidRequest, "push.delay_s must be 0...604800")
            }
            options.delaySeconds = delay
        }
        if let value = object["bad_token"] {
            guard let name = value as? String, let kind = PlayPushFaultKind(rawValue: name), kind.isTokenFault else {
                throw PlaySimulatorError(
                    .invalidRequest, "push.bad_token must be wrong_key, wrong_audience or expired_token")
            }
            options.badToken = kind
        }
        return options
    }
}

extension PlayPushDispatcher {
    /// Applies `POST /sim/push/config`'s keys.
    func apply(_ object: [String: Any]) throws(PlaySimulatorError) {
        var configuration = self.configuration
        for (key, target) in [
            ("endpoint", \PlayPushConfiguration.endpoint), ("audience", \PlayPushConfiguration.audience),
        ] {
            if let raw = object[key] {
                if raw is NSNull {
                    configuration[keyPath: target] = nil
                } else {
                    guard let text = raw as? String, !text.isEmpty else {
                        throw PlaySimulatorError(.invalidRequest, "\(key) must be text or null")
                    }
                    configuration[keyPath: target] = text
                }
            }
        }
        for (key, target) in [
            ("subscription", \PlayPushConfiguration.subscription),
            ("service_account_email", \PlayPushConfiguration.serviceAccountEmail),
        ] {
            if let raw = object[key] {
                guard let text = raw as? String, !text.isEmpty else {
                    throw PlaySimulatorError(.invalidRequest, "\(key) must be text")
                }
                configuration[keyPath: target] = text
            }
        }
        for (key, target, range) in [
            ("min_backoff_s", \PlayPushConfiguration.minimumBackoff, 0.0...600),
            ("max_backoff_s", \PlayPushConfiguration.maximumBackoff, 0.0...600),
            ("retention_s", \PlayPushConfiguration.retention, 1.0...(31 * 86_400)),
        ] {
            if let raw = object[key] {
                guard let value = raw as? Double, range.contains(value) else {
                    throw PlaySimulatorError(
                        .invalidRequest, "\(key) must be \(range.lowerBound)...\(range.upperBound)")
                }
                configuration[keyPath: target] = value
            }
        }
        if let raw = object["jitter"] {
            guard let flag = raw as? Bool else { throw PlaySimulatorError(.invalidRequest, "jitter must be a boolean") }
            configuration.jitter = flag
        }
        if let raw = object["jwks_max_age"] {
            guard let value = raw as? Int, (0...86_400).contains(value) else {
                throw PlaySimulatorError(.invalidRequest, "jwks_max_age must be 0...86400")
            }
            configuration.jwksMaxAge = value
        }
        guard configuration.minimumBackoff <= configuration.maximumBackoff else {
            throw PlaySimulatorError(.invalidRequest, "min_backoff_s must not exceed max_backoff_s")
        }
        configure { $0 = configuration }
    }

    /// `GET /sim/push/config`.
    func configurationReport() -> [String: Any] {
        let configuration = self.configuration
        var object: [String: Any] = [
            "subscription": configuration.subscription, "service_account_email": configuration.serviceAccountEmail,
            "min_backoff_s": configuration.minimumBackoff, "max_backoff_s": configuration.maximumBackoff,
            "jitter": configuration.jitter, "retention_s": configuration.retention,
            "jwks_max_age": configuration.jwksMaxAge, "issuer": Self.issuer,
        ]
        if let endpoint = configuration.endpoint { object["endpoint"] = endpoint }
        if let audience = configuration.audience ?? configuration.endpoint { object["audience"] = audience }
        return object
    }
}
