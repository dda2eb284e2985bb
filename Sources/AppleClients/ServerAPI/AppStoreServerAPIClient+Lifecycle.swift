import Foundation
import Messages
import StoreHTTP

/// The endpoints a server that owns entitlements needs after a grant. Calls about a transaction fall back from
/// production to sandbox as ``AppStoreServerAPIClient/transactionInfo(transactionID:)`` does, unless `environment`
/// pins them; the notification endpoints have no id to look up, so they are always asked of one environment.
extension AppStoreServerAPIClient {
    /// `POST /inApps/v1/notifications/history`: one page of the notifications Apple sent (or failed to send).
    /// Every `signedPayload` is verified before the page is returned.
    public func notificationHistory(
        _ query: NotificationHistoryQuery, paginationToken: String? = nil, environment: AppleEnvironment
    ) async throws -> AppleOutcome<NotificationHistoryPage> {
        if let transactionID = query.transactionID, !PathIDKind.transaction.accepts(transactionID) {
            return .failed(AppleClientError(code: .invalidRequest, detail: PathIDKind.transaction.problem))
        }
        var items: [URLQueryItem] = []
        if let paginationToken { items.append(URLQueryItem(name: "paginationToken", value: paginationToken)) }
        let outcome = try await send(
            .post, path: "/inApps/v1/notifications/history", id: "", idKind: .none, query: items, body: query.body,
            only: environment)
        guard case .answered(let (json, answeredBy)) = outcome else { return outcome.mapFailure() }
        return try await verifying {
            let entries: [LenientJSON]
            switch json["notificationHistory"] {
            case nil: entries = []
            case .array(let list): entries = list
            default: throw malformed("`notificationHistory` is not an array")
            }
            var notifications: [NotificationHistoryItem] = []
            for entry in entries {
                guard let jws = entry["signedPayload"]?.stringValue else {
                    throw malformed("a history item has no `signedPayload`")
                }
                _ = try await verifiedJSON(jws)
                notifications.append(
                    NotificationHistoryItem(
                        signedPayload: jws, sendAttempts: try NotificationSendAttempt.list(entry["sendAttempts"])))
            }
            let hasMore = json["hasMore"]?.boolValue ?? false
            let token = json["paginationToken"]?.stringValue
            // A page that promises more without a way to get it would make a sweep loop forever.
            if hasMore && token == nil { throw malformed("`hasMore` without a `paginationToken`") }
            return NotificationHistoryPage(
                notifications: notifications, hasMore: hasMore, paginationToken: token, answeredBy: answeredBy)
        }
    }

    /// One page of `GET /inApps/v2/refund/lookup/{transactionId}`; pass the previous page's `revision` for the next.
    public func refundHistory(
        transactionID: String, revision: String? = nil, environment: AppleEnvironment? = nil
    ) async throws -> AppleOutcome<RefundHistoryPage> {
        try await signedTransactionPage(
            path: "/inApps/v2/refund/lookup/\(transactionID)", id: transactionID, revision: revision,
            environment: environment
        ) { json, answeredBy, transactions in
            RefundHistoryPage(
                transactions: transactions, revision: json["revision"]?.stringValue,
                hasMore: json["hasMore"]?.boolValue ?? false, answeredBy: answeredBy)
        }
    }

    /// `PUT /inApps/v2/transactions/consumption/{transactionId}` (Send Consumption Information V2). Apple answers
    /// 202 without a body.
    public func sendConsumptionInformation(
        transactionID: String, _ information: ConsumptionInformation, environment: AppleEnvironment? = nil
    ) async throws -> AppleOutcome<ServerAPIAcknowledgement> {
        let body: [UInt8]
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = .sortedKeys
            body = Array(try encoder.encode(information))
        } catch {
            return .failed(AppleClientError(code: .invalidRequest, detail: "the consumption information is not JSON"))
        }
        return try await acknowledged(
            .put, path: "/inApps/v2/transactions/consumption/\(transactionID)", id: transactionID, body: body,
            only: environment)
    }

    /// `POST /inApps/v1/transactions/{transactionId}/finish`: tells Apple the purchase was delivered.
    public func finishTransaction(
        transactionID: String, environment: AppleEnvironment? = nil
    ) async throws -> AppleOutcome<ServerAPIAcknowledgement> {
        try await acknowledged(
            .post, path: "/inApps/v1/transactions/\(transactionID)/finish", id: transactionID, body: nil,
            only: environment)
    }

    /// `PUT /inApps/v1/transactions/{originalTransactionId}/appAccountToken`. The token must be a UUID.
    public func setAppAccountToken(
        originalTransactionID: String, token: UUID, environment: AppleEnvironment? = nil
    ) async throws -> AppleOutcome<ServerAPIAcknowledgement> {
        let body = Array(#"{"appAccountToken":"\#(token.uuidString.lowercased())"}"#.utf8)
        return try await acknowledged(
            .put, path: "/inApps/v1/transactions/\(originalTransactionID)/appAccountToken", id: originalTransactionID,
            body: body, only: environment)
    }

    /// `GET /inApps/v1/transactions/appTransactions/{transactionId}`: the app's purchase, verified.
    public func appTransactionInfo(
        transactionID: String, environment: AppleEnvironment? = nil
    ) async throws -> AppleOutcome<AppTransactionInfo> {
        let outcome = try await send(
            .get, path: "/inApps/v1/transactions/appTransactions/\(transactionID)", id: transactionID,
            only: environment)
        guard case .answered(let (json, answeredBy)) = outcome else { return outcome.mapFailure() }
        guard let jws = json["signedAppTransactionInfo"]?.stringValue else {
            return .failed(malformed("no `signedAppTransactionInfo` in the answer"))
        }
        return try await verifying {
            let payload = try await verifiedJSON(jws)
            guard payload.objectValue != nil else { throw malformed("the app transaction is not an object") }
            return AppTransactionInfo(
                appTransactionID: payload["appTransactionId"]?.stringValue,
                bundleID: payload["bundleId"]?.stringValue, appAppleID: payload["appAppleId"]?.int64Value,
                applicationVersion: payload["applicationVersion"]?.stringValue,
                originalApplicationVersion: payload["originalApplicationVersion"]?.stringValue,
                originalPurchaseDate: payload["originalPurchaseDate"]?.millisecondsDate,
                originalPlatform: payload["originalPlatform"]?.stringValue,
                environment: payload["receiptType"]?.stringValue.flatMap(AppleEnvironment.init(appleName:))
                    ?? payload["environment"]?.stringValue.flatMap(AppleEnvironment.init(appleName:)),
                answeredBy: answeredBy)
        }
    }

    /// `POST /inApps/v1/notifications/test`: asks Apple to send a TEST notification; returns its token.
    public func requestTestNotification(environment: AppleEnvironment) async throws -> AppleOutcome<String> {
        let outcome = try await send(
            .post, path: "/inApps/v1/notifications/test", id: "", idKind: .none, only: environment)
        guard case .answered(let (json, _)) = outcome else { return outcome.mapFailure() }
        guard let token = json["testNotificationToken"]?.stringValue, PathIDKind.token.accepts(token) else {
            return .failed(malformed("no usable `testNotificationToken` in the answer"))
        }
        return .answered(token)
    }

    /// `GET /inApps/v1/notifications/test/{testNotificationToken}`: the test notification and its delivery.
    public func testNotificationStatus(
        token: String, environment: AppleEnvironment
    ) async throws -> AppleOutcome<TestNotificationStatus> {
        let outcome = try await send(
            .get, path: "/inApps/v1/notifications/test/\(token)", id: token, idKind: .token, only: environment)
        guard case .answered(let (json, answeredBy)) = outcome else { return outcome.mapFailure() }
        guard let jws = json["signedPayload"]?.stringValue else {
            return .failed(malformed("no `signedPayload` in the answer"))
        }
        return try await verifying {
            _ = try await verifiedJSON(jws)
            var attempts = try NotificationSendAttempt.list(json["sendAttempts"])
            // Older answers carry only the first attempt's result.
            if attempts.isEmpty, let first = json["firstSendAttemptResult"]?.stringValue {
                attempts = [NotificationSendAttempt(attemptDate: nil, result: first)]
            }
            return TestNotificationStatus(signedPayload: jws, sendAttempts: attempts, answeredBy: answeredBy)
        }
    }

    /// A call whose success carries nothing but the environment that accepted it.
    private func acknowledged(
        _ method: TransportRequest.Method, path: String, id: String, body: [UInt8]?, only: AppleEnvironment?
    ) async throws -> AppleOutcome<ServerAPIAcknowledgement> {
        let outcome = try await send(method, path: path, id: id, body: body, only: only)
        guard case .answered(let (_, answeredBy)) = outcome else { return outcome.mapFailure() }
        return .answered(ServerAPIAcknowledgement(answeredBy: answeredBy))
    }
}
