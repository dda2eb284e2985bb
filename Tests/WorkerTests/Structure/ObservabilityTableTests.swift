import Foundation
import Observability
import Testing

/// One table of log keys and one of metric names, used by every target. These scans fail, naming the
/// file and line, when a literal key or name appears anywhere else in Sources.
@Suite("Structure: one table of log keys and metric names")
struct ObservabilityTableTests {
    /// Every Swift file under Sources, with its lines, except the tables themselves.
    static func sourceLines(excluding excluded: String = "Sources/Observability/") throws -> [(String, Int, String)] {
        var found: [(String, Int, String)] = []
        for (relative, text) in try TestEnvironment.swiftFiles(under: "Sources") where !relative.hasPrefix(excluded) {
            for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                found.append((relative, index + 1, String(line)))
            }
        }
        #expect(found.count > 10_000, "the scan found the sources")
        return found
    }

    static func matches(_ pattern: String) throws -> [String] {
        let expression = try NSRegularExpression(pattern: pattern)
        return try sourceLines().compactMap { file, number, line in
            let range = NSRange(line.startIndex..., in: line)
            return expression.firstMatch(in: line, range: range) == nil ? nil : "\(file):\(number): \(line)"
        }
    }

    @Test("no log line names a metadata key by a literal: every key comes from LogKeys")
    func logKeys() throws {
        // A literal "part.key" followed by a value (an interpolation) is a metadata entry written by hand.
        let literal = try Self.matches(#""[a-z_]+\.[a-z_]+"\s*:\s*"\\\("#)
        #expect(literal.isEmpty, "\(literal.joined(separator: "\n"))")
        // The error key has one spelling.
        let errorKeys = try Self.matches(#""(kafka|verify|entitlements|apple|ledger)\.error""#)
        #expect(errorKeys.isEmpty, "\(errorKeys.joined(separator: "\n"))")
        #expect(LogKeys.error == "error")
    }

    @Test("no metric is created or named by a literal: every name comes from MetricNames")
    func metricNames() throws {
        let created = try Self.matches(#"(Counter|Timer|Gauge|Recorder|Meter|FloatingPointCounter)\(\s*label:\s*""#)
        #expect(created.isEmpty, "\(created.joined(separator: "\n"))")
        let named = try Self.matches(#""verify_[a-z_]+_(total|seconds|bytes)""#)
        #expect(named.isEmpty, "\(named.joined(separator: "\n"))")
    }

    @Test("each table gives each thing one name: no two constants share a value")
    func tablesHaveNoDuplicates() throws {
        let root = TestEnvironment.packageRoot.appendingPathComponent("Sources/Observability")
        let declaration = try NSRegularExpression(pattern: #"static let (\w+) = "([^"]+)""#)
        for file in ["LogKeys.swift", "MetricNames.swift"] {
            let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
            var names: [String: String] = [:]
            for match in declaration.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                let name = String(text[Range(match.range(at: 1), in: text)!])
                let value = String(text[Range(match.range(at: 2), in: text)!])
                #expect(names[value] == nil, "\(file): \(name) and \(names[value] ?? "") are both \(value)")
                names[value] = name
            }
            #expect(names.count >= 20, "\(file) was read")
        }
    }
}
