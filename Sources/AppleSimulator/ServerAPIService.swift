import Crypto
import Foundation
import Messages

/// The App Store Server API endpoints, for transactions the simulator minted:
/// Get Transaction Info (`GET /inApps/v1/transactions/{id}`), Get Transaction History v2
/// (`GET /inApps/v2/history/{id}`, 20 per page, `revision` query), Get All Subscription Statuses
/// (`GET /inApps/v1/subscriptions/{id}`). The sandbox host is simulated under the `/sandbox` prefix.
///
/// A transaction of the other environment answers 404 with error 4040010 (so clients retry at sandbox, as with
/// Apple); an unknown id answers 4040010 on Get Transaction Info and 4040005 (original transaction id not found)
/// on the others. Every request needs a Bearer JWT shaped like App Store Connect's (ES256 header with `kid`,
/// `aud` `appstoreconnect-v1`, `iss`, `bid`, an `exp` in the future); its signature is checked when a public key
/// is configured.
final class ServerAPIService: Sendable {
    struct Reply: Sendable {
        var httpStatus: Int
        var body: [UInt8]
        /// What `/sim/stats` counts: the Apple error code, or `http_<status>`.
        var statusLabel: String
    }

    static let pageSize = 20

    private let pki: SimulatorPKI
    private let registry: TransactionRegistry
    private let appAppleId: Int64
    private let apiPublicKey: P256.Signing.PublicKey?
    /// Listed apps by bundle id (``SimulatedApp``); empty: any `bid` is accepted and sees every transaction.
    private let apps: [String: SimulatedApp]
    private let now: @Sendable () -> Date

    init(
        pki: SimulatorPKI, registry: TransactionRegistry, appAppleId: Int64, apiPublicKey: P256.Signing.PublicKey?,
        apps: [SimulatedApp] = [], now: @escaping @Sendable () -> Date
    ) {
        self.apps = Dictionary(apps.map { ($0.bundleId, $0) }, uniquingKeysWith: { first, _ in first })
        self.pki = pki
        self.registry = registry
        self.appAppleId = appAppleId
        self.apiPublicKey = apiPublicKey
        self.now = now
    }

    // MARK: Authentication

    private struct JWTHeader: Decodable {
        var alg: String
        var kid: String?
        var typ: String?
    }

    private struct JWTClaims: Decodable {
        var iss: String?
        var iat: Double?
        var exp: Double?
        var aud: String?
        var bid: String?
    }

    /// Nil when the request may proceed, else the 401 to send.
    func rejectUnauthorized(_ authorization: String?) -> Reply? {
        let unauthorized = Reply(httpStatus: 401, body: [], statusLabel: "http_401")
        guard let authorization, authorization.hasPrefix("Bearer ") else { return unauthorized }
        let token = authorization.dropFirst("Bearer ".count)
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerData = Base64URL.decode(parts[0]),
            let claimsData = Base64URL.decode(parts[1]),
            let signatureData = Base64URL.decode(parts[2]),
            let header = try? JSONDecoder().decode(JWTHeader.self, from: headerData),
            let claims = try? JSONDecoder().decode(JWTClaims.self, from: claimsData),
            header.alg == "ES256", header.kid?.isEmpty == false,
            claims.aud == "appstoreconnect-v1", claims.iss?.isEmpty == false, claims.bid?.isEmpty == false,
            let exp = claims.exp, exp > now().timeIntervalSince1970
        else { return unauthorized }
        // With listed apps, a token speaks for one of them and is signed with that app's key (when it has one).
        var apiPublicKey = self.apiPublicKey
        if !apps.isEmpty {
            guard let app = apps[claims.bid ?? ""] else { return unauthorized }
            apiPublicKey = app.apiPublicKey ?? apiPublicKey
        }
        if let apiPublicKey {
            guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureData),
                apiPublicKey.isValidSignature(signature, for: Array("\(parts[0]).\(parts[1])".utf8))
            else { return unauthorized }
        }
        return nil
    }

    /// `answer()` to a Server API request about transaction `id`, unless its token is refused
    /// (``rejectUnauthorized(_:)``) or belongs to another app than the transaction (``rejectOtherApp(_:authorization:)``).
    func authorized(_ id: String, authorization: String?, _ answer: () -> Reply) -> Reply {
        rejectUnauthorized(authorization) ?? rejectOtherApp(id, authorization: authorization) ?? answer()
    }

    /// With listed apps: Apple's 404 4040010 when an accepted token's app is not the app of transaction `id`
    /// (an app's key sees only its own transactions). Nil when the request may proceed.
    func rejectOtherApp(_ id: String, authorization: String?) -> Reply? {
        guard !apps.isEmpty, let transaction = registry.transaction(id),
            transaction.bundleId != Self.bundleId(authorization)
        else { return nil }
        return Self.error(404, code: 4_040_010, message: "Transaction id not found.")
    }

    /// The `bid` claim of an accepted bearer token: the app the caller speaks for.
    static func bundleId(_ authorization: String?) -> String? {
        guard let token = authorization?.dropFirst("Bearer ".count) else { return nil }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let data = Base64URL.decode(parts[1]) else { return nil }
        return (try? JSONDecoder().decode(JWTClaims.self, from: data))?.bid
    }

    // MARK: Endpoints

    func transactionInfo(_ id: String, environment: AppleEnvironment) -> Reply {
        switch lookup(id, environment: environment, unknownCode: 4_040_010) {
        case .failure(let error): return error.reply
        case .success(let transaction):
            return sign {
                ["signedTransactionInfo": try SimulatedJWS.signTransaction(transaction, pki: pki, nowMs: $0)]
            }
        }
    }

    /// Get Refund History v2: the family's refunded transactions, 20 per page, `revision` an offset.
    func refundHistory(_ id: String, environment: AppleEnvironment, revision: String?) -> Reply {
        switch lookup(id, environment: environment, unknownCode: 4_040_010) {
        case .failure(let error): return error.reply
        case .success(let transaction):
            let refunded = registry.family(transaction.originalTransactionId).filter { $0.revocationDateMs != nil }
            guard let offset = Self.offset(revision, count: refunded.count) else {
                return Self.error(400, code: 4_000_005, message: "Invalid revision.")
            }
            return signedPage(refunded, from: offset)
        }
    }

    /// Get App Transaction Info: an app transaction for the app the transaction belongs to. The simulator models no
    /// Apple Accounts, so `appTransactionId` derives from the original transaction id.
    func appTransactionInfo(_ id: String, environment: AppleEnvironment) -> Reply {
        switch lookup(id, environment: environment, unknownCode: 4_040_010) {
        case .failure(let error): return error.reply
        case .success(let transaction):
            return sign { nowMs in
                let payload = AppTransactionPayload(
                    receiptType: environment.rawValue,
                    appAppleId: apps[transaction.bundleId]?.appAppleId ?? self.appAppleId,
                    bundleId: transaction.bundleId,
                    applicationVersion: "1", receiptCreationDate: nowMs,
                    originalPurchaseDate: transaction.originalPurchaseDateMs, originalApplicationVersion: "1.0",
                    appTransactionId: "7" + transaction.originalTransactionId, originalPlatform: "iOS",
                    signedDate: nowMs)
                return ["signedAppTransactionInfo": try SimulatedJWS.sign(payload, pki: self.pki)]
            }
        }
    }

    /// `JWSAppTransactionDecodedPayload`.
    struct AppTransactionPayload: Encodable {
        var receiptType: String
        var appAppleId: Int64
        var bundleId: String
        var applicationVersion: String
        var receiptCreationDate: Int64
        var originalPurchaseDate: Int64
        var originalApplicationVersion: String
        var appTransactionId: String
        var originalPlatform: String
        var signedDate: Int64
    }

    /// A page offset from a `revision`: nil (invalid) when it is not a number within `0...count`.
    static func offset(_ revision: String?, count: Int) -> Int? {
        guard let revision else { return 0 }
        guard let offset = Int(revision), (0...count).contains(offset) else { return nil }
        return offset
    }

    func history(_ id: String, environment: AppleEnvironment, revision: String?) -> Reply {
        switch lookup(id, environment: environment, unknownCode: 4_040_005) {
        case .failure(let error): return error.reply
        case .success(let transaction):
            let all = registry.family(transaction.originalTransactionId)
            let offset = revision.flatMap { Int($0) }.map { max(0, min($0, all.count)) } ?? 0
            return signedPage(
                all, from: offset,
                with: [
                    "bundleId": transaction.bundleId,
                    "appAppleId": apps[transaction.bundleId]?.appAppleId ?? appAppleId,
                    "environment": environment.rawValue,
                ])
        }
    }

    func subscriptions(_ id: String, environment: AppleEnvironment) -> Reply {
        switch lookup(id, environment: environment, unknownCode: 4_040_005) {
        case .failure(let error): return error.reply
        case .success(let transaction):
            let family = registry.family(transaction.originalTransactionId)
            return sign { nowMs in
                var data: [[String: Any]] = []
                if let latest = family.last, latest.isSubscription, let first = family.first {
                    let status = latest.subscriptionStatus(nowMs: nowMs)
                    data.append([
                        "subscriptionGroupIdentifier": SimulatedJWS.subscriptionGroup,
                        "lastTransactions": [
                            [
                                "originalTransactionId": latest.originalTransactionId,
                                "status": status,
                                "signedTransactionInfo": try SimulatedJWS.signTransaction(
                                    latest, pki: self.pki, nowMs: nowMs),
                                "signedRenewalInfo": try SimulatedJWS.signRenewalInfo(
                                    latest: latest, firstPurchaseMs: first.purchaseDateMs, pki: self.pki,
                                    nowMs: nowMs),
                            ] as [String: Any]
                        ],
                    ])
                }
                return [
                    "environment": environment.rawValue,
                    "appAppleId": self.apps[transaction.bundleId]?.appAppleId ?? self.appAppleId,
                    "bundleId": transaction.bundleId,
                    "data": data,
                ]
            }
        }
    }

    // MARK: Helpers

    func lookup(
        _ id: String, environment: AppleEnvironment, unknownCode: Int
    ) -> Result<SimulatedTransaction, ReplyError> {
        guard let transaction = registry.transaction(id) else {
            let message =
                unknownCode == 4_040_010 ? "Transaction id not found." : "Original transaction id not found."
            return .failure(ReplyError(Self.error(404, code: unknownCode, message: message)))
        }
        guard transaction.environment == environment else {
            return .failure(ReplyError(Self.error(404, code: 4_040_010, message: "Transaction id not found.")))
        }
        return .success(transaction)
    }

    /// One page of `transactions` from `offset` (``pageSize`` at most), signed, with its `revision` and `hasMore`
    /// and the answer's other `fields`.
    func signedPage(_ transactions: [SimulatedTransaction], from offset: Int, with fields: [String: Any] = [:]) -> Reply
    {
        let end = min(offset + Self.pageSize, transactions.count)
        return sign { nowMs in
            var page = fields
            page["revision"] = String(end)
            page["hasMore"] = end < transactions.count
            page["signedTransactions"] = try transactions[offset..<end].map {
                try SimulatedJWS.signTransaction($0, pki: pki, nowMs: nowMs)
            }
            return page
        }
    }

    func sign(_ body: (Int64) throws -> [String: Any]) -> Reply {
        do {
            let object = try body(AppleDates.nowMs(now()))
            return Reply(httpStatus: 200, body: VerifyReceiptService.json(object), statusLabel: "http_200")
        } catch {
            return Self.error(500, code: 5_000_000, message: "An unknown error occurred.")
        }
    }

    static func error(_ httpStatus: Int, code: Int, message: String) -> Reply {
        let body = VerifyReceiptService.json(["errorCode": code, "errorMessage": message])
        return Reply(httpStatus: httpStatus, body: body, statusLabel: String(code))
    }
}

/// A `Reply` carried through `Result`.
struct ReplyError: Error {
    var reply: ServerAPIService.Reply
    init(_ reply: ServerAPIService.Reply) { self.reply = reply }
}
