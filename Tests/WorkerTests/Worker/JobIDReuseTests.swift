import AppleSimulator
import Foundation
import Messages
import Testing
import Worker

/// One `verdict_id` always names one verdict, and no job, earlier or later, hides a grant: a job id reused with
/// another proof or account gets its own verdict id (else a consumer de-duplicating on `verdict_id` drops a
/// grant published under the id of an earlier rejection).
@Suite("Pipeline: job ids reused with another content", .serialized, .timeLimit(.minutes(3)))
struct JobIDReuseTests {
    /// Waits until `jobID` has `count` distinct verdict ids, then returns its verdicts grouped by id.
    static func verdicts(
        of jobID: String, distinct count: Int, in harness: PipelineHarness
    ) async throws -> [String: [Verdict]] {
        try await PipelineHarness.poll("\(count) verdict ids for \(jobID)") { [jobID] in
            Set(harness.verdicts.verdicts.filter { $0.jobID == jobID }.map(\.verdictID)).count >= count
        }
        return Dictionary(grouping: harness.verdicts.verdicts.filter { $0.jobID == jobID }, by: \.verdictID)
    }

    /// Every id names one decision (outcome, reason, account), however often it was published.
    static func expectOneDecisionPerID(_ byID: [String: [Verdict]]) {
        for (id, verdicts) in byID {
            let decisions = Set(verdicts.map { "\($0.outcome.rawValue)/\($0.reason?.rawValue ?? "")/\($0.accountID)" })
            #expect(decisions.count == 1, "verdict_id \(id) names \(decisions)")
        }
    }

    @Test("junk first, then a genuine proof under the same job id: the grant has its own verdict id")
    func junkThenGenuine() async throws {
        try await PipelineHarness.with { harness in
            try harness.startWorker(0)
            try await harness.waitUntilAssigned()
            let (genuine, transactionID) = try harness.genuineJob(account: "victim")
            var junk = genuine
            junk.proof = .receipt("abc")
            try await harness.submit([junk])
            let first = try await Self.verdicts(of: genuine.jobID, distinct: 1, in: harness)
            #expect(first.values.first?.first?.outcome == .rejected)
            #expect(first.values.first?.first?.reason == .malformed)

            try await harness.submit([genuine, junk, genuine])
            let byID = try await Self.verdicts(of: genuine.jobID, distinct: 2, in: harness)
            let jobID = genuine.jobID
            try await PipelineHarness.poll("all four verdicts") {
                harness.verdicts.verdicts.filter { $0.jobID == jobID }.count >= 4
            }
            Self.expectOneDecisionPerID(
                Dictionary(grouping: harness.verdicts.verdicts.filter { $0.jobID == genuine.jobID }, by: \.verdictID))
            #expect(byID.count == 2)
            let grant = try #require(byID[Verdict.verdictID(for: genuine)]?.first)
            #expect(grant.outcome == .granted)
            #expect(grant.transactions.map(\.transactionID) == [transactionID])
            #expect(byID[Verdict.verdictID(for: junk)]?.first?.reason == .malformed)
        }
    }

    @Test("a grant first, then junk and another genuine proof under its job id: neither takes the grant's id")
    func genuineThenOthers() async throws {
        try await PipelineHarness.with { harness in
            try harness.startWorker(0)
            try await harness.waitUntilAssigned()
            let genuine = try harness.genuineJob(account: "acct-first").job
            try await harness.submit([genuine])
            _ = try await Self.verdicts(of: genuine.jobID, distinct: 1, in: harness)

            let junk = Self.changed(genuine) { $0.proof = .receipt("abc") }
            // Another genuine purchase, another account, the same job id: decided for itself, never handed the
            // recorded grant (that would hide this purchase behind the first account's).
            let secondPurchase = try harness.genuineJob(account: "acct-second").job
            let reused = Self.changed(secondPurchase) { $0.jobID = genuine.jobID }
            // The same proof for another account under the same id.
            let otherAccount = Self.changed(genuine) { $0.accountID = "acct-third" }
            try await harness.submit([junk, reused, otherAccount, genuine])
            try await Self.checkGenuineThenOthers(
                harness, genuine: genuine, junk: junk, reused: reused, otherAccount: otherAccount)
            // The second purchase was not claimed: a new job id for it still grants it.
            let retried = Self.changed(reused) { $0.jobID = "retry-" + $0.jobID }
            try await harness.submit([retried])
            try await harness.verdicts.waitForVerdicts(of: [retried.jobID])
            #expect(harness.verdicts.byJob[retried.jobID]?.first?.outcome == .granted)
        }
    }

    static func checkGenuineThenOthers(
        _ harness: PipelineHarness, genuine: ReceiptJob, junk: ReceiptJob, reused: ReceiptJob, otherAccount: ReceiptJob
    ) async throws {
        let byID = try await verdicts(of: genuine.jobID, distinct: 4, in: harness)
        let grantID = Verdict.verdictID(for: genuine)
        try await PipelineHarness.poll("the redelivered grant") {
            harness.verdicts.verdicts.filter { $0.verdictID == grantID }.count >= 2
        }
        let jobID = genuine.jobID
        expectOneDecisionPerID(
            Dictionary(grouping: harness.verdicts.verdicts.filter { $0.jobID == jobID }, by: \.verdictID))
        #expect(byID[grantID]?.allSatisfy { $0.outcome == .granted } == true)
        #expect(byID[Verdict.verdictID(for: junk)]?.first?.reason == .malformed)
        let reusedVerdict = byID[Verdict.verdictID(for: reused)]?.first
        #expect(reusedVerdict?.outcome == .rejected)
        #expect(reusedVerdict?.reason == .jobIDReused)
        #expect(reusedVerdict?.accountID == "acct-second")
        let otherVerdict = byID[Verdict.verdictID(for: otherAccount)]?.first
        #expect(otherVerdict?.reason == .jobIDReused)
        #expect(otherVerdict?.accountID == "acct-third")
    }

    static func changed(_ job: ReceiptJob, _ change: (inout ReceiptJob) -> Void) -> ReceiptJob {
        var job = job
        change(&job)
        return job
    }
}
