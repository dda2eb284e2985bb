import Foundation
import Messages

/// The date spellings Apple uses: RFC 3339 inside receipts, `2015-08-10 07:14:32 Etc/GMT` and the
/// `America/Los_Angeles` twin in verifyReceipt answers, and milliseconds since 1970 everywhere else.
enum AppleDates {
    static func nowMs(_ date: Date = Date()) -> Int64 {
        date.epochMilliseconds
    }

    static func date(_ ms: Int64) -> Date { Date(epochMilliseconds: ms) }

    /// `2015-08-10T07:14:32Z`, as in PKCS#7 receipt attributes (whole seconds).
    static func rfc3339(_ ms: Int64) -> String { RFC3339.format(date(ms), precision: .seconds) }

    /// Parses RFC 3339 with or without fractional seconds, `Z` or an offset (`+0100` in Xcode receipts).
    static func parseRFC3339(_ text: String) -> Int64? { RFC3339.parse(text).map { nowMs($0) } }

    /// `2015-08-10 07:14:32 Etc/GMT`.
    static func gmt(_ ms: Int64) -> String { format(ms, zone: "Etc/GMT", abbreviation: "UTC") }

    /// `2015-08-10 00:14:32 America/Los_Angeles`.
    static func pst(_ ms: Int64) -> String { format(ms, zone: "America/Los_Angeles", abbreviation: nil) }

    private static func format(_ ms: Int64, zone: String, abbreviation: String?) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone =
            TimeZone(identifier: zone) ?? abbreviation.flatMap { TimeZone(abbreviation: $0) } ?? .gmt
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
        return formatter.string(from: date(ms)) + " " + zone
    }
}
