import Foundation

/// A hand-rolled RFC 3339 reader for receipt dates (`2015-11-18T17:13:48Z`, `2023-10-19T02:45:36+0100`,
/// `+01:00`, optional fractional seconds). Foundation's date formatters are far slower and locale-sensitive.
enum RFC3339 {
    /// Seconds since 1970 for a receipt date, or nil when the text is empty or not a date.
    static func parse<Bytes: Collection<UInt8>>(_ text: Bytes) -> Date? where Bytes.Index == Int {
        guard text.count >= 19 else { return nil }
        let base = text.startIndex
        func digits(_ offset: Int, _ count: Int) -> Int? {
            var value = 0
            for index in offset..<(offset + count) {
                let byte = text[base + index]
                guard byte >= 0x30 && byte <= 0x39 else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            return value
        }
        guard let year = digits(0, 4), text[base + 4] == UInt8(ascii: "-"), let month = digits(5, 2),
            text[base + 7] == UInt8(ascii: "-"), let day = digits(8, 2),
            text[base + 10] == UInt8(ascii: "T") || text[base + 10] == UInt8(ascii: " "),
            let hour = digits(11, 2), text[base + 13] == UInt8(ascii: ":"), let minute = digits(14, 2),
            text[base + 16] == UInt8(ascii: ":"), let second = digits(17, 2),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second <= 60
        else { return nil }
        var position = 19
        var fraction = 0.0
        if position < text.count, text[base + position] == UInt8(ascii: ".") {
            position += 1
            var scale = 0.1
            while position < text.count, let digit = digits(position, 1) {
                fraction += Double(digit) * scale
                scale /= 10
                position += 1
            }
        }
        var offsetSeconds = 0
        guard position < text.count else { return nil }
        let zone = text[base + position]
        if zone == UInt8(ascii: "Z") || zone == UInt8(ascii: "z") {
            position += 1
        } else if zone == UInt8(ascii: "+") || zone == UInt8(ascii: "-") {
            guard let zoneHours = position + 3 <= text.count ? digits(position + 1, 2) : nil else { return nil }
            position += 3
            if position < text.count, text[base + position] == UInt8(ascii: ":") { position += 1 }
            guard let zoneMinutes = position + 2 <= text.count ? digits(position, 2) : nil else { return nil }
            position += 2
            offsetSeconds = (zoneHours * 3600 + zoneMinutes * 60) * (zone == UInt8(ascii: "+") ? 1 : -1)
        } else {
            return nil
        }
        guard position == text.count else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offsetSeconds
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }

    /// Days since 1970-01-01 in the proleptic Gregorian calendar (Howard Hinnant's algorithm).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// Formats a date as `YYYY-MM-DDTHH:MM:SSZ`, with milliseconds when the date has them.
    static func format(_ date: Date) -> String {
        let totalMilliseconds = Int((date.timeIntervalSince1970 * 1000).rounded(.down))
        var seconds = totalMilliseconds >= 0 ? totalMilliseconds / 1000 : (totalMilliseconds - 999) / 1000
        let milliseconds = totalMilliseconds - seconds * 1000
        var days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        seconds -= days * 86_400
        // civil_from_days
        days += 719_468
        let era = (days >= 0 ? days : days - 146_096) / 146_097
        let dayOfEra = days - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        func pad(_ value: Int, _ width: Int) -> String {
            let text = String(value)
            return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
        }
        let base =
            "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(seconds / 3600, 2)):\(pad(seconds / 60 % 60, 2)):\(pad(seconds % 60, 2))"
        return milliseconds == 0 ? base + "Z" : base + "." + pad(milliseconds, 3) + "Z"
    }
}

/// Public access to the receipt date reader and writer (for `inspect --at` and other consumers).
public enum ReceiptDates {
    /// Parses `2015-11-18T17:13:48Z`, `…+0100`, `…+01:00`, with optional fractional seconds.
    public static func parseRFC3339(_ text: String) -> Date? { RFC3339.parse(Array(text.utf8)) }
    /// Formats as `YYYY-MM-DDTHH:MM:SS[.mmm]Z`.
    public static func formatRFC3339(_ date: Date) -> String { RFC3339.format(date) }
}
