import Foundation

/// RFC 3339 date-times as the contract writes them (`2026-11-22T05:17:53.123Z`, always UTC with milliseconds)
/// and reads them (with or without fractional seconds, `Z` or a numeric offset).
public enum RFC3339 {
    public static func format(_ date: Date) -> String {
        date.formatted(formatStyle)
    }

    public static func parse(_ text: String) -> Date? {
        if let date = try? formatStyle.parse(text) { return date }
        return try? Date.ISO8601FormatStyle(includingFractionalSeconds: false).parse(text)
    }

    private static let formatStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
}
