import Foundation
import Observability
import Prometheus

/// The text of `GET /metrics`: the registry's series, each family with the `# HELP` line of ``MetricNames``'s table
/// before its `# TYPE` line, and every family the command declares present from the start: a family nothing has
/// recorded yet still gets its `# HELP` and `# TYPE` lines, and a label-free counter its `0`, so that an alert on an
/// absent series does not fire on a healthy idle process.
///
/// The help text is added here rather than given to the registry: swift-metrics' factory registers every metric with
/// an empty help text, and the registry refuses (fatally) one name registered with two different texts.
public enum MetricsExposition {
    /// The exposition of `registry`, declaring `declared` (names of ``MetricNames``).
    public static func render(_ registry: PrometheusCollectorRegistry, declaring declared: [String]) -> [UInt8] {
        var emitted: [UInt8] = []
        emitted.reserveCapacity(16 << 10)
        registry.emit(into: &emitted)
        return render(emitted, declaring: declared)
    }

    /// `exposition` (the registry's text) with the help lines and the declared families added.
    static func render(_ exposition: [UInt8], declaring declared: [String]) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(exposition.count + 8 << 10)
        var present: Set<String> = []
        let typePrefix = Array("# TYPE ".utf8)
        for line in exposition.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            if line.starts(with: typePrefix) {
                let rest = line.dropFirst(typePrefix.count)
                let name = String(decoding: rest.prefix { $0 != UInt8(ascii: " ") }, as: UTF8.self)
                present.insert(name)
                if let description = MetricNames.description(of: name) { appendHelp(description, to: &output) }
            }
            output.append(contentsOf: line)
            output.append(UInt8(ascii: "\n"))
        }
        // `split` keeps the text after the last newline as a last, empty line: drop the newline added after it.
        if exposition.last == UInt8(ascii: "\n") || exposition.isEmpty { output.removeLast() }
        for name in declared where !present.contains(name) {
            guard let description = MetricNames.description(of: name) else { continue }
            appendHelp(description, to: &output)
            output.append(contentsOf: "# TYPE \(name) \(description.kind.rawValue)\n".utf8)
            if description.kind == .counter, description.labels.isEmpty {
                output.append(contentsOf: "\(name) 0\n".utf8)
            }
        }
        return output
    }

    private static func appendHelp(_ description: MetricNames.Description, to output: inout [UInt8]) {
        output.append(
            contentsOf: helpLines[description.name] ?? helpLine(name: description.name, help: description.help))
    }

    /// Every family's `# HELP` line, escaped once: a scrape only copies them.
    private static let helpLines: [String: [UInt8]] = Dictionary(
        MetricNames.descriptions.map { ($0.name, helpLine(name: $0.name, help: $0.help)) },
        uniquingKeysWith: { first, _ in first })

    /// The `# HELP` line of family `name`: the exposition format escapes a backslash and a line break in help text.
    static func helpLine(name: String, help: String) -> [UInt8] {
        var line = Array("# HELP \(name) ".utf8)
        for byte in help.utf8 {
            switch byte {
            case UInt8(ascii: "\\"): line.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case UInt8(ascii: "\n"): line.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            default: line.append(byte)
            }
        }
        line.append(UInt8(ascii: "\n"))
        return line
    }
}
