import Crypto
import Foundation
import Messages
import Synchronization
import _CryptoExtras

/// The licensing key of each package: RSA-2048 (as the Play Console makes now), made at first use unless given.
/// The public half is what the Play Console shows: base64 of the X.509 SubjectPublicKeyInfo.
final class PlayLicensingKeys: Sendable {
    private let keys: Mutex<[String: _RSA.Signing.PrivateKey]>

    init(preset: [String: _RSA.Signing.PrivateKey]) {
        keys = Mutex(preset)
    }

    func key(for packageName: String) throws -> _RSA.Signing.PrivateKey {
        if let key = keys.withLock({ $0[packageName] }) { return key }
        let fresh = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        return keys.withLock { keys in
            if let existing = keys[packageName] { return existing }
            keys[packageName] = fresh
            return fresh
        }
    }

    /// The base64 SubjectPublicKeyInfo the Play Console shows for the package.
    func publicKeyBase64(for packageName: String) throws -> String {
        try key(for: packageName).publicKey.derRepresentation.base64EncodedString()
    }
}

/// A purchase as the client receives it from Play Billing: `Purchase.getOriginalJson()` and `getSignature()`.
public struct PlaySignedPurchase: Sendable {
    /// The exact JSON text; the signature covers these UTF-8 bytes.
    public let purchaseJSON: String
    /// Base64 of the SHA1withRSA (PKCS#1 v1.5) signature by the package's licensing key.
    public let signature: String
}

/// Google's JSON for the simulator's purchases: the API resources, the signed purchase data, the truth, and the
/// error envelope.
enum PlayAPIAnswers {
    // MARK: The purchase data Play Billing hands the app

    /// `originalJson` in Play Billing's key order. Pending purchases have no order id and `purchaseState` 4
    /// (Play Billing's PENDING; 0 is PURCHASED).
    static func purchaseJSON(_ purchase: PlayPurchase) -> String {
        var fields: [(String, String)] = []
        if let orderId = purchase.orderId { fields.append(("orderId", quote(orderId))) }
        fields.append(("packageName", quote(purchase.packageName)))
        fields.append(("productId", quote(purchase.productId)))
        fields.append(("purchaseTime", String(purchase.purchaseTime.epochMilliseconds)))
        fields.append(("purchaseState", purchase.completedAt == nil ? "4" : "0"))
        fields.append(("purchaseToken", quote(purchase.purchaseToken)))
        if let account = purchase.obfuscatedAccountId { fields.append(("obfuscatedAccountId", quote(account))) }
        if let profile = purchase.obfuscatedProfileId { fields.append(("obfuscatedProfileId", quote(profile))) }
        fields.append(("quantity", String(purchase.quantity)))
        if purchase.isSubscription {
            fields.append(("autoRenewing", purchase.autoRenewEnabled ? "true" : "false"))
        }
        fields.append(("acknowledged", purchase.acknowledgedAt == nil ? "false" : "true"))
        return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }

    static func sign(_ purchase: PlayPurchase, keys: PlayLicensingKeys) throws -> PlaySignedPurchase {
        let json = purchaseJSON(purchase)
        let key = try keys.key(for: purchase.packageName)
        let signature = try key.signature(
            for: Insecure.SHA1.hash(data: Data(json.utf8)), padding: .insecurePKCS1v1_5)
        return PlaySignedPurchase(purchaseJSON: json, signature: signature.rawRepresentation.base64EncodedString())
    }

    // MARK: The API's resources

    static func acknowledgementState(_ purchase: PlayPurchase) -> String {
        purchase.acknowledgedAt == nil ? "ACKNOWLEDGEMENT_STATE_PENDING" : "ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED"
    }

    /// `ProductPurchaseV2` (`purchases.productsv2.getproductpurchasev2`).
    static func productPurchaseV2(_ purchase: PlayPurchase, now: Date) -> [String: Any] {
        let state = purchase.state(now: now)
        let purchaseState: String
        switch state {
        case .pending: purchaseState = "PENDING"
        case .pendingCanceled, .refunded: purchaseState = "CANCELLED"
        default: purchaseState = "PURCHASED"
        }
        var offer: [String: Any] = [
            "quantity": purchase.quantity,
            "refundableQuantity": state == .purchased ? purchase.quantity - purchase.refundedQuantity : 0,
            "consumptionState": purchase.consumedAt == nil
                ? "CONSUMPTION_STATE_YET_TO_BE_CONSUMED" : "CONSUMPTION_STATE_CONSUMED",
        ]
        offer["offerTags"] = [String]()
        var object: [String: Any] = [
            "kind": "androidpublisher#productPurchaseV2",
            "productLineItem": [["productId": purchase.productId, "productOfferDetails": offer]],
            "purchaseStateContext": ["purchaseState": purchaseState],
            "acknowledgementState": acknowledgementState(purchase),
            "regionCode": purchase.regionCode,
        ]
        if let orderId = purchase.orderId { object["orderId"] = orderId }
        if let completed = purchase.completedAt { object["purchaseCompletionTime"] = RFC3339.format(completed) }
        if let account = purchase.obfuscatedAccountId { object["obfuscatedExternalAccountId"] = account }
        if let profile = purchase.obfuscatedProfileId { object["obfuscatedExternalProfileId"] = profile }
        if purchase.isTest { object["testPurchaseContext"] = ["fopType": "TEST"] }
        return object
    }

    /// `SubscriptionPurchaseV2` (`purchases.subscriptionsv2.get`).
    static func subscriptionPurchaseV2(_ purchase: PlayPurchase, now: Date) -> [String: Any] {
        let state = purchase.state(now: now)
        let subscriptionState: String
        var canceledContext: [String: Any]?
        switch state {
        case .pending: subscriptionState = "SUBSCRIPTION_STATE_PENDING"
        case .pendingCanceled: subscriptionState = "SUBSCRIPTION_STATE_PENDING_PURCHASE_CANCELED"
        case .active, .purchased: subscriptionState = "SUBSCRIPTION_STATE_ACTIVE"
        case .canceled:
            subscriptionState = "SUBSCRIPTION_STATE_CANCELED"
            canceledContext = userCancellation(purchase)
        case .expired:
            subscriptionState = "SUBSCRIPTION_STATE_EXPIRED"
            canceledContext =
                purchase.userCanceledAt != nil
                ? userCancellation(purchase) : ["systemInitiatedCancellation": [String: Any]()]
        case .refunded:
            subscriptionState = "SUBSCRIPTION_STATE_EXPIRED"
            canceledContext = ["systemInitiatedCancellation": [String: Any]()]
        case .replaced:
            subscriptionState = "SUBSCRIPTION_STATE_EXPIRED"
            canceledContext = ["replacementCancellation": [String: Any]()]
        case .revoked:
            subscriptionState = "SUBSCRIPTION_STATE_EXPIRED"
            canceledContext =
                purchase.revokedByDeveloper
                ? ["developerInitiatedCancellation": [String: Any]()]
                : ["systemInitiatedCancellation": [String: Any]()]
        case .inGracePeriod: subscriptionState = "SUBSCRIPTION_STATE_IN_GRACE_PERIOD"
        case .onHold: subscriptionState = "SUBSCRIPTION_STATE_ON_HOLD"
        case .paused: subscriptionState = "SUBSCRIPTION_STATE_PAUSED"
        }
        var item: [String: Any] = [
            "productId": purchase.productId,
            "offerDetails": ["basePlanId": purchase.basePlanId ?? "monthly", "offerTags": [String]()],
        ]
        if let expiry = effectiveExpiry(purchase, now: now) {
            item["expiryTime"] = RFC3339.format(expiry)
            // Auto-renew stays on while Google still tries to charge (grace period, hold) and while paused.
            let renewing: Set<PlayPurchaseState> = [.active, .inGracePeriod, .onHold, .paused]
            item["autoRenewingPlan"] = ["autoRenewEnabled": renewing.contains(state)]
        }
        if let latest = purchase.latestOrderId { item["latestSuccessfulOrderId"] = latest }
        var object: [String: Any] = [
            "kind": "androidpublisher#subscriptionPurchaseV2",
            "regionCode": purchase.regionCode,
            "subscriptionState": subscriptionState,
            "acknowledgementState": acknowledgementState(purchase),
            "lineItems": [item],
        ]
        if let completed = purchase.completedAt { object["startTime"] = RFC3339.format(completed) }
        if let linked = purchase.linkedPurchaseToken { object["linkedPurchaseToken"] = linked }
        if let canceledContext { object["canceledStateContext"] = canceledContext }
        if state == .paused, let resume = purchase.autoResumeTime {
            object["pausedStateContext"] = ["autoResumeTime": RFC3339.format(resume)]
        }
        var identifiers: [String: Any] = [:]
        if let account = purchase.obfuscatedAccountId { identifiers["obfuscatedExternalAccountId"] = account }
        if let profile = purchase.obfuscatedProfileId { identifiers["obfuscatedExternalProfileId"] = profile }
        if !identifiers.isEmpty { object["externalAccountIdentifiers"] = identifiers }
        if purchase.isTest { object["testPurchase"] = [String: Any]() }
        return object
    }

    /// When access ends: the period's end, brought forward to the refund or the replacement.
    static func effectiveExpiry(_ purchase: PlayPurchase, now: Date) -> Date? {
        guard var expiry = purchase.expiryTime else { return nil }
        if let refunded = purchase.refundedAt(now: now) { expiry = min(expiry, refunded) }
        if let replaced = purchase.replacedAt { expiry = min(expiry, replaced) }
        if let revoked = purchase.revokedAt { expiry = min(expiry, revoked) }
        if let voided = purchase.voidedAt { expiry = min(expiry, voided) }
        return expiry
    }

    private static func userCancellation(_ purchase: PlayPurchase) -> [String: Any] {
        var context: [String: Any] = [:]
        if let canceled = purchase.userCanceledAt { context["cancelTime"] = RFC3339.format(canceled) }
        return ["userInitiatedCancellation": context]
    }

    // MARK: The simulator's truth

    static func truth(_ purchase: PlayPurchase, now: Date) -> [String: Any] {
        var object: [String: Any] = [
            "purchase_token": purchase.purchaseToken,
            "package_name": purchase.packageName,
            "product_id": purchase.productId,
            "type": purchase.type.rawValue,
            "state": purchase.state(now: now).rawValue,
            "purchase_time_ms": purchase.purchaseTime.epochMilliseconds,
            "quantity": purchase.quantity,
            "test": purchase.isTest,
            "acknowledged": purchase.acknowledgedAt != nil,
            "consumed": purchase.consumedAt != nil,
            "renewals": purchase.renewals,
            "order_ids": orderIds(purchase),
            "reads": purchase.reads,
            "acknowledge_calls": purchase.acknowledgeCalls,
            "consume_calls": purchase.consumeCalls,
        ]
        let optional: [(String, Any?)] = [
            ("order_id", purchase.orderId),
            ("latest_order_id", purchase.latestOrderId),
            ("completed_at_ms", purchase.completedAt?.epochMilliseconds),
            ("acknowledged_at_ms", purchase.acknowledgedAt?.epochMilliseconds),
            ("consumed_at_ms", purchase.consumedAt?.epochMilliseconds),
            ("refunded_at_ms", purchase.refundedAt(now: now)?.epochMilliseconds),
            (
                "acknowledge_deadline_ms",
                purchase.completedAt.map { $0.addingTimeInterval(PlayPurchase.acknowledgementWindow).epochMilliseconds }
            ),
            ("expiry_time_ms", effectiveExpiry(purchase, now: now)?.epochMilliseconds),
            ("base_plan_id", purchase.basePlanId),
            ("linked_purchase_token", purchase.linkedPurchaseToken),
            ("replaced_by_token", purchase.replacedByToken),
            ("obfuscated_account_id", purchase.obfuscatedAccountId),
            ("obfuscated_profile_id", purchase.obfuscatedProfileId),
            ("developer_payload", purchase.developerPayload),
            ("voided_at_ms", purchase.voidedAt?.epochMilliseconds),
            ("grace_period_end_ms", purchase.gracePeriodEnd?.epochMilliseconds),
            (
                "on_hold_since_ms",
                purchase.state(now: now) == .onHold
                    ? (purchase.onHoldSince ?? purchase.gracePeriodEnd)?.epochMilliseconds : nil
            ),
            ("paused_at_ms", purchase.pausedAt?.epochMilliseconds),
            ("auto_resume_time_ms", purchase.autoResumeTime?.epochMilliseconds),
            ("revoked_at_ms", purchase.revokedAt?.epochMilliseconds),
        ]
        for (key, value) in optional { if let value { object[key] = value } }
        if purchase.isSubscription { object["auto_renew_enabled"] = purchase.autoRenewEnabled }
        object["voided"] = purchase.voidedAt != nil
        object["refunded_quantity"] = purchase.refundedQuantity
        object["entitled"] = purchase.isEntitled(now: now)
        object["google_state"] =
            purchase.isSubscription
            ? subscriptionPurchaseV2(purchase, now: now)["subscriptionState"] as? String ?? ""
            : (productPurchaseV2(purchase, now: now)["purchaseStateContext"] as? [String: Any])?["purchaseState"]
                as? String ?? ""
        return object
    }

    /// Every order of the purchase, first to latest.
    static func orderIds(_ purchase: PlayPurchase) -> [String] {
        guard let orderId = purchase.orderId else { return [] }
        return [orderId] + (0..<purchase.renewals).map { "\(orderId)..\($0)" }
    }

    // MARK: Errors and JSON

    /// Google's error envelope: `{"error": {"code", "message", "errors": [{"message", "domain", "reason", …}],
    /// "status"}}`.
    static func error(
        _ code: Int, _ message: String, status: String, reason: String, domain: String = "global",
        location: String? = nil, locationType: String? = nil
    ) -> [UInt8] {
        var detail: [String: Any] = ["message": message, "domain": domain, "reason": reason]
        if let location { detail["location"] = location }
        if let locationType { detail["locationType"] = locationType }
        return json(["error": ["code": code, "message": message, "errors": [detail], "status": status]])
    }

    static func json(_ object: Any) -> [UInt8] {
        Array(
            (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]))
                ?? Data("{}".utf8))
    }

    static func quote(_ text: String) -> String {
        String(
            decoding: (try? JSONSerialization.data(
                withJSONObject: text, options: [.fragmentsAllowed, .withoutEscapingSlashes])) ?? Data("\"\"".utf8),
            as: UTF8.self)
    }
}
