import Foundation

/// Reads the stores' `Retry-After` headers.
public enum RetryAfter {
    /// The App Store Server API's form: a UNIX time in milliseconds. Returns the wait from `now` (never negative).
    public static func fromUnixMilliseconds(_ header: String?, now: Date) -> Duration? {
        guard let header, let millis = Int64(header.trimmingCharacters(in: .whitespaces)) else { return nil }
        let waitMillis = millis - Int64((now.timeIntervalSince1970 * 1000).rounded(.down))
        return .milliseconds(max(waitMillis, 0))
    }

    /// The HTTP form (RFC 9110): delay in seconds, or an HTTP date (verifyReceipt's, Google's).
    public static func fromHTTPHeader(_ header: String?, now: Date) -> Duration? {
        guard let header = header?.trimmingCharacters(in: .whitespaces), !header.isEmpty else { return nil }
        if let seconds = Int64(header) { return .seconds(max(seconds, 0)) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = formatter.date(from: header) else { return nil }
        return .milliseconds(max(Int64(date.timeIntervalSince(now) * 1000), 0))
    }
}
