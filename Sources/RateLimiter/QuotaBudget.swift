import CodedErrors
import Foundation

/// A budget of calls per fixed window shared by a set of endpoints: a store's quota, kept by the gate so that a
/// worker never spends past it (Google counts the Developer API's calls per project per day, and per quota bucket
/// per minute; a call past either quota is answered 429).
///
/// A call whose budget is spent waits for the next window when that window begins before the caller's deadline, and
/// is refused at once with ``AppleCallGateError/Code/quotaExhausted`` otherwise (a daily budget spent at noon is not
/// worth waiting for). A permit counts when it is issued, whether or not the call is then sent.
public struct QuotaBudget: Sendable, Hashable {
    /// How a budget's windows are cut.
    public enum Period: String, Sendable, Hashable {
        /// Whole minutes of the wall clock.
        case minute
        /// Days ending at midnight Pacific time (UTC-8, or UTC-7 on daylight time), the day Google's daily quota
        /// counts.
        case pacificDay = "pacific_day"
    }

    /// The budget's name, for logs and docs (`google_play_daily`, `google_play_subscriptions_minute`…).
    public var name: String
    /// Calls allowed per window; 0 refuses every call of its endpoints.
    public var limit: Int
    /// The window.
    public var period: Period
    /// The endpoints whose calls it counts.
    public var endpoints: Set<StoreEndpoint>

    public init(name: String, limit: Int, period: Period, endpoints: Set<StoreEndpoint>) {
        self.name = name
        self.limit = max(0, limit)
        self.period = period
        self.endpoints = endpoints
    }

    /// Google's default daily quota of the Developer API: 200,000 queries a day per project ("Quotas", Google Play
    /// Developer API).
    public static let googlePlayDailyQuota = 200_000
    /// Google's default per-minute quota of each Developer API quota bucket: 3,000 queries a minute ("Quotas", Google
    /// Play Developer API: Subscriptions and One-time Purchases are separate buckets).
    public static let googlePlayMinuteQuota = 3_000

    /// Google Play's budgets: one daily over every Developer API call, one per minute for the Subscriptions bucket
    /// (subscription read and acknowledge) and one per minute for the One-time Purchases bucket (product read,
    /// acknowledge and consume). An order's refund review answer counts against the daily quota only (it belongs to
    /// neither bucket). The token endpoint is outside the Developer API's quota.
    public static func googlePlayDefaults(
        daily: Int = googlePlayDailyQuota, perMinute: Int = googlePlayMinuteQuota
    ) -> [QuotaBudget] {
        let subscriptions: Set<StoreEndpoint> = [.playSubscriptionRead, .playSubscriptionAcknowledge]
        let oneTime: Set<StoreEndpoint> = [.playProductRead, .playProductAcknowledge, .playProductConsume]
        return [
            QuotaBudget(
                name: "google_play_daily", limit: daily, period: .pacificDay,
                endpoints: subscriptions.union(oneTime).union([.playOrderReviewRefund, .playVoidedPurchases])),
            QuotaBudget(
                name: "google_play_subscriptions_minute", limit: perMinute, period: .minute, endpoints: subscriptions),
            QuotaBudget(
                name: "google_play_one_time_purchases_minute", limit: perMinute, period: .minute, endpoints: oneTime),
        ]
    }

    /// The window holding `unixMilliseconds`, as milliseconds since 1970: its start and its end (exclusive).
    func window(containing unixMilliseconds: Int64) -> (start: Int64, end: Int64) {
        switch period {
        case .minute:
            let start = unixMilliseconds - ((unixMilliseconds % 60_000) + 60_000) % 60_000
            return (start, start + 60_000)
        case .pacificDay:
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = Self.pacific
            let date = Date(timeIntervalSince1970: Double(unixMilliseconds) / 1000)
            let start = calendar.startOfDay(for: date)
            let end = calendar.date(byAdding: .day, value: 1, to: start) ?? start.addingTimeInterval(86_400)
            return (
                Int64((start.timeIntervalSince1970 * 1000).rounded()),
                Int64((end.timeIntervalSince1970 * 1000).rounded())
            )
        }
    }

    /// California's time zone; a fixed UTC-8 if the system has no time zone data (the day is then an hour off
    /// Google's in summer).
    private static let pacific = TimeZone(identifier: "America/Los_Angeles") ?? TimeZone(secondsFromGMT: -8 * 3600)!
}

/// The calls counted in one budget's current window.
struct QuotaUsage {
    /// When the window ends, in milliseconds since 1970.
    var windowEnd: Int64
    /// Permits issued in it.
    var used: Int
}
