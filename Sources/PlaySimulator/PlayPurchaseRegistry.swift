import CodedErrors
import Foundation
import Messages
import Synchronization

/// What `POST /sim/mint` asks for (docs/PLAY-SIMULATOR.md).
public struct PlayMintRequest: Sendable {
    public var packageName: String
    public var productId: String
    public var type: ProductType
    public var quantity: Int = 1
    public var isTest: Bool = false
    /// A pending purchase: no order and not purchased until `completePending`.
    public var isPending: Bool = false
    public var obfuscatedAccountId: String?
    public var obfuscatedProfileId: String?
    public var regionCode: String = "US"
    /// Subscriptions: the base plan. Default: `monthly`.
    public var basePlanId: String?
    /// Subscriptions: the period. Default: 30 days.
    public var periodSeconds: TimeInterval = 30 * 86_400
    /// Subscriptions: the subscription this purchase replaces (upgrade, downgrade, resubscription).
    public var linkedPurchaseToken: String?

    public init(packageName: String, productId: String, type: ProductType) {
        self.packageName = packageName
        self.productId = productId
        self.type = type
    }
}

/// Why the simulator refused an operation; `message` names the field, never a token's whole text.
public typealias PlaySimulatorError = CodedError<PlaySimulatorErrorCode>

/// What the simulator refused (``PlaySimulatorError``'s codes).
public enum PlaySimulatorErrorCode: ErrorCodes {
    /// Bad input to a `/sim` route or an in-process call (HTTP 400).
    case invalidRequest
    /// No purchase with that token (HTTP 404).
    case notFound
    /// The purchase is in no state for the operation (HTTP 409 on `/sim` routes).
    case conflict
    /// The server or a key could not be made.
    case server

    /// The message alone: it names the field, and a `/sim` route answers it as its `error`.
    public static func description(of error: PlaySimulatorError) -> String { error.message }
}

/// Google's database of purchases, behind one lock. Each mutating call returns a copy of the row it changed.
final class PlayPurchaseRegistry: Sendable {
    private let purchases = Mutex<[String: PlayPurchase]>([:])

    func purchase(_ token: String) -> PlayPurchase? { purchases.withLock { $0[token] } }

    /// Runs `body` on every row under the lock.
    func withRows<R>(_ body: (inout [String: PlayPurchase]) -> R) -> R { purchases.withLock { body(&$0) } }

    func all() -> [PlayPurchase] { purchases.withLock { Array($0.values) } }

    /// Adds a purchase minted now; a linked subscription is marked replaced by it.
    func mint(_ request: PlayMintRequest, now: Date) throws(PlaySimulatorError) -> PlayPurchase {
        for (name, value) in [("package_name", request.packageName), ("product_id", request.productId)] {
            guard PlayIdentifiers.isName(value) else {
                throw PlaySimulatorError(.invalidRequest, "\(name) must be 1-200 of [A-Za-z0-9._-]")
            }
        }
        guard request.type != .nonRenewing else {
            throw PlaySimulatorError(.invalidRequest, "type: Google Play has no non_renewing products")
        }
        guard (1...1000).contains(request.quantity) else {
            throw PlaySimulatorError(.invalidRequest, "quantity must be 1...1000")
        }
        if request.type == .autoRenewable {
            // Google's longest billing period is a year; the cap keeps every date writable.
            guard request.periodSeconds.isFinite, (60...(400 * 86_400)).contains(request.periodSeconds) else {
                throw PlaySimulatorError(.invalidRequest, "period must be 60 seconds to 400 days")
            }
            if let basePlan = request.basePlanId, !PlayIdentifiers.isName(basePlan) {
                throw PlaySimulatorError(.invalidRequest, "base_plan_id must be 1-200 of [A-Za-z0-9._-]")
            }
        } else if request.linkedPurchaseToken != nil {
            throw PlaySimulatorError(.invalidRequest, "linked_purchase_token: only a subscription replaces another")
        }
        for (name, value) in [
            ("obfuscated_account_id", request.obfuscatedAccountId),
            ("obfuscated_profile_id", request.obfuscatedProfileId),
        ] {
            // Play Billing refuses obfuscated ids longer than 64 characters.
            if let value, value.isEmpty || value.count > 64 {
                throw PlaySimulatorError(.invalidRequest, "\(name) must be 1-64 characters")
            }
        }
        var purchase = PlayPurchase(
            purchaseToken: PlayIdentifiers.purchaseToken(), packageName: request.packageName,
            productId: request.productId, type: request.type,
            orderId: request.isPending ? nil : PlayIdentifiers.orderId(), purchaseTime: now,
            completedAt: request.isPending ? nil : now)
        purchase.quantity = request.quantity
        purchase.isTest = request.isTest
        purchase.obfuscatedAccountId = request.obfuscatedAccountId
        purchase.obfuscatedProfileId = request.obfuscatedProfileId
        purchase.regionCode = request.regionCode
        if request.type == .autoRenewable {
            purchase.basePlanId = request.basePlanId ?? "monthly"
            purchase.periodSeconds = request.periodSeconds
            purchase.expiryTime = request.isPending ? nil : now.addingTimeInterval(request.periodSeconds)
            purchase.linkedPurchaseToken = request.linkedPurchaseToken
        }
        return try purchases.withLock { (rows) throws(PlaySimulatorError) -> PlayPurchase in
            if let linked = request.linkedPurchaseToken {
                guard var old = rows[linked] else {
                    throw PlaySimulatorError(.invalidRequest, "linked_purchase_token: no such purchase")
                }
                guard old.isSubscription, old.packageName == request.packageName else {
                    throw PlaySimulatorError(
                        .invalidRequest, "linked_purchase_token: not a subscription of \(request.packageName)")
                }
                guard old.replacedByToken == nil else {
                    throw PlaySimulatorError(.invalidRequest, "linked_purchase_token: already replaced")
                }
                // The old subscription ends when its replacement is bought (Google's immediate replacement modes).
                if !request.isPending {
                    old.replacedByToken = purchase.purchaseToken
                    old.replacedAt = now
                    rows[linked] = old
                }
            }
            rows[purchase.purchaseToken] = purchase
            return purchase
        }
    }

    /// Applies `change` to the purchase with `token` under the lock and returns the changed row.
    func update(
        _ token: String, _ change: (inout PlayPurchase) throws(PlaySimulatorError) -> Void
    ) throws(PlaySimulatorError) -> PlayPurchase {
        try purchases.withLock { (rows) throws(PlaySimulatorError) -> PlayPurchase in
            guard var purchase = rows[token] else { throw PlaySimulatorError(.notFound, "no such purchase token") }
            try change(&purchase)
            rows[token] = purchase
            return purchase
        }
    }

    /// Completes a pending purchase: its order is created now, and a linked subscription is replaced now.
    func completePending(_ token: String, now: Date) throws(PlaySimulatorError) -> PlayPurchase {
        try purchases.withLock { (rows) throws(PlaySimulatorError) -> PlayPurchase in
            guard var purchase = rows[token] else { throw PlaySimulatorError(.notFound, "no such purchase token") }
            guard purchase.completedAt == nil, purchase.pendingCancelledAt == nil else {
                throw PlaySimulatorError(.conflict, "the purchase is not pending")
            }
            purchase.completedAt = now
            purchase.orderId = PlayIdentifiers.orderId()
            if purchase.isSubscription {
                purchase.expiryTime = now.addingTimeInterval(purchase.periodSeconds)
                if let linked = purchase.linkedPurchaseToken, var old = rows[linked], old.replacedByToken == nil {
                    old.replacedByToken = token
                    old.replacedAt = now
                    rows[linked] = old
                }
            }
            rows[token] = purchase
            return purchase
        }
    }
}

/// Google's identifiers, as they look.
enum PlayIdentifiers {
    /// Package names, product ids and base plan ids: 1-200 of `[A-Za-z0-9._-]`.
    static func isName(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 200 && text.utf8.allSatisfy(isTokenByte)
    }

    static func isTokenByte(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
            || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
    }

    /// Google's order id form: `GPA.` and four groups of digits, `dddd-dddd-dddd-ddddd`.
    static func orderId() -> String {
        func digits(_ count: Int) -> String { String((0..<count).map { _ in "0123456789".randomElement()! }) }
        return "GPA.\(digits(4))-\(digits(4))-\(digits(4))-\(digits(5))"
    }

    /// A token shaped like Google's: 24 lowercase letters, a dot, then `AO-J1O` and 140 characters of base64url
    /// (only `A-Z a-z 0-9 . _ -`, as every Play token).
    static func purchaseToken() -> String {
        let letters = "abcdefghijklmnopqrstuvwxyz"
        let alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        let head = String((0..<24).map { _ in letters.randomElement()! })
        let tail = String((0..<140).map { _ in alphabet.randomElement()! })
        return "\(head).AO-J1O\(tail)"
    }
}
