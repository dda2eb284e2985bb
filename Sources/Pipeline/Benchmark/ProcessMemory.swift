import Foundation

/// Resident memory of this process as the kernel reports it in `/proc/self/status` (Linux only).
public struct ProcessMemory: Sendable, Codable, Equatable {
    /// `VmRSS`: resident set size now, in bytes.
    public var residentBytes: Int
    /// `VmHWM`: the highest resident set size so far, in bytes.
    public var peakResidentBytes: Int

    public init(residentBytes: Int, peakResidentBytes: Int) {
        self.residentBytes = residentBytes
        self.peakResidentBytes = peakResidentBytes
    }

    /// The current figures, or nil where `/proc/self/status` cannot be read (not Linux).
    public static func current() -> ProcessMemory? {
        guard let data = FileManager.default.contents(atPath: "/proc/self/status") else { return nil }
        return parse(status: String(decoding: data, as: UTF8.self))
    }

    /// Reads `VmRSS` and `VmHWM` (given in kB) from the text of a `/proc/PID/status` file.
    public static func parse(status: String) -> ProcessMemory? {
        var fields: [String: Int] = [:]
        for line in status.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2, parts[0] == "VmRSS" || parts[0] == "VmHWM" else { continue }
            let words = parts[1].split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard let kilobytes = words.first.flatMap({ Int($0) }), words.count == 2, words[1] == "kB" else {
                continue
            }
            fields[String(parts[0])] = kilobytes * 1024
        }
        guard let resident = fields["VmRSS"] else { return nil }
        return ProcessMemory(residentBytes: resident, peakResidentBytes: fields["VmHWM"] ?? resident)
    }
}
