import CodedErrors
import Foundation
import Hummingbird
import Messages

/// `/sim` routes that trigger a purchase's lifecycle events, set the notification URL and report the truth.
extension AppleSimulator {
    typealias LifecycleOperation = @Sendable (_ body: [String: Any], _ id: String) throws -> SimulatedTransaction

    func addLifecycleRoutes(to router: Router<SimulatorRequestContext>) {
        let byTransaction: [(String, LifecycleOperation)] = [
            ("sim/refund/decline", { _, id in try self.declineRefund(transactionId: id) }),
            ("sim/refund/reverse", { _, id in try self.reverseRefund(transactionId: id) }),
            ("sim/revoke", { _, id in try self.revoke(transactionId: id) }),
            ("sim/family/share", { _, id in try self.shareWithFamily(transactionId: id) }),
            (
                "sim/consumption-request",
                { body, id in
                    try self.requestConsumption(
                        transactionId: id, reason: (body["reason"] as? String) ?? "UNINTENDED_PURCHASE")
                }
            ),
        ]
        for (path, operation) in byTransaction {
            addLifecycleRoute(router, path, key: "transaction_id", operation)
        }
        let bySubscription: [(String, LifecycleOperation)] = [
            ("sim/renew", { body, id in try self.renew(originalTransactionId: id, days: body["days"] as? Int) }),
            ("sim/expire", { _, id in try self.expire(originalTransactionId: id) }),
            (
                "sim/billing-retry",
                { body, id in
                    try self.startBillingRetry(originalTransactionId: id, graceDays: (body["grace_days"] as? Int) ?? 0)
                }
            ),
            (
                "sim/extend",
                { body, id in
                    guard let days = body["days"] as? Int else {
                        throw AppleSimulatorError(.invalidRequest, "days is required")
                    }
                    return try self.extend(originalTransactionId: id, days: days)
                }
            ),
            (
                "sim/price-increase",
                { body, id in
                    try self.priceIncrease(originalTransactionId: id, accepted: (body["accepted"] as? Bool) ?? false)
                }
            ),
        ]
        for (path, operation) in bySubscription {
            addLifecycleRoute(router, path, key: "original_transaction_id", operation)
        }

        router.get("sim/transactions/:id") { _, context -> Response in
            guard let truth = self.truth(transactionId: context.parameters.get("id") ?? "") else {
                return Self.response(404, VerifyReceiptService.json(["error": "unknown transaction_id"]))
            }
            return Self.response(200, VerifyReceiptService.json(truth))
        }
        router.get("sim/notifications/target") { _, _ -> Response in
            Self.response(
                200, VerifyReceiptService.json(["url": self.notifications.target.map { $0 as Any } ?? NSNull()]))
        }
        router.post("sim/notifications/target") { request, _ -> Response in
            self.stats.record(endpoint: "sim/notifications/target")
            let body = try await Self.jsonBody(request)
            let url = body?["url"] as? String
            guard let body, url != nil || body["url"] is NSNull else {
                return Self.response(400, VerifyReceiptService.json(["error": "url (a string or null) is required"]))
            }
            do {
                try self.setNotificationTarget(url)
            } catch let error as AppleSimulatorError {
                return Self.errorResponse(error)
            }
            return Self.response(200, VerifyReceiptService.json(["url": url.map { $0 as Any } ?? NSNull()]))
        }
        router.post("sim/notifications/test") { request, _ -> Response in
            self.stats.record(endpoint: "sim/notifications/test")
            let body = try await Self.jsonBody(request) ?? [:]
            let environment = (body["environment"] as? String).flatMap(AppleEnvironment.init(rawValue:)) ?? .production
            guard AppleEnvironment.simulated.contains(environment) else {
                return Self.response(
                    400, VerifyReceiptService.json(["error": "environment must be Production or Sandbox"]))
            }
            do {
                let token = try self.sendTestNotification(
                    bundleId: (body["bundle_id"] as? String) ?? "com.example.app", environment: environment)
                return Self.response(200, VerifyReceiptService.json(["test_notification_token": token]))
            } catch let error as AppleSimulatorError {
                return Self.errorResponse(error)
            }
        }
        router.get("sim/notifications") { _, _ -> Response in
            let records = self.notifications.records().map { record -> [String: Any] in
                var object: [String: Any] = [
                    "notification_uuid": record.uuid,
                    "notification_type": record.type,
                    "environment": record.environment.rawValue,
                    "signed_date_ms": record.signedDateMs,
                    "delivered": record.delivered,
                    "attempts": record.attempts.map {
                        ["date_ms": $0.dateMs, "result": $0.result.rawValue] as [String: Any]
                    },
                ]
                if let subtype = record.subtype { object["subtype"] = subtype }
                if let id = record.transactionId { object["transaction_id"] = id }
                if let id = record.originalTransactionId { object["original_transaction_id"] = id }
                return object
            }
            return Self.response(200, VerifyReceiptService.json(["notifications": records]))
        }
    }

    private func addLifecycleRoute(
        _ router: Router<SimulatorRequestContext>, _ path: String, key: String,
        _ operation: @escaping LifecycleOperation
    ) {
        router.post(RouterPath(path)) { request, _ -> Response in
            self.stats.record(endpoint: path)
            guard let body = try await Self.jsonBody(request), let id = body[key] as? String else {
                return Self.response(400, VerifyReceiptService.json(["error": "\(key) is required"]))
            }
            do {
                let transaction = try operation(body, id)
                return Self.response(
                    200, VerifyReceiptService.json(self.truth(transactionId: transaction.transactionId) ?? [:]))
            } catch let error as AppleSimulatorError {
                return Self.errorResponse(error)
            }
        }
    }

    /// A JSON object body (at most 64 KiB), or nil when the body is no JSON object.
    static func jsonBody(_ request: Request) async throws -> [String: Any]? {
        var request = request
        let buffer = try await request.collectBody(upTo: 1 << 16)
        let bytes = buffer.getBytes(at: buffer.readerIndex, length: buffer.readableBytes) ?? []
        return (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any]
    }

    static func errorResponse(_ error: AppleSimulatorError) -> Response {
        let status =
            switch error.code {
            case .unknownTransaction: 404
            case .conflict: 409
            case .invalidRequest: 400
            default: 500
            }
        return response(status, VerifyReceiptService.json(["error": error.message]))
    }
}
