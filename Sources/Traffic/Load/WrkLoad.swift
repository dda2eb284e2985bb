import Foundation

/// One run of the `wrk` load tool posting the same verifyReceipt body over and over, for measuring the Apple
/// simulator's own rate next to the worker's client in one benchmark run.
///
/// The Lua script (the same logic as `scripts/sim/verify_receipt.lua`) counts answers that are not HTTP 200 or
/// do not carry `"status":0`, so a fast run of wrong answers cannot pass for a fast simulator.
public struct WrkLoad: Sendable {
    /// The figures of one run.
    public struct Report: Sendable, Encodable {
        public var tool = "wrk"
        public var connections: Int
        public var threads: Int
        public var durationSeconds: Int
        public var requests: Int
        public var requestsPerSecond: Double
        public var latencyP50Ms: Double
        public var latencyP99Ms: Double
        public var non200: Int
        public var notStatus0: Int
        public var socketErrors: Int

        enum CodingKeys: String, CodingKey {
            case tool, connections, threads, requests
            case durationSeconds = "duration_s"
            case requestsPerSecond = "requests_per_s"
            case latencyP50Ms = "latency_p50_ms"
            case latencyP99Ms = "latency_p99_ms"
            case non200 = "non_200"
            case notStatus0 = "not_status_0"
            case socketErrors = "socket_errors"
        }
    }

    /// Why a run produced no report.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// The `wrk` executable.
    public var executable: URL
    public var url: String
    /// The request body (a verifyReceipt JSON document).
    public var body: [UInt8]
    public var connections: Int
    public var threads: Int
    public var durationSeconds: Int

    /// Describes a run.
    public init(executable: URL, url: String, body: [UInt8], connections: Int, threads: Int, durationSeconds: Int) {
        self.executable = executable
        self.url = url
        self.body = body
        self.connections = max(connections, 1)
        self.threads = max(min(threads, connections), 1)
        self.durationSeconds = max(durationSeconds, 1)
    }

    /// `wrk` from `PATH`, if installed.
    public static func findExecutable(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL? {
        let directories = (environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":")
        for directory in directories {
            let candidate = URL(fileURLWithPath: String(directory)).appendingPathComponent("wrk")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        return nil
    }

    /// Runs wrk to the end and parses its report. wrk runs in a child process; this task waits without blocking a
    /// thread of the cooperative pool (the blocking reads and wait are on threads of their own).
    public func run() async throws -> Report {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "wrk-load-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let bodyFile = directory.appendingPathComponent("body.json")
        let scriptFile = directory.appendingPathComponent("verify_receipt.lua")
        try Data(body).write(to: bodyFile)
        try Data(Self.script.utf8).write(to: scriptFile)

        // Started and reaped by ChildProcess, not Foundation's Process (whose waitUntilExit spun once under load).
        let process = try ChildProcess(
            executable: executable.path,
            arguments: [
                "-t\(threads)", "-c\(connections)", "-d\(durationSeconds)s", "--latency", "-s", scriptFile.path, url,
            ],
            environment: ProcessInfo.processInfo.environment.merging(["RECEIPT_BODY_FILE": bodyFile.path]) { $1 },
            readsLines: true)
        let text = await process.allLines().joined(separator: "\n")
        // stdout closed: wrk has ended or is ending.
        var exit = await process.waitForExit(timeout: .seconds(30))
        if exit == nil { exit = await process.stop(killLimit: .seconds(60)) }
        guard exit == .exited(0) else {
            throw Failure(description: "wrk ended with \(exit.map { "\($0)" } ?? "no exit"): \(text.suffix(500))")
        }
        return try parse(text)
    }

    /// Reads wrk's `Requests/sec:` line and the script's summary lines.
    func parse(_ text: String) throws -> Report {
        var fields: [String: Double] = [:]
        for line in text.split(separator: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("Requests/sec:") {
                fields["rate"] = Double(trimmed.dropFirst("Requests/sec:".count).trimmingCharacters(in: .whitespaces))
            }
            for pair in trimmed.split(separator: " ") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                if parts.count == 2, let value = Double(parts[1]) { fields[String(parts[0])] = value }
            }
        }
        guard let rate = fields["rate"], let requests = fields["requests"] else {
            throw Failure(description: "wrk printed no summary: \(text.suffix(500))")
        }
        return Report(
            connections: connections, threads: threads, durationSeconds: durationSeconds, requests: Int(requests),
            requestsPerSecond: rate, latencyP50Ms: (fields["p50_us"] ?? 0) / 1000,
            latencyP99Ms: (fields["p99_us"] ?? 0) / 1000, non200: Int(fields["non200"] ?? 0),
            notStatus0: Int(fields["not_status0"] ?? 0), socketErrors: Int(fields["errors"] ?? 0))
    }

    /// The Lua script wrk runs (kept identical in behaviour to `scripts/sim/verify_receipt.lua`).
    static let script = """
        local path = os.getenv("RECEIPT_BODY_FILE")
        local file = assert(io.open(path, "rb"))
        wrk.method = "POST"
        wrk.body = file:read("*a")
        file:close()
        wrk.headers["Content-Type"] = "application/json"

        -- Counters are globals of each thread's Lua state; done() runs in the main state and sums them with thread:get.
        non200 = 0
        not_status0 = 0
        local threads = {}

        setup = function(thread)
          table.insert(threads, thread)
        end

        response = function(status, headers, body)
          if status ~= 200 then
            non200 = non200 + 1
          elseif not string.find(body, '"status":0', 1, true) then
            not_status0 = not_status0 + 1
          end
        end

        done = function(summary, latency, requests)
          local bad_status, not_zero = 0, 0
          for _, thread in ipairs(threads) do
            bad_status = bad_status + thread:get("non200")
            not_zero = not_zero + thread:get("not_status0")
          end
          io.write(string.format("requests=%d non200=%d not_status0=%d errors=%d\\n",
            summary.requests, bad_status, not_zero,
            summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.status
              + summary.errors.timeout))
          io.write(string.format("p50_us=%d p99_us=%d\\n", latency:percentile(50), latency:percentile(99)))
        end
        """
}
