import AppleSimulator
import Foundation
import Messages
import Traffic

extension DemoReport {
    /// The row a job is counted in: its traffic category, repeats split by who sends them again.
    package static func row(of generated: GeneratedJob) -> String {
        guard generated.category == .repeated else { return generated.category.rawValue }
        return generated.isReplayByAnotherAccount ? "repeat (other account)" : "repeat (same account)"
    }

    /// `outcome` or `outcome/reason`.
    package static func label(of verdict: Verdict) -> String {
        verdict.reason.map { "\(verdict.outcome.rawValue)/\($0)" } ?? verdict.outcome.rawValue
    }

    /// Verdict counts per row, for jobs that got one (the first, if a redelivery made more).
    package var verdictsByRow: [String: [String: Int]] {
        entries.reduce(into: [:]) { table, entry in
            guard let verdict = entry.verdicts.first else { return }
            table[Self.row(of: entry.generated), default: [:]][Self.label(of: verdict), default: 0] += 1
        }
    }

    /// Jobs without a verdict and jobs with more than one.
    package var missingAndDuplicated: (missing: Int, duplicated: Int) {
        (entries.filter { $0.verdicts.isEmpty }.count, entries.filter { $0.verdicts.count > 1 }.count)
    }

    /// The latency below which `fraction` of the jobs got their verdict.
    package func latencyPercentile(_ fraction: Double) -> Duration? {
        let sorted = entries.compactMap(\.latency).sorted()
        guard !sorted.isEmpty else { return nil }
        return sorted[min(sorted.count - 1, Int((Double(sorted.count) * fraction).rounded(.up)) - 1)]
    }

    /// The final table the command prints.
    package func table() -> String {
        let rows = verdictsByRow
        let jobsPerRow = entries.reduce(into: [String: Int]()) { $0[Self.row(of: $1.generated), default: 0] += 1 }
        let order = ["other_app", "cracker", "repeat (same account)", "repeat (other account)", "forged", "genuine"]
        var lines = [pad("category", 24) + pad("jobs", 8, right: true) + "  verdicts"]
        for row in order where jobsPerRow[row] != nil {
            let verdicts = (rows[row] ?? [:]).sorted { $0.value > $1.value }.map { "\($0.key) \($0.value)" }
            lines.append(
                pad(row, 24) + pad("\(jobsPerRow[row] ?? 0)", 8, right: true) + "  "
                    + verdicts.joined(separator: ", "))
        }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        let (missing, duplicated) = missingAndDuplicated
        let endpoints = appleStats.requests.filter { !$0.key.hasPrefix("sim/") }.sorted { $0.key < $1.key }
            .map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        let throttled = appleStats.statuses["21005"] ?? 0
        lines += [
            "",
            "jobs: \(entries.count), verdicts: every job exactly one = \(missing == 0 && duplicated == 0)"
                + " (missing \(missing), more than one \(duplicated))",
            String(
                format: "Apple calls: %d for %d jobs (%.1f%%)", appleCalls, entries.count,
                entries.isEmpty ? 0 : 100 * Double(appleCalls) / Double(entries.count))
                + " [\(endpoints)]; 21005 answers: \(throttled)",
            String(
                format: "throughput: %.0f jobs/s (%.2f s, %d workers, %d partitions)",
                seconds > 0 ? Double(entries.count) / seconds : 0, seconds, workers, partitions),
            "latency submit to verdict: p50 \(Self.milliseconds(latencyPercentile(0.5)))"
                + ", p99 \(Self.milliseconds(latencyPercentile(0.99)))",
        ]
        return lines.joined(separator: "\n")
    }

    private func pad(_ text: String, _ width: Int, right: Bool = false) -> String {
        let padding = String(repeating: " ", count: max(0, width - text.count))
        return right ? padding + text : text + padding
    }

    package static func milliseconds(_ duration: Duration?) -> String {
        guard let duration else { return "-" }
        let ms = Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) * 1e-15
        return String(format: "%.1f ms", ms)
    }
}

extension DemoProgress {
    /// One plain line, for logs and pipes.
    package var line: String {
        String(
            format: "demo: %d/%d produced, %d/%d decided, %d Apple calls, %.0f jobs/s", produced, jobs, decided, jobs,
            appleCalls, rate)
    }

    /// A bar that redraws itself on a terminal.
    package var bar: String {
        let width = 30
        let filled = jobs > 0 ? width * decided / jobs : width
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
        return "\r[\(bar)] "
            + String(format: "%d/%d decided  %.0f jobs/s  Apple calls %d  ", decided, jobs, rate, appleCalls)
    }

    private var rate: Double {
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        return seconds > 0 ? Double(decided) / seconds : 0
    }
}
