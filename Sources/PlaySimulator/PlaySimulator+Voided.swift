import Foundation
import Messages
import Synchronization

/// One voided order as the Voided Purchases API lists it: a refund, a revocation with refund or a chargeback.
public struct PlayVoidedPurchase: Sendable {
    /// Orders records voided in the same millisecond, for page tokens.
    public var key: String
    public var packageName: String
    public var purchaseToken: String
    public var orderId: String
    public var purchaseTime: Date
    /// When the order was voided; Google lists by when its systems saw it voided, which the simulator takes to be
    /// the same moment.
    public var voidedTime: Date
    /// 0 user, 1 developer, 2 Google.
    public var voidedSource: Int
    /// 0 other, 1 remorse, 2 not received, 3 defective, 4 accidental purchase, 5 fraud, 6 friendly fraud,
    /// 7 chargeback, 8 unacknowledged purchase.
    public var voidedReason: Int
    /// Set for a quantity-based partial refund only.
    public var voidedQuantity: Int?
    public var isSubscription: Bool

    func json() -> [String: Any] {
        var object: [String: Any] = [
            "kind": "androidpublisher#voidedPurchase", "purchaseToken": purchaseToken, "orderId": orderId,
            "purchaseTimeMillis": String(purchaseTime.epochMilliseconds),
            "voidedTimeMillis": String(voidedTime.epochMilliseconds), "voidedSource": voidedSource,
            "voidedReason": voidedReason,
        ]
        if let voidedQuantity { object["voidedQuantity"] = voidedQuantity }
        return object
    }
}

/// Google's record of voided orders, in the order they were voided.
final class PlayVoidedPurchases: Sendable {
    private let rows = Mutex<[PlayVoidedPurchase]>([])

    /// Adds a record; `make` gets a key unique among them.
    func add(_ make: (String) -> PlayVoidedPurchase) {
        rows.withLock { $0.append(make(String(format: "%010d", $0.count))) }
    }

    func all() -> [PlayVoidedPurchase] { rows.withLock { $0 } }
}

extension PlaySimulator {
    /// How far back the Voided Purchases API reaches.
    static let voidedWindow: TimeInterval = 30 * 86_400
    /// Google's default and largest page.
    static let voidedMaximumResults = 1000

    /// The page position a `nextPageToken` carries: the query's window and kind, and the last record listed.
    private struct VoidedPageToken: Codable {
        var startMs: Int64
        var endMs: Int64
        var type: Int
        var partial: Bool
        var afterMs: Int64
        var afterKey: String
    }

    /// `GET …/purchases/voidedpurchases`.
    func listVoidedPurchases(packageName: String, query: [String: String]) -> PlayReply {
        let now = clock.now()
        let nowMs = now.epochMilliseconds
        let oldestMs = now.addingTimeInterval(-Self.voidedWindow).epochMilliseconds
        func number(_ name: String) -> Int64?? {
            guard let raw = query[name] else { return .some(nil) }
            guard let value = Int64(raw) else { return nil }
            return .some(value)
        }
        guard let maxRaw = number("maxResults") else { return .invalid("Invalid value for maxResults.") }
        if let maxRaw, maxRaw < 0 { return .invalid("Invalid value for maxResults.") }
        // Google's default and largest page is 1000; a larger request gets 1000.
        let maxResults = maxRaw.map { $0 == 0 ? Self.voidedMaximumResults : Int(min($0, 1000)) } ?? 1000

        var position: VoidedPageToken
        if let token = query["token"], !token.isEmpty {
            // With a page token the window comes from the token, as Google ignores startTime and endTime then.
            guard let data = Base64URL.decode(token),
                let decoded = try? JSONDecoder().decode(VoidedPageToken.self, from: data)
            else { return .invalid("Invalid page token.") }
            position = decoded
        } else {
            guard let start = number("startTime"), let end = number("endTime") else {
                return .invalid("startTime and endTime must be milliseconds since the epoch.")
            }
            let startMs = start ?? oldestMs
            let endMs = end ?? nowMs
            if startMs < oldestMs { return .invalid("startTime cannot be more than 30 days in the past.") }
            if endMs > nowMs { return .invalid("endTime cannot be in the future.") }
            if startMs > endMs { return .invalid("startTime must not be after endTime.") }
            guard let typeRaw = number("type"), (typeRaw ?? 0) == 0 || typeRaw == 1 else {
                return .invalid("type must be 0 or 1.")
            }
            let partialRaw = query["includeQuantityBasedPartialRefund"]
            guard partialRaw == nil || partialRaw == "true" || partialRaw == "false" else {
                return .invalid("includeQuantityBasedPartialRefund must be true or false.")
            }
            position = VoidedPageToken(
                startMs: startMs, endMs: endMs, type: Int(typeRaw ?? 0), partial: partialRaw == "true",
                afterMs: Int64.min, afterKey: "")
        }
        // Records older than 30 days drop out, even in the middle of a pagination.
        let fromMs = max(position.startMs, oldestMs)
        let matching = voidedRecords(now: now).filter { row in
            let ms = row.voidedTime.epochMilliseconds
            return row.packageName == packageName && (ms, row.key) > (position.afterMs, position.afterKey)
                && (fromMs...position.endMs).contains(ms)
                && (position.type == 1 || !row.isSubscription) && (position.partial || row.voidedQuantity == nil)
        }.sorted { ($0.voidedTime.epochMilliseconds, $0.key) < ($1.voidedTime.epochMilliseconds, $1.key) }
        let page = Array(matching.prefix(maxResults))
        var answer: [String: Any] = [
            "pageInfo": ["resultPerPage": page.count, "startIndex": 0, "totalResults": matching.count]
        ]
        if !page.isEmpty { answer["voidedPurchases"] = page.map { $0.json() } }
        if matching.count > page.count, let last = page.last {
            position.afterMs = last.voidedTime.epochMilliseconds
            position.afterKey = last.key
            let token = Base64URL.encode((try? JSONEncoder().encode(position)) ?? Data())
            answer["tokenPagination"] = ["nextPageToken": token]
        }
        stats.record(voidedPage: page.count)
        return PlayReply(200, PlayAPIAnswers.json(answer))
    }

    /// The recorded voided orders, and the purchases Google refunded because nobody acknowledged them within three
    /// days (reason 8, source Google), which the clock decides without an event.
    func voidedRecords(now: Date) -> [PlayVoidedPurchase] {
        var rows = voided.all()
        for purchase in registry.all() where purchase.voidedAt == nil {
            guard let refunded = purchase.refundedAt(now: now), let orderId = purchase.latestOrderId else { continue }
            rows.append(
                PlayVoidedPurchase(
                    key: "u-" + orderId, packageName: purchase.packageName, purchaseToken: purchase.purchaseToken,
                    orderId: orderId, purchaseTime: purchase.purchaseTime, voidedTime: refunded, voidedSource: 2,
                    voidedReason: 8, voidedQuantity: nil, isSubscription: purchase.isSubscription))
        }
        return rows
    }
}
