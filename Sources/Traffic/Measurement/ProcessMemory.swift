import Foundation

/// Resident memory of this process as the kernel reports it in `/proc/self/status` (Linux only).
public struct ProcessMemory: Sendable, Codable, Equatable {
    /// `VmRSS`: resident set size now, in bytes.
    public var residentBytes: Int
    /// `VmHWM`: the highest resident set size so far, in bytes.
    public var peakResidentBytes: Int

    /// The current figures, or nil where `/proc/self/status` cannot be read (not Linux).
    public static func current() -> ProcessMemory? {
        read(statusFile: "/proc/self/status")
    }

    /// Another process's figures (`/proc/PID/status`), or nil when it cannot be read (gone, or not Linux).
    public static func of(pid: Int32) -> ProcessMemory? {
        read(statusFile: "/proc/\(pid)/status")
    }

    private static func read(statusFile: String) -> ProcessMemory? {
        guard let data = FileManager.default.contents(atPath: statusFile) else { return nil }
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

/// CPU time a process has used, from `/proc/PID/stat` (Linux only).
public struct ProcessCPUTime: Sendable, Equatable {
    /// User plus system time, in seconds.
    public var seconds: Double

    public init(seconds: Double) { self.seconds = seconds }

    /// This process's, or nil where `/proc/self/stat` cannot be read.
    public static func current() -> ProcessCPUTime? { read(statFile: "/proc/self/stat") }

    /// Another process's, or nil when it cannot be read.
    public static func of(pid: Int32) -> ProcessCPUTime? { read(statFile: "/proc/\(pid)/stat") }

    private static func read(statFile: String) -> ProcessCPUTime? {
        guard let data = FileManager.default.contents(atPath: statFile) else { return nil }
        return parse(stat: String(decoding: data, as: UTF8.self))
    }

    /// Reads `utime` and `stime` (fields 14 and 15, in clock ticks of 1/100 s) from the text of a `/proc/PID/stat`
    /// file. The command name (field 2) may hold spaces and parentheses: fields are counted after its last `)`.
    public static func parse(stat: String, ticksPerSecond: Double = 100) -> ProcessCPUTime? {
        guard let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the name: field 3 (state) is fields[0], so field N is fields[N - 3].
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return ProcessCPUTime(seconds: (user + system) / ticksPerSecond)
    }
}
