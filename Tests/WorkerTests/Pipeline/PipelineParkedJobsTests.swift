import AppleSimulator
import Foundation
import Messages
import Pipeline
import Testing

/// Jobs that need Apple go through the worker's ledger and Apple stages with a real processor and simulator: every
/// job gets one verdict, in its account's order, and a deadline that passes while a job waits ends it as a deadline
/// in the call gate did. (With 256 Apple runners these 40 accounts' jobs do not queue in front of the stage; parking
/// beyond a stage's limit is `PipelineStagesTests`' and `JobStageTests`' part: more than 256 minted receipts here
/// would cost the full run's first minute seconds of RSA signing.)
@Suite("Pipeline: jobs parked for Apple", .serialized, .timeLimit(.minutes(3)))
struct PipelineParkedJobsTests {
    @Test("many more jobs than the stage's runners: all decided once, in account order; deadlines pass while parked")
    func parkedJobs() async throws {
        try await PipelineHarness.with { harness in
            // One call at a time, 300 ms each, a 1 s deadline: a few jobs of each wave are answered, the others'
            // deadlines pass while they wait.
            var faults = FaultPlan()
            faults.latencyMs = 300
            harness.simulator.setFaults(faults)
            try harness.startWorker(
                0, extra: ["apple_max_concurrency": "1", "apple_min_concurrency": "1"], jobDeadline: .seconds(1))
            try await harness.waitUntilAssigned()

            let accounts = (0..<40).map { "acct-parked-\($0)" }
            var submitted: [String: [String]] = [:]
            var jobs: [ReceiptJob] = []
            for _ in 0..<3 {
                for account in accounts {
                    let (job, _) = try harness.genuineJob(account: account)
                    submitted[account, default: []].append(job.jobID)
                    jobs.append(job)
                }
            }
            try await harness.submit(jobs)
            try await harness.verdicts.waitForVerdicts(of: jobs.map(\.jobID), timeout: .seconds(120))

            let verdicts = harness.verdicts.verdicts
            #expect(verdicts.count == jobs.count, "one verdict per job")
            for account in accounts {
                let order = verdicts.filter { $0.accountID == account }.map(\.jobID)
                #expect(order == submitted[account], "verdict order of \(account)")
            }
            let granted = verdicts.filter { $0.outcome == .granted }.count
            let unavailable = verdicts.filter { $0.outcome == .unverifiable && $0.reason == .appleUnavailable }.count
            #expect(granted > 0)
            #expect(unavailable > 0)
            #expect(granted + unavailable == jobs.count, "\(Set(verdicts.map(\.outcome)))")
        }
    }
}
