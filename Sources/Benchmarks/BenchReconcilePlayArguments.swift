import ArgumentParser
import Foundation
import Traffic

/// `verify-worker bench reconcile-play`: one voided-purchases sweep over N voided purchases.
package struct BenchReconcilePlayArguments: HarnessArguments {
    package static let commandConfiguration = CommandConfiguration(
        commandName: "reconcile-play",
        abstract: "One voided-purchases sweep of verify-worker reconcile over N voided purchases (JSON).")

    @Option(help: "Voided purchases Google lists.")
    package var voided = 10_000

    @Option(name: .customLong("page-size"), help: "Purchases per page (Google's largest: 1000).")
    package var pageSize = 1_000

    @Option(name: .customLong("quota-share"), help: "reconcile_google_play_quota_share.")
    package var quotaShare = 0.05

    @Option(name: .customLong("minute-quota"), help: "google_play_minute_quota.")
    package var minuteQuota = 3_000

    package init() {}

    package func run() async throws {
        let result = try await PlayVoidedBenchmark.run(
            voided: voided, pageSize: pageSize, quotaShare: quotaShare, minuteQuota: minuteQuota)
        try printJSON(result, snakeCaseKeys: true)
        guard result.callsWithinPages, result.quotaShareHeld, result.jobs == voided else {
            throw BenchmarkFailure(
                "calls \(result.calls) for \(result.pages) pages, busiest minute \(result.busiestMinuteCalls) of "
                    + "\(result.budgetCallsPerMinute), \(result.jobs) jobs for \(voided) voided purchases")
        }
    }
}
