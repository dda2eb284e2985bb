import Foundation

/// One answer of Google's: HTTP status, JSON body (empty for 204), and the headers Google adds.
struct PlayReply {
    var status: Int
    var body: [UInt8]
    var retryAfter: String?
    var wwwAuthenticate: String?

    init(_ status: Int, _ body: [UInt8] = [], retryAfter: String? = nil, wwwAuthenticate: String? = nil) {
        self.status = status
        self.body = body
        self.retryAfter = retryAfter
        self.wwwAuthenticate = wwwAuthenticate
    }

    /// 204 with no body: what Google answers a successful acknowledge or consume.
    static let noContent = PlayReply(204)

    static let unauthenticated = PlayReply(
        401,
        PlayAPIAnswers.error(
            401,
            "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other "
                + "valid authentication credential.",
            status: "UNAUTHENTICATED", reason: "authError", location: "Authorization", locationType: "header"),
        wwwAuthenticate: #"Bearer realm="https://accounts.google.com/", error="invalid_token""#)

    static let permissionDenied = PlayReply(
        401,
        PlayAPIAnswers.error(
            401, "The current user has insufficient permissions to perform the requested operation.",
            status: "UNAUTHENTICATED", reason: "permissionDenied", domain: "androidpublisher"))

    static let notFound = PlayReply(
        404,
        PlayAPIAnswers.error(
            404, "The purchase token was not found.", status: "NOT_FOUND", reason: "purchaseTokenNotFound",
            location: "token", locationType: "parameter"))

    static let noLongerValid = PlayReply(
        410,
        PlayAPIAnswers.error(
            410, "The purchase token is no longer valid.", status: "NOT_FOUND", reason: "purchaseTokenNoLongerValid",
            location: "token", locationType: "parameter"))

    static let invalidState = PlayReply(
        400,
        PlayAPIAnswers.error(
            400, "The purchase is not in a valid state to perform the desired operation.",
            status: "FAILED_PRECONDITION", reason: "invalidPurchaseState", domain: "androidpublisher",
            location: "token", locationType: "parameter"))

    static func invalid(_ message: String) -> PlayReply {
        PlayReply(400, PlayAPIAnswers.error(400, message, status: "INVALID_ARGUMENT", reason: "invalid"))
    }

    static let badJSON = PlayReply(
        400,
        PlayAPIAnswers.error(400, "Invalid JSON payload received.", status: "INVALID_ARGUMENT", reason: "parseError"))
}

extension PlaySimulator {
    /// How long Google keeps answering for an expired subscription's token; later reads answer 410.
    static let expiredTokenRetention: TimeInterval = 60 * 86_400

    /// The reply when `purchase` cannot be the subject of a call on `packageName` about a product of `kind`
    /// (and, for acknowledge and consume, `productId`); nil when it can.
    func misfit(
        _ purchase: PlayPurchase?, packageName: String, subscription: Bool, productId: String? = nil
    ) -> PlayReply? {
        guard let purchase else { return .notFound }
        guard purchase.packageName == packageName else {
            return .invalid("The purchase token does not match the package name.")
        }
        guard purchase.isSubscription == subscription else {
            return .invalid(
                subscription
                    ? "The purchase token is not a subscription." : "The purchase token is not an in-app product.")
        }
        if let productId, productId != purchase.productId {
            return .invalid("The purchase token does not match the product ID.")
        }
        return nil
    }

    /// `GET …/purchases/subscriptionsv2/tokens/{token}`.
    func getSubscriptionV2(packageName: String, token: String) -> PlayReply {
        let now = clock.now()
        return registry.withPurchase(token) { purchase in
            if let misfit = misfit(purchase, packageName: packageName, subscription: true) { return misfit }
            purchase!.reads += 1
            let row = purchase!
            if row.state(now: now) != .pending, let expiry = PlayAPIAnswers.effectiveExpiry(row, now: now),
                now.timeIntervalSince(expiry) > Self.expiredTokenRetention
            {
                return .noLongerValid
            }
            return PlayReply(200, PlayAPIAnswers.json(PlayAPIAnswers.subscriptionPurchaseV2(row, now: now)))
        }
    }

    /// `GET …/purchases/productsv2/tokens/{token}`.
    func getProductV2(packageName: String, token: String) -> PlayReply {
        let now = clock.now()
        return registry.withPurchase(token) { purchase in
            if let misfit = misfit(purchase, packageName: packageName, subscription: false) { return misfit }
            purchase!.reads += 1
            return PlayReply(200, PlayAPIAnswers.json(PlayAPIAnswers.productPurchaseV2(purchase!, now: now)))
        }
    }

    /// `POST …/purchases/products/{productId}/tokens/{token}:acknowledge` and
    /// `…/purchases/subscriptions/{subscriptionId}/tokens/{token}:acknowledge`. A purchase already acknowledged is
    /// answered 204 again and left as it is.
    func acknowledge(
        packageName: String, productId: String, token: String, subscription: Bool, body: [UInt8]
    ) -> PlayReply {
        var request: [String: Any] = [:]
        if !body.isEmpty {
            guard let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] else {
                return .badJSON
            }
            request = object
        }
        let now = clock.now()
        return registry.withPurchase(token) { purchase in
            if let misfit = misfit(purchase, packageName: packageName, subscription: subscription, productId: productId)
            {
                return misfit
            }
            purchase!.acknowledgeCalls += 1
            if purchase!.acknowledgedAt != nil { return .noContent }
            switch purchase!.state(now: now) {
            case .purchased, .active, .canceled, .inGracePeriod, .onHold, .paused: break
            default: return .invalidState
            }
            purchase!.acknowledgedAt = now
            purchase!.developerPayload = request["developerPayload"] as? String
            if subscription, let ids = request["externalAccountIds"] as? [String: Any] {
                if purchase!.obfuscatedAccountId == nil {
                    purchase!.obfuscatedAccountId = ids["obfuscatedAccountId"] as? String
                }
                if purchase!.obfuscatedProfileId == nil {
                    purchase!.obfuscatedProfileId = ids["obfuscatedProfileId"] as? String
                }
            }
            return .noContent
        }
    }

    /// `POST …/purchases/products/{productId}/tokens/{token}:consume`. Consuming acknowledges too (Play counts a
    /// consumed purchase as acknowledged); a purchase already consumed is answered 204 again.
    func consume(packageName: String, productId: String, token: String) -> PlayReply {
        let now = clock.now()
        return registry.withPurchase(token) { purchase in
            if let misfit = misfit(purchase, packageName: packageName, subscription: false, productId: productId) {
                return misfit
            }
            purchase!.consumeCalls += 1
            if purchase!.consumedAt != nil { return .noContent }
            guard purchase!.state(now: now) == .purchased else { return .invalidState }
            purchase!.consumedAt = now
            if purchase!.acknowledgedAt == nil { purchase!.acknowledgedAt = now }
            return .noContent
        }
    }
}

extension PlayPurchaseRegistry {
    /// Runs `body` with the row of `token` (nil when unknown) under the lock; a row it changes is stored.
    func withPurchase<R>(_ token: String, _ body: (inout PlayPurchase?) -> R) -> R {
        withRows { rows in
            var row = rows[token]
            let result = body(&row)
            if let row { rows[token] = row }
            return result
        }
    }
}
