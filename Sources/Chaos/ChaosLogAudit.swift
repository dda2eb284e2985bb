import Foundation

/// Scans process logs for what must never be logged: the shared secret (and any other given secret), and anything
/// that looks like a whole receipt (a run of 200 or more base64 or base64url characters: every receipt format is at
/// least that long, while ids, hashes and UUIDs are far shorter).
public enum ChaosLogAudit {
    /// The shortest run of base64 characters taken for a receipt.
    public static let receiptRunLength = 200

    /// One finding: which line of which log, and what it held (never the value itself).
    public struct Finding: Sendable, Hashable, CustomStringConvertible {
        public var log: String
        public var line: Int
        public var what: String
        public var description: String { "\(log):\(line): \(what)" }
    }

    /// Findings in one log's text.
    public static func audit(_ text: some StringProtocol, log: String, secrets: [String]) -> [Finding] {
        var findings: [Finding] = []
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            for secret in secrets where !secret.isEmpty && line.contains(secret) {
                findings.append(Finding(log: log, line: number + 1, what: "a secret"))
            }
            if longestBase64Run(line.utf8) >= receiptRunLength {
                findings.append(Finding(log: log, line: number + 1, what: "a receipt-length base64 run"))
            }
        }
        return findings
    }

    /// Findings in every `*.log` file of a directory.
    public static func audit(directory: URL, secrets: [String]) -> [Finding] {
        let files = (try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)) ?? []
        return files.filter { $0.pathExtension == "log" }.sorted { $0.path < $1.path }.flatMap { file in
            guard let data = FileManager.default.contents(atPath: file.path) else { return [Finding]() }
            return audit(String(decoding: data, as: UTF8.self), log: file.lastPathComponent, secrets: secrets)
        }
    }

    static func longestBase64Run(_ bytes: some Sequence<UInt8>) -> Int {
        var longest = 0
        var current = 0
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "/"), UInt8(ascii: "="),
                UInt8(ascii: "-"), UInt8(ascii: "_"):
                current += 1
                longest = max(longest, current)
            default:
                current = 0
            }
        }
        return longest
    }
}
