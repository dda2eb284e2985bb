import AppleSimulator
import Foundation
import Messages
import Traffic

extension DemoReport {
    /// The row a job is counted in: its traffic category, repeats split by who sends them again.
    /// Google Play jobs' rows start with ``playRowPrefix``.
    package static func row(of generated: GeneratedJob) -> String {
        let prefix = generated.job.proof.store == .googlePlay ? playRowPrefix : ""
        guard generated.category == .repeated else { return prefix + generated.category.rawValue }
        return prefix + (generated.isReplayByAnotherAccount ? "repeat (other account)" : "repeat (same account)")
    }

    package static let playRowPrefix = "play "

    /// The purchase token of a Google Play job.
    package static func playToken(of generated: GeneratedJob) -> String? {
        if case .googlePlay(let purchase) = generated.job.proof { return purchase.purchaseToken }
        return nil
    }

    /// Jobs per store.
    package var jobsPerStore: [Store: Int] {
        entries.reduce(into: [:]) { $0[$1.generated.job.proof.store, default: 0] += 1 }
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

    /// `label count` pairs, the largest first.
    private static func counts(_ verdicts: [String: Int]) -> String {
        verdicts.sorted { ($0.value, $1.key) > ($1.value, $0.key) }.map { "\($0.key) \($0.value)" }
            .joined(separator: ", ")
    }

    /// One store's jobs without a verdict and jobs with more than one.
    package func missingAndDuplicated(store: Store) -> (missing: Int, duplicated: Int) {
        let jobs = entries.filter { $0.generated.job.proof.store == store }
        return (jobs.filter { $0.verdicts.isEmpty }.count, jobs.filter { $0.verdicts.count > 1 }.count)
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
        let perStore = jobsPerStore
        let hasPlay = perStore[.googlePlay, default: 0] > 0
        var lines: [String] = []
        // Apple-only runs keep their single table; with Play traffic each store gets its own.
        let sections: [(store: Store?, prefix: String, names: [String: String])] =
            hasPlay
            ? [
                (.appStore, "", [:]),
                (
                    .googlePlay, Self.playRowPrefix,
                    ["other_app": "other app's purchase", "forged": "forged signature"]
                ),
            ]
            : [(nil, "", [:])]
        for (index, section) in sections.enumerated() {
            if let store = section.store {
                if index > 0 { lines.append("") }
                let (missing, duplicated) = missingAndDuplicated(store: store)
                lines.append(
                    "\(store == .appStore ? "App Store" : "Google Play") (\(perStore[store, default: 0]) jobs;"
                        + " every job exactly one verdict = \(missing == 0 && duplicated == 0))")
            }
            lines.append(pad("category", 24) + pad("jobs", 8, right: true) + "  verdicts")
            for name in order {
                let row = section.prefix + name
                guard let jobs = jobsPerRow[row] else { continue }
                lines.append(
                    pad(section.names[name] ?? name, 24) + pad("\(jobs)", 8, right: true) + "  "
                        + Self.counts(rows[row] ?? [:]))
            }
            if let store = section.store {
                let all = rows.filter { $0.key.hasPrefix(Self.playRowPrefix) == (store == .googlePlay) }.values
                    .reduce(into: [String: Int]()) { total, row in total.merge(row, uniquingKeysWith: +) }
                lines.append(
                    pad("all", 24) + pad("\(perStore[store, default: 0])", 8, right: true) + "  " + Self.counts(all))
            }
        }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        let (missing, duplicated) = missingAndDuplicated
        let endpoints = appleStats.requests.filter { !$0.key.hasPrefix("sim/") }.sorted { $0.key < $1.key }
            .map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        let throttled = appleStats.statuses["21005"] ?? 0
        let appStoreJobs = perStore[.appStore, default: 0]
        lines += [
            "",
            "jobs: \(entries.count), verdicts: every job exactly one = \(missing == 0 && duplicated == 0)"
                + " (missing \(missing), more than one \(duplicated))",
            String(
                format: "Apple calls: %d for %d App Store jobs (%.1f%%)", appleCalls, appStoreJobs,
                appStoreJobs == 0 ? 0 : 100 * Double(appleCalls) / Double(appStoreJobs))
                + " [\(endpoints)]; 21005 answers: \(throttled)",
            String(
                format: "throughput: %.0f jobs/s (%.2f s, %d workers, %d partitions)",
                seconds > 0 ? Double(entries.count) / seconds : 0, seconds, workers, partitions),
            "latency submit to verdict: p50 \(Self.milliseconds(latencyPercentile(0.5)))"
                + ", p99 \(Self.milliseconds(latencyPercentile(0.99)))",
        ]
        if let play = playCalls {
            lines.insert(contentsOf: Self.playLines(play), at: lines.count - 2)
        }
        return lines.joined(separator: "\n")
    }

    /// Google calls per genuine purchase and for junk, and the acknowledgements the workers made after granting.
    package static func playLines(_ play: DemoPlayCalls) -> [String] {
        [
            String(
                format: "Google calls per genuine purchase: %.2f reads, %.2f acknowledge/consume"
                    + " (%d purchases); calls for junk: %d; OAuth token requests: %d",
                play.readsPerGenuine, play.followUpsPerGenuine, play.genuinePurchases, play.otherCalls,
                play.tokenRequests),
            "Play grants acknowledged or consumed at Google by the end: \(play.followedUp) of \(play.granted)"
                + " (all = \(play.followedUp == play.granted))",
        ]
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
