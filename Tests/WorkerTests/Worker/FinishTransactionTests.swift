import Crypto
import Foundation
import Ledger
import Messages
import Testing
import Worker

/// With `finish_transactions`, each granted transaction gets one Finish Transaction call once its
/// verdict is delivered, through workers on the mock cluster and a fake Server API that counts the calls.
@Suite("Pipeline: Finish Transaction after a durable grant", .serialized, .timeLimit(.minutes(3)))
struct FinishTransactionTests {
    static func finishPath(_ transactionID: String) -> String { "/inApps/v1/transactions/\(transactionID)/finish" }

    /// The worker settings that point the Server API at `base` and switch finishing `on` or off.
    static func settings(base: String, on: Bool) -> (extra: [String: String], environment: [String: String]) {
        (
            [
                "finish_transactions": on ? "true" : "false", "server_api_production_url": base,
                "server_api_sandbox_url": base + "/sandbox", "server_api_key_id": "KEY123",
                "server_api_issuer_id": "issuer-uuid",
            ],
            ["VERIFY_SERVER_API_KEY": P256.Signing.PrivateKey().pemRepresentation]
        )
    }

    static func record(_ harness: PipelineHarness, _ transactionID: String) async throws -> FollowUpRecord? {
        try await LedgerFactory.withLedger(url: harness.ledgerURL) { ledger in
            try await ledger.followUpRecord(
                kind: .finishTransaction, key: transactionID)
        }
    }

    @Test("one call per granted transaction across a redelivery; none when off, none for a rejected job")
    func oncePerGrant() async throws {
        try await AppleClientsFakeServer.withRunning { server, base in
            try await PipelineHarness.with { harness in
                server.setFallback("/inApps/v1/transactions/finished-anyway/finish", .init(status: 200))
                // Finishing off: a grant, and no call.
                let off = Self.settings(base: base, on: false)
                try harness.startWorker(0, extra: off.extra, environment: off.environment)
                try await harness.waitUntilAssigned()
                let account = "acct-finish"
                let (offJob, offTransaction) = try harness.genuineJob(account: account)
                try await harness.submit([offJob])
                try await harness.verdicts.waitForVerdicts(of: [offJob.jobID])
                #expect(harness.verdicts.byJob[offJob.jobID]?.first?.outcome == .granted)
                try await harness.stopWorker(0)

                // Finishing on.
                let on = Self.settings(base: base, on: true)
                try harness.startWorker(1, extra: on.extra, environment: on.environment)
                try await harness.waitUntilAssigned()
                let (grant, granted) = try harness.genuineJob(account: account)
                server.setFallback(Self.finishPath(granted), .init(status: 200))
                try await harness.submit([grant])
                try await harness.verdicts.waitForVerdicts(of: [grant.jobID])
                #expect(harness.verdicts.byJob[grant.jobID]?.first?.outcome == .granted)
                try await PipelineHarness.poll("the grant's call recorded as sent") {
                    try await Self.record(harness, granted)?.state == .sent
                }
                let first = try #require(server.received(path: Self.finishPath(granted)).first)
                #expect(first.method == "POST")
                #expect(first.headers["authorization"]?.hasPrefix("Bearer ") == true)

                // The same job again (a redelivery: the ledger answers its recorded verdict), the same proof for
                // the same account (already_granted), a rejected purchase, then a last grant on the same account,
                // whose call comes after theirs.
                let (rejected, rejectedTransaction) = try harness.genuineJob(account: account)
                var rejectedJob = rejected
                rejectedJob.expectedProductID = "com.example.verifyworker.other"
                var again = grant
                again.jobID = "again-" + grant.jobID
                let (last, lastTransaction) = try harness.genuineJob(account: account)
                server.setFallback(Self.finishPath(lastTransaction), .init(status: 200))
                try await harness.submit([grant, again, rejectedJob, last])
                try await harness.verdicts.waitForVerdicts(of: [again.jobID, rejectedJob.jobID, last.jobID])
                #expect(harness.verdicts.byJob[grant.jobID]?.count == 2)
                #expect(harness.verdicts.byJob[rejectedJob.jobID]?.first?.outcome == .rejected)
                try await PipelineHarness.poll("the last grant's call recorded as sent") {
                    try await Self.record(harness, lastTransaction)?.state == .sent
                }
                #expect(server.received(path: Self.finishPath(granted)).count == 1)
                #expect(server.received(path: Self.finishPath(lastTransaction)).count == 1)
                #expect(server.received(path: Self.finishPath(rejectedTransaction)).isEmpty)
                #expect(server.received(path: Self.finishPath(offTransaction)).isEmpty)
                #expect(try await Self.record(harness, offTransaction) == nil)
                #expect(server.received().allSatisfy { $0.path.hasSuffix("/finish") })
            }
        }
    }

    @Test("a refused call leaves the verdict alone and is recorded as failed; a 429 is retried through the gate")
    func failuresNeverChangeVerdicts() async throws {
        try await AppleClientsFakeServer.withRunning { server, base in
            try await PipelineHarness.with { harness in
                let on = Self.settings(base: base, on: true)
                try harness.startWorker(0, extra: on.extra, environment: on.environment)
                try await harness.waitUntilAssigned()
                let (refused, refusedTransaction) = try harness.genuineJob(account: "acct-refused")
                let (limited, limitedTransaction) = try harness.genuineJob(account: "acct-limited")
                server.setFallback(
                    Self.finishPath(refusedTransaction),
                    .json(#"{"errorCode":4000006,"errorMessage":"Invalid transaction id."}"#, status: 400))
                // Retry-After in the past: retry at once (the gate's backoff still applies).
                server.enqueue(
                    Self.finishPath(limitedTransaction),
                    .json(#"{"errorCode":4290000}"#, status: 429, headers: ["Retry-After": "1"]))
                server.setFallback(Self.finishPath(limitedTransaction), .init(status: 200))
                try await harness.submit([refused, limited])
                try await harness.verdicts.waitForVerdicts(of: [refused.jobID, limited.jobID])
                #expect(harness.verdicts.byJob[refused.jobID]?.map(\.outcome) == [.granted])
                #expect(harness.verdicts.byJob[limited.jobID]?.map(\.outcome) == [.granted])
                try await PipelineHarness.poll("both calls settled") {
                    let one = try await Self.record(harness, refusedTransaction)
                    let two = try await Self.record(harness, limitedTransaction)
                    return one?.state == .failed && two?.state == .sent
                }
                let failed = try #require(try await Self.record(harness, refusedTransaction))
                #expect(failed.detail?.contains("4000006") == true)
                #expect(server.received(path: Self.finishPath(refusedTransaction)).count == 1)
                #expect(server.received(path: Self.finishPath(limitedTransaction)).count == 2)
                // No verdict was published twice or changed.
                #expect(harness.verdicts.byJob.values.allSatisfy { $0.count == 1 })
            }
        }
    }
}
