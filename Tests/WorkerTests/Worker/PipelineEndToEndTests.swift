import AppleSimulator
import Crypto
import Foundation
import Messages
import Testing
import Worker

/// The worker end to end, in one process: mock cluster, Apple simulator, SQLite or PostgreSQL ledger, and workers
/// running `verify-worker run`'s runtime. (The seed-mix test per ledger is "Demo run"; process kills are in
/// Tests/WorkerTests/Process.)
@Suite("Pipeline end to end", .serialized, .timeLimit(.minutes(3)))
struct PipelineEndToEndTests {
    @Test("one account's jobs are decided in submission order while other accounts run in parallel")
    func perAccountOrder() async throws {
        try await PipelineHarness.with { harness in
            // Latency with jitter: without per-key ordering, later jobs of an account would often finish first.
            var faults = FaultPlan()
            faults.latencyMs = 40
            faults.latencyJitterMs = 40
            harness.simulator.setFaults(faults)
            try harness.startWorker(0)
            try await harness.waitUntilAssigned()

            let accounts = (0..<6).map { "acct-order-\($0)" }
            var submitted: [String: [String]] = [:]
            var jobs: [ReceiptJob] = []
            for round in 0..<8 {
                for account in accounts {
                    let format: SimulatedReceiptFormat = round.isMultiple(of: 3) ? .signedTransaction : .appReceipt
                    let (job, _) = try harness.genuineJob(account: account, format: format)
                    submitted[account, default: []].append(job.jobID)
                    jobs.append(job)
                }
            }
            try await harness.submit(jobs)
            try await harness.verdicts.waitForVerdicts(of: jobs.map(\.jobID))

            let verdicts = harness.verdicts.verdicts
            for account in accounts {
                let order = verdicts.filter { $0.accountID == account }.map(\.jobID)
                #expect(order == submitted[account], "verdict order of \(account)")
            }
            #expect(verdicts.allSatisfy { $0.outcome == .granted }, "\(verdicts.map(\.outcome))")
        }
    }

    @Test("messages that are not jobs go to the dead-letter topic with a reason, and the worker goes on")
    func poisonMessages() async throws {
        try await PipelineHarness.with { harness in
            try harness.startWorker(0, extra: ["max_message_bytes": "65536"])
            try await harness.waitUntilAssigned()

            let poison: [(String, [UInt8])] = [
                ("not json", Array("{\"job_id\": ".utf8)),
                ("invalid utf-8", [0x7B, 0xFF, 0xFE, 0x7D]),
                ("wrong types", Array(#"{"schema":"receipt-job/v1","job_id":7,"account_id":[],"receipt":true}"#.utf8)),
                ("too large", Array(repeating: 0x20, count: 70_000)),
                (
                    "deeply nested",
                    Array((String(repeating: "[", count: 5_000) + String(repeating: "]", count: 5_000)).utf8)
                ),
                ("empty", []),
            ]
            for (index, (_, value)) in poison.enumerated() {
                try await harness.submitRaw(value, key: "acct-poison-\(index)")
            }
            let (good, _) = try harness.genuineJob(account: "acct-after-poison", format: .signedTransaction)
            try await harness.submit([good])

            try await harness.deadLetters.waitForCount(poison.count)
            try await harness.verdicts.waitForVerdicts(of: [good.jobID])
            let letters = harness.deadLetters.all
            #expect(letters.count == poison.count)
            for letter in letters {
                #expect(letter.headers[DeadLetter.Header.reason]?.isEmpty == false, "\(letter.headers)")
                #expect(letter.headers[DeadLetter.Header.topic] == Topics.jobs)
            }
            // The original bytes are kept as they came, for an operator to inspect or replay.
            #expect(Set(letters.map(\.value)) == Set(poison.map(\.1)))
            #expect(harness.verdicts.byJob[good.jobID]?.first?.outcome == .granted)
        }
    }

    @Test("a 21005 storm slows Apple calls down, and every genuine job still ends granted")
    func storm21005() async throws {
        try await PipelineHarness.with { harness in
            var faults = FaultPlan()
            faults.status21005Ratio = 0.5
            faults.latencyMs = 5
            harness.simulator.setFaults(faults)
            // Apple keeps refusing half the calls: a job may need many attempts, each after a longer backoff.
            try harness.startWorker(0, jobDeadline: .seconds(150))
            try await harness.waitUntilAssigned()

            var jobs: [ReceiptJob] = []
            for index in 0..<24 {
                jobs.append(try harness.genuineJob(account: "acct-storm-\(index)").job)
            }
            try await harness.submit(jobs)
            try await harness.verdicts.waitForVerdicts(of: jobs.map(\.jobID), timeout: .seconds(170))

            let stats = harness.simulator.stats.snapshot()
            #expect((stats.statuses["21005"] ?? 0) > 0, "the storm answered 21005: \(stats.statuses)")
            let byJob = harness.verdicts.byJob
            for job in jobs {
                #expect(byJob[job.jobID]?.map(\.outcome) == [.granted], "\(job.jobID): \(byJob[job.jobID] ?? [])")
            }
        }
    }

    @Test("a worker cancelled mid-run loses nothing: its jobs are redelivered and decided identically")
    func cancelledWorkerLosesNothing() async throws {
        try await PipelineHarness.with { harness in
            var faults = FaultPlan()
            faults.latencyMs = 150
            harness.simulator.setFaults(faults)
            try harness.startWorker(0)
            try await harness.waitUntilAssigned()

            var jobs: [ReceiptJob] = []
            var owners: [String: String] = [:]
            for index in 0..<60 {
                let (job, transaction) = try harness.genuineJob(account: "acct-cancel-\(index % 20)")
                jobs.append(job)
                owners[transaction] = job.accountID
            }
            // The same transaction sent by another account: a replay, whichever worker decides it.
            let (original, transaction) = try harness.genuineJob(account: "acct-cancel-owner")
            let replay = ReceiptJob(
                jobID: "job-replay-" + UUID().uuidString.lowercased(), accountID: "acct-cancel-thief",
                proof: original.proof, bundleID: PipelineHarness.bundleID)
            jobs += [original, replay]
            owners[transaction] = original.accountID
            try await harness.submit([original])
            try await harness.verdicts.waitForVerdicts(of: [original.jobID])
            try await harness.submit(jobs.filter { $0.jobID != original.jobID })

            // Some verdicts out, others in flight: cancel the worker without asking it to drain first.
            try await PipelineHarness.poll("a few verdicts") { harness.verdicts.verdicts.count >= 10 }
            await harness.cancelWorker(0)
            try harness.startWorker(1)
            try await harness.verdicts.waitForVerdicts(of: jobs.map(\.jobID), timeout: .seconds(120))

            let byJob = harness.verdicts.byJob
            for job in jobs {
                let verdicts = byJob[job.jobID] ?? []
                #expect(!verdicts.isEmpty)
                // Redelivered jobs repeat the recorded verdict.
                #expect(Set(verdicts.map(\.verdictID)).count == 1)
                #expect(Set(verdicts.map { "\($0.outcome.rawValue)/\($0.reason?.rawValue ?? "")" }).count == 1)
            }
            #expect(byJob[replay.jobID]?.first?.outcome == .rejected)
            #expect(byJob[replay.jobID]?.first?.reason == .replayed)
            // No transaction granted to two accounts.
            var grantedTo: [String: Set<String>] = [:]
            for verdict in harness.verdicts.verdicts where verdict.outcome == .granted {
                for granted in verdict.transactions {
                    grantedTo[granted.transactionID, default: []].insert(verdict.accountID)
                }
            }
            for (transactionID, accounts) in grantedTo {
                #expect(accounts.count == 1, "\(transactionID) granted to \(accounts)")
                #expect(accounts.first == owners[transactionID])
            }
        }
    }

    @Test("rebalancing between two workers under load loses nothing, and SIGTERM-style stops drain")
    func rebalanceUnderLoad() async throws {
        try await PipelineHarness.with { harness in
            var faults = FaultPlan()
            faults.latencyMs = 50
            harness.simulator.setFaults(faults)
            try harness.startWorker(0)
            try await harness.waitUntilAssigned()
            var jobs: [ReceiptJob] = []
            for index in 0..<80 {
                jobs.append(try harness.genuineJob(account: "acct-rebalance-\(index)").job)
            }
            try await harness.submit(Array(jobs[..<40]))
            try harness.startWorker(1)
            try await harness.submit(Array(jobs[40...]))
            try await PipelineHarness.poll("some verdicts after the join") { harness.verdicts.verdicts.count >= 50 }
            let exit = try await harness.stopWorker(0)
            #expect(exit == .drained)
            try await harness.verdicts.waitForVerdicts(of: jobs.map(\.jobID), timeout: .seconds(120))
            let byJob = harness.verdicts.byJob
            for job in jobs {
                #expect(Set(byJob[job.jobID]?.map(\.outcome) ?? []) == [.granted], "\(job.jobID)")
            }
        }
    }

    @Test("a transaction id job is verified through the App Store Server API when a key is configured")
    func transactionIDThroughServerAPI() async throws {
        try await PipelineHarness.with { harness in
            let key = P256.Signing.PrivateKey()
            try harness.startWorker(
                0,
                extra: [
                    "server_api_production_url": "http://127.0.0.1:\(harness.port)",
                    "server_api_sandbox_url": "http://127.0.0.1:\(harness.port)/sandbox",
                    "server_api_key_id": "TESTKEY123", "server_api_issuer_id": "issuer-e2e",
                ],
                environment: ["VERIFY_SERVER_API_KEY": key.pemRepresentation])
            try await harness.waitUntilAssigned()
            var jobs: [(ReceiptJob, String)] = []
            for (index, environment) in [AppleEnvironment.production, .sandbox].enumerated() {
                let minted = try harness.simulator.mint(
                    MintRequest(
                        bundleId: PipelineHarness.bundleID, productId: PipelineHarness.consumable,
                        format: .signedTransaction, environment: environment))
                let id = minted.transaction.transactionId
                jobs.append(
                    (
                        ReceiptJob(
                            jobID: "job-tid-\(index)", accountID: "acct-tid-\(index)", proof: .transactionID(id)), id
                    ))
            }
            try await harness.submit(jobs.map(\.0))
            try await harness.verdicts.waitForVerdicts(of: jobs.map(\.0.jobID))
            for (job, transactionID) in jobs {
                let verdict = try #require(harness.verdicts.byJob[job.jobID]?.first)
                #expect(verdict.outcome == .granted)
                #expect(verdict.decidedBy == .apple)
                #expect(verdict.transactions.map(\.transactionID) == [transactionID])
            }
            let requests = harness.simulator.stats.snapshot().requests
            #expect(requests["inApps/v1/transactions"] == 2, "production first: \(requests)")
            #expect(requests["sandbox/inApps/v1/transactions"] == 1, "then sandbox for the sandbox one: \(requests)")
        }
    }

    @Test("without a Server API key a transaction id job ends unverifiable, not lost")
    func transactionIDWithoutServerAPI() async throws {
        try await PipelineHarness.with { harness in
            try harness.startWorker(0)
            try await harness.waitUntilAssigned()
            let job = ReceiptJob(
                jobID: "job-tid-nokey", accountID: "acct-tid", proof: .transactionID("2000000000000001"))
            try await harness.submit([job])
            try await harness.verdicts.waitForVerdicts(of: [job.jobID])
            let verdict = try #require(harness.verdicts.byJob[job.jobID]?.first)
            #expect(verdict.outcome == .unverifiable)
            #expect(verdict.reason == .appleUnavailable)
        }
    }
}
