import CodedErrors
import Foundation
import Hummingbird
import Messages
import NIOCore

/// The App Store Server API endpoints a server that owns entitlements needs, beyond the three lookups in
/// `ServerAPIService`: notification history, refund history, consumption information, finish, app account token,
/// app transaction info and test notifications. Same auth, error bodies, faults and sandbox prefix as the others.
extension AppleSimulator {
    typealias ServerAPIHandler =
        @Sendable (_ id: String, _ request: Request, _ body: [UInt8], _ environment: AppleEnvironment) ->
        ServerAPIService.Reply

    /// Apple's `deliveryStatus` values (Send Consumption Information V2).
    static let deliveryStatuses: Set<String> = [
        "DELIVERED", "UNDELIVERED_QUALITY_ISSUE", "UNDELIVERED_WRONG_ITEM", "UNDELIVERED_SERVER_OUTAGE",
        "UNDELIVERED_OTHER",
    ]
    /// Apple's `refundPreference` values (V2).
    static let refundPreferences: Set<String> = ["DECLINE", "GRANT_FULL", "GRANT_PRORATED"]
    /// How far back Get Notification History reaches (Apple: 180 days).
    static let historyReachMs: Int64 = 180 * 86_400_000

    func addLifecycleServerAPIRoutes(to router: Router<SimulatorRequestContext>) {
        for environment in AppleEnvironment.simulated {
            let prefix = environment == .production ? "" : "sandbox/"
            let routes: [(HTTPRequest.Method, String, String, ServerAPIHandler)] = [
                (
                    .post, "inApps/v1/notifications/history", "inApps/v1/notifications/history",
                    { _, request, body, environment in
                        self.notificationHistory(
                            body: body,
                            paginationToken: request.uri.queryParameters["paginationToken"].map(String.init),
                            environment: environment,
                            bundleId: ServerAPIService.bundleId(request.headers[.authorization]))
                    }
                ),
                (
                    .get, "inApps/v2/refund/lookup/:id", "inApps/v2/refund/lookup",
                    { id, request, _, environment in
                        self.serverAPI.refundHistory(
                            id, environment: environment,
                            revision: request.uri.queryParameters["revision"].map(String.init))
                    }
                ),
                (
                    .put, "inApps/v2/transactions/consumption/:id", "inApps/v2/transactions/consumption",
                    { id, _, body, environment in self.consumptionInformation(id, body: body, environment: environment)
                    }
                ),
                (
                    .post, "inApps/v1/transactions/:id/finish", "inApps/v1/transactions/finish",
                    { id, _, _, environment in self.finishTransaction(id, environment: environment) }
                ),
                (
                    .put, "inApps/v1/transactions/:id/appAccountToken", "inApps/v1/transactions/appAccountToken",
                    { id, _, body, environment in self.setAppAccountToken(id, body: body, environment: environment) }
                ),
                (
                    .get, "inApps/v1/transactions/appTransactions/:id", "inApps/v1/transactions/appTransactions",
                    { id, _, _, environment in self.serverAPI.appTransactionInfo(id, environment: environment) }
                ),
                (
                    .post, "inApps/v1/notifications/test", "inApps/v1/notifications/test",
                    { _, request, _, environment in
                        self.requestTestNotification(
                            bundleId: ServerAPIService.bundleId(request.headers[.authorization]) ?? "",
                            environment: environment)
                    }
                ),
                (
                    .get, "inApps/v1/notifications/test/:id", "inApps/v1/notifications/test/status",
                    { id, _, _, environment in self.testNotificationStatus(id, environment: environment) }
                ),
            ]
            for (method, path, name, handler) in routes {
                let statName = prefix + name
                router.on(RouterPath(prefix + path), method: method) { request, context -> Response in
                    let id = context.parameters.get("id") ?? ""
                    var request = request
                    let buffer = try await request.collectBody(upTo: 1 << 16)
                    let body = buffer.getBytes(at: buffer.readerIndex, length: buffer.readableBytes) ?? []
                    return await self.appleCall(
                        endpoint: statName, subject: id.isEmpty ? String(decoding: body, as: UTF8.self) : id,
                        isVerifyReceipt: false, on: context.eventLoop
                    ) {
                        let reply = self.serverAPI.authorized(id, authorization: request.headers[.authorization]) {
                            handler(id, request, body, environment)
                        }
                        return (reply.httpStatus, ByteBuffer(bytes: reply.body), reply.statusLabel)
                    }
                }
            }
        }
    }

    // MARK: Notification history

    /// Get Notification History (`NotificationHistoryRequest` → `NotificationHistoryResponse`), from the record of
    /// every notification and attempt, 20 per page in signing order. The pagination token is an opaque offset.
    func notificationHistory(
        body: [UInt8], paginationToken: String?, environment: AppleEnvironment, bundleId: String? = nil
    ) -> ServerAPIService.Reply {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] else {
            return ServerAPIService.error(400, code: 4_000_000, message: "Invalid request.")
        }
        guard let startMs = Self.milliseconds(object["startDate"]) else {
            return ServerAPIService.error(400, code: 4_000_015, message: "Invalid start date.")
        }
        guard let endMs = Self.milliseconds(object["endDate"]) else {
            return ServerAPIService.error(400, code: 4_000_016, message: "Invalid end date.")
        }
        guard startMs < endMs else {
            return ServerAPIService.error(400, code: 4_000_013, message: "Start date is after end date.")
        }
        guard startMs >= AppleDates.nowMs(configuration.now()) - Self.historyReachMs else {
            return ServerAPIService.error(400, code: 4_000_012, message: "Start date is too far in the past.")
        }
        var family: String?
        if let transactionId = object["transactionId"] as? String {
            // Any transaction of the customer's family selects the family; an unknown one selects nothing.
            family = registry.transaction(transactionId)?.originalTransactionId ?? ""
        }
        let records = notifications.history(
            environment: environment, startMs: startMs, endMs: endMs, type: object["notificationType"] as? String,
            subtype: object["notificationSubtype"] as? String, originalTransactionId: family,
            onlyFailures: (object["onlyFailures"] as? Bool) ?? false,
            // Apple keeps a history per app (the token's `bid`); a simulator of one app answers every token alike.
            bundleId: configuration.apps.isEmpty ? nil : bundleId ?? "")
        var offset = 0
        if let paginationToken {
            guard let decoded = Base64URL.decode(paginationToken),
                let text = String(data: decoded, encoding: .utf8), text.hasPrefix("sim-history:"),
                let value = Int(text.dropFirst("sim-history:".count)), (0...records.count).contains(value)
            else { return ServerAPIService.error(400, code: 4_000_014, message: "Invalid pagination token.") }
            offset = value
        }
        let end = min(offset + ServerAPIService.pageSize, records.count)
        var answer: [String: Any] = [
            "notificationHistory": records[offset..<end].map(Self.historyItem),
            "hasMore": end < records.count,
        ]
        if end < records.count {
            answer["paginationToken"] = Base64URL.encode(Array("sim-history:\(end)".utf8))
        }
        return ServerAPIService.Reply(
            httpStatus: 200, body: VerifyReceiptService.json(answer), statusLabel: "http_200")
    }

    static func historyItem(_ record: NotificationDispatcher.Record) -> [String: Any] {
        var item: [String: Any] = [
            "signedPayload": record.signedPayload,
            "sendAttempts": record.attempts.map {
                ["attemptDate": $0.dateMs, "sendAttemptResult": $0.result.rawValue] as [String: Any]
            },
        ]
        if let first = record.attempts.first { item["firstSendAttemptResult"] = first.result.rawValue }
        return item
    }

    // MARK: Consumption, finish, app account token

    /// Send Consumption Information V2: validates the body as Apple does and records it; 202 without a body.
    func consumptionInformation(
        _ id: String, body: [UInt8], environment: AppleEnvironment
    ) -> ServerAPIService.Reply {
        guard let request = try? JSONDecoder().decode(ConsumptionRequestBody.self, from: Data(body)) else {
            return ServerAPIService.error(400, code: 4_000_000, message: "Invalid request.")
        }
        guard request.customerConsented == true else {
            return ServerAPIService.error(400, code: 4_000_035, message: "Invalid customer consented.")
        }
        guard let status = request.deliveryStatus, Self.deliveryStatuses.contains(status) else {
            return ServerAPIService.error(400, code: 4_000_036, message: "Invalid delivery status.")
        }
        guard request.sampleContentProvided != nil else {
            return ServerAPIService.error(400, code: 4_000_041, message: "Invalid sample content provided.")
        }
        if request.hasConsumptionPercentage {
            guard let percentage = request.consumptionPercentage, (0...100_000).contains(percentage) else {
                return ServerAPIService.error(400, code: 4_000_000, message: "Invalid consumption percentage.")
            }
        }
        if request.hasRefundPreference {
            guard let preference = request.refundPreference, Self.refundPreferences.contains(preference) else {
                return ServerAPIService.error(400, code: 4_000_000, message: "Invalid refund preference.")
            }
        }
        if let percentage = request.consumptionPercentage, percentage != 0, request.deliveryStatus != "DELIVERED" {
            return ServerAPIService.error(
                400, code: 4_000_000, message: "Consumption percentage must be zero when not delivered.")
        }
        // Apple's rules on the share for the purchase's type (consumptionPercentage): none for an auto-renewable
        // subscription, whose share Apple reckons from the time elapsed; above 0 and below 100,000 with
        // GRANT_PRORATED for any other purchase.
        let shareRefusal = { (transaction: SimulatedTransaction) -> ServerAPIService.Reply? in
            let autoRenewable = transaction.productType == "Auto-Renewable Subscription"
            if request.hasConsumptionPercentage, autoRenewable {
                return ServerAPIService.error(
                    400, code: 4_000_000,
                    message: "Consumption percentage is not supported for auto-renewable subscriptions.")
            }
            if request.refundPreference == "GRANT_PRORATED", !autoRenewable,
                !(1..<100_000).contains(request.consumptionPercentage ?? 0)
            {
                return ServerAPIService.error(
                    400, code: 4_000_000,
                    message: "A prorated refund needs a consumption percentage above 0 and below 100000.")
            }
            return nil
        }
        return recording(id, environment: environment, httpStatus: 202, refusing: shareRefusal) { transaction in
            transaction.consumptionAnswers =
                (transaction.consumptionAnswers ?? []) + [
                    String(decoding: body, as: UTF8.self)
                ]
        }
    }

    /// Finish Transaction: counted per transaction; 200 without a body.
    func finishTransaction(_ id: String, environment: AppleEnvironment) -> ServerAPIService.Reply {
        recording(id, environment: environment, httpStatus: 200) { $0.finishCalls = ($0.finishCalls ?? 0) + 1 }
    }

    /// Set App Account Token: only on an original transaction id, and only a UUID (4000183); applies to the family.
    func setAppAccountToken(_ id: String, body: [UInt8], environment: AppleEnvironment) -> ServerAPIService.Reply {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any],
            let token = object["appAccountToken"] as? String, let uuid = UUID(uuidString: token)
        else { return ServerAPIService.error(400, code: 4_000_183, message: "Invalid app account token UUID.") }
        switch serverAPI.lookup(id, environment: environment, unknownCode: 4_040_010) {
        case .failure(let error): return error.reply
        case .success(let transaction):
            guard transaction.originalTransactionId == transaction.transactionId else {
                return ServerAPIService.error(
                    400, code: 4_000_185, message: "The transaction id is not an original transaction id.")
            }
            do {
                _ = try registry.updateFamily(id) { $0.appAccountToken = uuid.uuidString.lowercased() }
            } catch {
                return ServerAPIService.error(500, code: 5_000_000, message: "An unknown error occurred.")
            }
            return ServerAPIService.Reply(httpStatus: 200, body: [], statusLabel: "http_200")
        }
    }

    private func recording(
        _ id: String, environment: AppleEnvironment, httpStatus: Int,
        refusing refusal: (SimulatedTransaction) -> ServerAPIService.Reply? = { _ in nil },
        _ change: (inout SimulatedTransaction) -> Void
    ) -> ServerAPIService.Reply {
        switch serverAPI.lookup(id, environment: environment, unknownCode: 4_040_010) {
        case .failure(let error): return error.reply
        case .success(let transaction):
            if let refused = refusal(transaction) { return refused }
            do {
                _ = try registry.update(id, change)
            } catch {
                return ServerAPIService.error(500, code: 5_000_000, message: "An unknown error occurred.")
            }
            return ServerAPIService.Reply(httpStatus: httpStatus, body: [], statusLabel: "http_\(httpStatus)")
        }
    }

    // MARK: Test notifications

    /// Request a Test Notification: 4040007 without a notification URL.
    func requestTestNotification(bundleId: String, environment: AppleEnvironment) -> ServerAPIService.Reply {
        do {
            let token = try sendTestNotification(bundleId: bundleId, environment: environment)
            return ServerAPIService.Reply(
                httpStatus: 200, body: VerifyReceiptService.json(["testNotificationToken": token]),
                statusLabel: "http_200")
        } catch let error as AppleSimulatorError where error.code == .conflict {
            return ServerAPIService.error(404, code: 4_040_007, message: "Server notification URL not found.")
        } catch {
            return ServerAPIService.error(500, code: 5_000_000, message: "An unknown error occurred.")
        }
    }

    /// Get Test Notification Status: the payload and its attempts; 4040008 for a token it does not know.
    func testNotificationStatus(_ token: String, environment: AppleEnvironment) -> ServerAPIService.Reply {
        guard let record = notifications.record(testToken: token), record.environment == environment else {
            return ServerAPIService.error(404, code: 4_040_008, message: "Test notification not found.")
        }
        return ServerAPIService.Reply(
            httpStatus: 200, body: VerifyReceiptService.json(Self.historyItem(record)), statusLabel: "http_200")
    }
}

/// A `ConsumptionRequest` (V2) as received. Each field is read on its own, so a wrong type is reported with that
/// field's error code; a JSON number is no boolean here, as with Apple.
struct ConsumptionRequestBody: Decodable {
    var customerConsented: Bool?
    var deliveryStatus: String?
    var sampleContentProvided: Bool?
    var consumptionPercentage: Int?
    var hasConsumptionPercentage: Bool
    var refundPreference: String?
    var hasRefundPreference: Bool

    enum CodingKeys: String, CodingKey {
        case customerConsented, deliveryStatus, sampleContentProvided, consumptionPercentage, refundPreference
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        customerConsented = try? container.decodeIfPresent(Bool.self, forKey: .customerConsented)
        deliveryStatus = try? container.decodeIfPresent(String.self, forKey: .deliveryStatus)
        sampleContentProvided = try? container.decodeIfPresent(Bool.self, forKey: .sampleContentProvided)
        consumptionPercentage = try? container.decodeIfPresent(Int.self, forKey: .consumptionPercentage)
        hasConsumptionPercentage = container.contains(.consumptionPercentage)
        refundPreference = try? container.decodeIfPresent(String.self, forKey: .refundPreference)
        hasRefundPreference = container.contains(.refundPreference)
    }
}
