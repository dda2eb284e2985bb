import AppleSimulator
import Foundation
import Messages
import Testing
import Traffic

@testable import Demo

@Suite("Demo report: one table per store")
struct DemoReportTableTests {
    static func entry(
        _ category: TrafficCategory, play: Bool, byAnother: Bool = false, _ outcome: Verdict.Outcome,
        _ reason: Verdict.Reason? = nil, id: Int
    ) -> DemoReport.Entry {
        let proof: ReceiptJob.Proof =
            play
            ? .googlePlay(
                GooglePlayPurchase(packageName: "com.example.app", productID: "premium", purchaseToken: "t\(id)"))
            : .receipt("r\(id)")
        let job = ReceiptJob(jobID: "j\(id)", accountID: "a\(id)", proof: proof)
        let verdict = Verdict(
            verdictID: "v\(id)", jobID: job.jobID, accountID: job.accountID, outcome: outcome, reason: reason,
            decidedBy: .prefilter, store: play ? .googlePlay : .appStore, decidedAt: Date())
        return DemoReport.Entry(
            generated: GeneratedJob(category: category, job: job, isReplayByAnotherAccount: byAnother),
            verdicts: [verdict], latency: .milliseconds(5))
    }

    static func report() throws -> DemoReport {
        let entries = [
            entry(.otherApp, play: false, .rejected, .wrongBundle, id: 1),
            entry(.genuine, play: false, .granted, id: 2),
            entry(.otherApp, play: true, .rejected, .wrongBundle, id: 3),
            entry(.otherApp, play: true, .rejected, .wrongBundle, id: 4),
            entry(.forged, play: true, .rejected, .notAuthenticated, id: 5),
            entry(.genuine, play: true, .granted, id: 6),
            entry(.repeated, play: true, byAnother: true, .rejected, .replayed, id: 7),
        ]
        var report = DemoReport(
            entries: entries, appleStats: try AppleSimulator().stats.snapshot(), elapsed: .seconds(1), workers: 2,
            partitions: 8)
        var calls = DemoPlayCalls()
        calls.genuinePurchases = 1
        calls.genuineReads = 1
        calls.genuineFollowUps = 1
        calls.tokenRequests = 1
        calls.granted = 1
        calls.followedUp = 1
        report.playCalls = calls
        return report
    }

    @Test("Play jobs are counted in rows of their own, per store, each job once")
    func countsPerStore() throws {
        let report = try Self.report()
        #expect(report.jobsPerStore == [.appStore: 2, .googlePlay: 5])
        let rows = report.verdictsByRow
        #expect(rows["other_app"] == ["rejected/wrong_bundle": 1])
        #expect(rows["genuine"] == ["granted": 1])
        #expect(rows["play other_app"] == ["rejected/wrong_bundle": 2])
        #expect(rows["play forged"] == ["rejected/not_authenticated": 1])
        #expect(rows["play genuine"] == ["granted": 1])
        #expect(rows["play repeat (other account)"] == ["rejected/replayed": 1])
        #expect(rows.values.flatMap(\.values).reduce(0, +) == report.entries.count)
    }

    @Test("the table has an App Store section and a Google Play section, with Google calls per genuine purchase")
    func table() throws {
        let lines = try Self.report().table().split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let apple = try #require(lines.firstIndex(of: "App Store (2 jobs; every job exactly one verdict = true)"))
        let play = try #require(lines.firstIndex(of: "Google Play (5 jobs; every job exactly one verdict = true)"))
        #expect(apple < play)
        #expect(
            lines[apple..<play].contains { $0.hasPrefix("all") && $0.hasSuffix("granted 1, rejected/wrong_bundle 1") })
        let playRows = lines[play...]
        #expect(
            playRows.contains {
                $0.hasPrefix("all")
                    && $0.hasSuffix(
                        "rejected/wrong_bundle 2, granted 1, rejected/not_authenticated 1, rejected/replayed 1")
            })
        #expect(playRows.contains { $0.hasPrefix("other app's purchase") && $0.hasSuffix("rejected/wrong_bundle 2") })
        #expect(playRows.contains { $0.hasPrefix("forged signature") && $0.hasSuffix("rejected/not_authenticated 1") })
        #expect(playRows.contains { $0.hasPrefix("repeat (other account)") && $0.hasSuffix("rejected/replayed 1") })
        #expect(lines.contains { $0.hasPrefix("jobs: 7, verdicts: every job exactly one = true") })
        #expect(lines.contains { $0.hasPrefix("Apple calls: 0 for 2 App Store jobs") })
        #expect(
            lines.contains {
                $0.hasPrefix("Google calls per genuine purchase: 1.00 reads, 1.00 acknowledge/consume (1 purchases)")
            })
        #expect(lines.contains { $0.hasPrefix("Play grants acknowledged or consumed at Google by the end: 1 of 1") })
    }

    @Test("an App Store-only run keeps its single table")
    func appStoreOnly() throws {
        let report = DemoReport(
            entries: [Self.entry(.genuine, play: false, .granted, id: 1)],
            appleStats: try AppleSimulator().stats.snapshot(), elapsed: .seconds(1), workers: 1, partitions: 1)
        let table = report.table()
        #expect(table.hasPrefix("category"))
        #expect(!table.contains("Google"))
    }
}
