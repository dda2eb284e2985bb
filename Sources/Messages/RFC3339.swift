import Foundation

/// RFC 3339 date-times: the one codec of the codebase. The contract writes them `2026-11-22T05:17:53.123Z` (UTC,
/// milliseconds, rounded to the nearest millisecond) and reads them (any number of fractional digits or none, `Z`
/// or a numeric offset); receipts, the simulator's receipts and logs use the same reader and writer.
/// Hand-written because Foundation's formatter truncates instead of rounding, so a date would not survive a
/// round trip, and because verdict encoding and receipt parsing are on the hot path.
public enum RFC3339 {
    /// How many fractional digits ``format(_:precision:)`` writes.
    public enum Precision: Sendable, Hashable {
        /// Always `.mmm` (the contract's messages and logs).
        case milliseconds
        /// `.mmm` only when the date has milliseconds (`inspect`'s receipt dates: `2015-11-18T17:13:48Z`).
        case millisecondsWhenPresent
        /// Whole seconds, the fraction dropped (the dates inside a PKCS#7 receipt, as Apple writes them).
        case seconds
    }

    /// Formats a date in UTC with millisecond precision (the contract's form).
    public static func format(_ date: Date) -> String { format(date, precision: .milliseconds) }

    /// Formats a date in UTC with the given precision.
    public static func format(_ date: Date, precision: Precision) -> String {
        var totalMilliseconds = date.epochMilliseconds
        if precision == .millisecondsWhenPresent {
            // Receipt dates were always written truncated to the millisecond; `inspect` keeps printing them so.
            totalMilliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        } else if precision == .seconds {
            totalMilliseconds = floorDiv(Int64((date.timeIntervalSince1970 * 1000).rounded(.down)), 1000) * 1000
        }
        let omitsFraction = precision != .milliseconds && totalMilliseconds % 1000 == 0
        let milliseconds = Int(totalMilliseconds - floorDiv(totalMilliseconds, 1000) * 1000)
        let seconds = floorDiv(totalMilliseconds, 1000)
        let days = floorDiv(seconds, 86_400)
        let secondOfDay = Int(seconds - days * 86_400)
        let (year, month, day) = civilDate(fromDays: days)
        if (0...9999).contains(year), !omitsFraction {
            // Written into one buffer: every verdict's `decided_at` is formatted (twice), and the strings of the
            // padded fields and their concatenation were ~2 % of a worker's CPU in `bench pipeline` (b).
            return String(unsafeUninitializedCapacity: 24) { buffer in
                func put(_ value: Int, width: Int, at offset: Int) {
                    var rest = value
                    for position in (offset..<offset + width).reversed() {
                        buffer[position] = UInt8(ascii: "0") + UInt8(rest % 10)
                        rest /= 10
                    }
                }
                put(year, width: 4, at: 0)
                put(month, width: 2, at: 5)
                put(day, width: 2, at: 8)
                put(secondOfDay / 3600, width: 2, at: 11)
                put(secondOfDay / 60 % 60, width: 2, at: 14)
                put(secondOfDay % 60, width: 2, at: 17)
                put(milliseconds, width: 3, at: 20)
                buffer[4] = UInt8(ascii: "-")
                buffer[7] = UInt8(ascii: "-")
                buffer[10] = UInt8(ascii: "T")
                buffer[13] = UInt8(ascii: ":")
                buffer[16] = UInt8(ascii: ":")
                buffer[19] = UInt8(ascii: ".")
                buffer[23] = UInt8(ascii: "Z")
                return 24
            }
        }
        return pad(year, 4) + "-" + pad(month, 2) + "-" + pad(day, 2) + "T" + pad(secondOfDay / 3600, 2) + ":"
            + pad(secondOfDay / 60 % 60, 2) + ":" + pad(secondOfDay % 60, 2)
            + (omitsFraction ? "Z" : "." + pad(milliseconds, 3) + "Z")
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM|±HHMM)`; nil for anything else.
    public static func parse(_ text: String) -> Date? {
        var text = text
        return text.withUTF8 { parse($0) }
    }

    /// Parses the bytes of a date-time in place: receipts hold thousands of dates, read without making a
    /// `String` of each (`bench receipts` measures this path). Contiguous bytes rather than a generic collection,
    /// so callers in other modules get the specialised loop.
    public static func parse(_ b: UnsafeBufferPointer<UInt8>) -> Date? {
        func digits(_ start: Int, _ count: Int) -> Int? {
            guard start + count <= b.count else { return nil }
            var value = 0
            for i in start..<start + count {
                guard b[i] >= 0x30, b[i] <= 0x39 else { return nil }
                value = value * 10 + Int(b[i] - 0x30)
            }
            return value
        }
        guard b.count >= 20, b[4] == 0x2D, b[7] == 0x2D, b[10] == 0x54 || b[10] == 0x74 || b[10] == 0x20,
            b[13] == 0x3A, b[16] == 0x3A,
            let year = digits(0, 4), let month = digits(5, 2), let day = digits(8, 2),
            let hour = digits(11, 2), let minute = digits(14, 2), let second = digits(17, 2),
            (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day),
            hour < 24, minute < 60, second < 61
        else { return nil }
        var i = 19
        var fraction = 0.0
        if i < b.count, b[i] == 0x2E {
            i += 1
            var scale = 0.1
            let start = i
            while i < b.count, b[i] >= 0x30, b[i] <= 0x39 {
                // Digits past the 18th cannot change a Double; they are read, not refused.
                if i - start < 18 {
                    fraction += Double(b[i] - 0x30) * scale
                    scale /= 10
                }
                i += 1
            }
            guard i > start else { return nil }
        }
        guard i < b.count else { return nil }
        var offsetSeconds = 0
        switch b[i] {
        case 0x5A, 0x7A:  // Z
            i += 1
        case 0x2B, 0x2D:  // + or -
            let sign = b[i] == 0x2D ? -1 : 1
            guard let h = digits(i + 1, 2) else { return nil }
            var m: Int?
            if i + 3 < b.count, b[i + 3] == 0x3A {
                m = digits(i + 4, 2)
                i += 6
            } else {
                m = digits(i + 3, 2)
                i += 5
            }
            guard let minutes = m, h < 24, minutes < 60 else { return nil }
            offsetSeconds = sign * (h * 3600 + minutes * 60)
        default:
            return nil
        }
        guard i == b.count else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = days * 86_400 + Int64(hour * 3600 + minute * 60 + second) - Int64(offsetSeconds)
        // Round to the nearest microsecond so that parsing what `format` wrote gives back the same Date value.
        let interval = Double(seconds) + (fraction * 1_000_000).rounded() / 1_000_000
        return Date(timeIntervalSince1970: interval)
    }

    private static func floorDiv(_ a: Int64, _ b: Int64) -> Int64 { a >= 0 ? a / b : -((-a + b - 1) / b) }

    private static func pad(_ value: Int, _ width: Int) -> String {
        let s = String(value)
        return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
    }

    private static func isLeap(_ year: Int) -> Bool { year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    // Howard Hinnant's days-from-civil algorithms (proleptic Gregorian calendar).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let m = Int64(month)
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + Int64(day) - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    private static func civilDate(fromDays days: Int64) -> (Int, Int, Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = Int(doy - (153 * mp + 2) / 5 + 1)
        let month = Int(mp < 10 ? mp + 3 : mp - 9)
        let year = Int(yoe + era * 400) + (month <= 2 ? 1 : 0)
        return (year, month, day)
    }
}
