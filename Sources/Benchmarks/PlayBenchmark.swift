import Demo
import Foundation
import Messages
import Traffic

/// `bench play`'s runs: the demo's pipeline on Google Play traffic only, then on App Store traffic only.
package struct PlayBenchmark: Sendable {
    package var jobs: Int
    package var workers: Int
    package var partitions: Int
    package var log: @Sendable (String) -> Void
    /// Each worker's `google_play_minute_quota`; nil: the default (Google's 3,000 a minute per bucket), which bounds a
    /// worker's reads to 50 a second per bucket.
    package var minuteQuota: Int?

    package init(
        jobs: Int, workers: Int, partitions: Int, minuteQuota: Int? = nil, log: @escaping @Sendable (String) -> Void
    ) {
        self.minuteQuota = minuteQuota
        self.jobs = jobs
        self.workers = workers
        self.partitions = partitions
        self.log = log
    }

    /// Google calls of a Play run, per genuine purchase and per junk job.
    package struct GoogleCalls: Encodable, Sendable {
        var genuinePurchases: Int
        var readsPerGenuinePurchase: Double
        var acknowledgeOrConsumePerGenuinePurchase: Double
        var junkJobs: Int
        var callsForJunk: Int
        var callsPerJunkJob: Double
        var oauthTokenRequests: Int
        var grantsAcknowledged: Int
        var grants: Int
    }

    /// One run's figures.
    package struct Run: Encodable, Sendable {
        var name: String
        var jobs: Int
        var seconds: Double
        var jobsPerSecond: Double
        var everyJobOneVerdict: Bool
        var verdicts: [String: Int]
        var appleCalls: Int
        var google: GoogleCalls?
    }

    package struct Result: Encodable, Sendable {
        var cores: Int
        var workers: Int
        var partitions: Int
        var runs: [Run]
        /// Jobs/s of each Play run over the App Store run of the same kind (junk-heavy over seed 000, genuine over
        /// genuine).
        var playJunkOverAppStoreSeed000: Double?
        var playGenuineOverAppStoreGenuine: Double?
        var loadAverage1m: Double?
    }

    package static let genuineOnly = TrafficMix(shares: [.genuine: 1])

    package func run(appStore: Bool) async throws -> Result {
        var runs = [
            try await measure("play_junk_heavy", playShare: 1, mix: .android),
            try await measure("play_genuine", playShare: 1, mix: Self.genuineOnly),
        ]
        if appStore {
            runs.append(try await measure("app_store_seed000", playShare: 0, mix: .seed000))
            runs.append(try await measure("app_store_genuine", playShare: 0, mix: Self.genuineOnly))
        }
        func ratio(_ a: String, _ b: String) -> Double? {
            guard let x = runs.first(where: { $0.name == a }), let y = runs.first(where: { $0.name == b }),
                y.jobsPerSecond > 0
            else { return nil }
            return (x.jobsPerSecond / y.jobsPerSecond * 100).rounded() / 100
        }
        return Result(
            cores: ProcessInfo.processInfo.activeProcessorCount, workers: workers, partitions: partitions, runs: runs,
            playJunkOverAppStoreSeed000: ratio("play_junk_heavy", "app_store_seed000"),
            playGenuineOverAppStoreGenuine: ratio("play_genuine", "app_store_genuine"),
            loadAverage1m: PipelineBenchmark.loadAverage())
    }

    private func measure(_ name: String, playShare: Double, mix: TrafficMix) async throws -> Run {
        log("\(name): \(jobs) jobs")
        var options = DemoOptions()
        options.jobs = jobs
        options.workers = workers
        options.partitions = partitions
        options.progressInterval = nil
        options.playShare = playShare
        if let minuteQuota { options.workerSettings["google_play_minute_quota"] = String(minuteQuota) }
        if playShare > 0 { options.playMix = mix } else { options.mix = mix }
        let report = try await DemoRun(options: options).run()
        let seconds = Double(report.elapsed.components.seconds) + Double(report.elapsed.components.attoseconds) * 1e-18
        let (missing, duplicated) = report.missingAndDuplicated
        var verdicts: [String: Int] = [:]
        for entry in report.entries {
            guard let verdict = entry.verdicts.first else { continue }
            verdicts[DemoReport.label(of: verdict), default: 0] += 1
        }
        let google = report.playCalls.map { play in
            let junk = report.entries.filter {
                $0.generated.job.proof.store == .googlePlay && $0.generated.category != .genuine
            }.count
            return GoogleCalls(
                genuinePurchases: play.genuinePurchases, readsPerGenuinePurchase: play.readsPerGenuine,
                acknowledgeOrConsumePerGenuinePurchase: play.followUpsPerGenuine, junkJobs: junk,
                callsForJunk: play.otherCalls,
                callsPerJunkJob: junk == 0 ? 0 : Double(play.otherCalls) / Double(junk),
                oauthTokenRequests: play.tokenRequests, grantsAcknowledged: play.followedUp, grants: play.granted)
        }
        return Run(
            name: name, jobs: report.entries.count, seconds: (seconds * 1000).rounded() / 1000,
            jobsPerSecond: seconds > 0 ? (Double(report.entries.count) / seconds).rounded() : 0,
            everyJobOneVerdict: missing == 0 && duplicated == 0, verdicts: verdicts, appleCalls: report.appleCalls,
            google: google)
    }
}
