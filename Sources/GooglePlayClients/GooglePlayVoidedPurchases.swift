import Foundation

/// One request of `purchases.voidedpurchases.list`: the purchases voided between two times, subscriptions included
/// (`type=1`), one page of at most ``maxResults``.
public struct GooglePlayVoidedPurchasesQuery: Sendable, Hashable {
    /// Google keeps voided purchases for 30 days and answers 400 to a `startTime` older than that.
    public static let historyLimit: Duration = .seconds(30 * 86_400)
    /// Kept off the 30-day edge so the request still holds when Google's clock runs a little ahead of ours.
    public static let edgeMargin: Duration = .seconds(600)
    /// Kept off "now" so an `endTime` is never in Google's future (400) when our clock runs a little ahead of Google's.
    public static let clockSkew: Duration = .seconds(5)
    /// Google's largest page.
    public static let largestPage = 1_000

    public var packageName: String
    /// The oldest time a purchase was seen voided.
    public var startTime: Date
    /// The newest time a purchase was seen voided.
    public var endTime: Date
    /// Purchases per page, 1 to 1,000.
    public var maxResults: Int
    /// `tokenPagination.nextPageToken` of the previous page; nil for the first.
    public var pageToken: String?

    public init(packageName: String, startTime: Date, endTime: Date, maxResults: Int = 1_000, pageToken: String? = nil)
    {
        self.packageName = packageName
        self.startTime = startTime
        self.endTime = endTime
        self.maxResults = min(max(maxResults, 1), Self.largestPage)
        self.pageToken = pageToken
    }

    /// The window Google accepts at `now`: `endTime` no later than now (less ``clockSkew``), `startTime` no older
    /// than 30 days (less ``edgeMargin``) and never after `endTime`.
    public static func clamp(start: Date, end: Date, now: Date) -> (start: Date, end: Date) {
        let latest = now.addingTimeInterval(-clockSkew.voidedSeconds)
        let oldest = now.addingTimeInterval(-historyLimit.voidedSeconds + edgeMargin.voidedSeconds)
        let end = min(end, latest)
        return (min(max(start, oldest), end), end)
    }

    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }
}

/// One page of `purchases.voidedpurchases.list`'s answer (`VoidedPurchasesListResponse`).
public struct GooglePlayVoidedPurchasesPage: Sendable, Hashable, Decodable {
    public var voidedPurchases: [GooglePlayVoidedPurchase]
    /// `tokenPagination.nextPageToken`: another page follows when present and not empty.
    public var nextPageToken: String?

    enum CodingKeys: String, CodingKey { case voidedPurchases, tokenPagination }
    struct TokenPagination: Decodable { var nextPageToken: String? }
}

// In an extension, so Swift still writes the memberwise initializer the tests build pages with.
extension GooglePlayVoidedPurchasesPage {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        voidedPurchases = try container.decodeIfPresent([GooglePlayVoidedPurchase].self, forKey: .voidedPurchases) ?? []
        nextPageToken = try container.decodeIfPresent(TokenPagination.self, forKey: .tokenPagination)?.nextPageToken
            .flatMap { $0.isEmpty ? nil : $0 }
    }
}

/// A `VoidedPurchase`: a purchase Google cancelled, refunded or charged back. Google writes its int64 times as JSON
/// strings; a field that is absent or not a number reads as nil, never as a failure of the page.
public struct GooglePlayVoidedPurchase: Sendable, Hashable, Decodable {
    public var orderID: String?
    public var purchaseToken: String?
    public var purchaseTimeMillis: Int64?
    public var voidedTimeMillis: Int64?
    /// 0 user, 1 developer, 2 Google.
    public var voidedSource: Int?
    /// 0 other, 1 remorse, 2 not received, 3 defective, 4 accidental purchase, 5 fraud, 6 friendly fraud,
    /// 7 chargeback, 8 unacknowledged purchase.
    public var voidedReason: Int?
    /// Present for a quantity-based partial refund: the quantity refunded.
    public var voidedQuantity: Int?

    enum CodingKeys: String, CodingKey {
        case orderID = "orderId", purchaseToken, purchaseTimeMillis, voidedTimeMillis, voidedSource, voidedReason
        case voidedQuantity
    }
}

// In an extension, so Swift still writes the memberwise initializer the tests build voided purchases with.
extension GooglePlayVoidedPurchase {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        orderID = try? container.decodeIfPresent(String.self, forKey: .orderID)
        purchaseToken = try? container.decodeIfPresent(String.self, forKey: .purchaseToken)
        purchaseTimeMillis = Self.int64(container, .purchaseTimeMillis)
        voidedTimeMillis = Self.int64(container, .voidedTimeMillis)
        voidedSource = try? container.decodeIfPresent(Int.self, forKey: .voidedSource)
        voidedReason = try? container.decodeIfPresent(Int.self, forKey: .voidedReason)
        voidedQuantity = try? container.decodeIfPresent(Int.self, forKey: .voidedQuantity)
    }

    /// Google's int64 as a string (as it documents), or as a number.
    private static func int64(_ container: KeyedDecodingContainer<CodingKeys>, _ key: CodingKeys) -> Int64? {
        if let text = try? container.decodeIfPresent(String.self, forKey: key) { return Int64(text) }
        return try? container.decodeIfPresent(Int64.self, forKey: key)
    }
}

extension Duration {
    fileprivate var voidedSeconds: Double {
        Double(components.seconds) + Double(components.attoseconds) * 1e-18
    }
}
