import Foundation
import Logging
import Testing

@testable import Chaos

/// The chaos harness in its short mode: a few hundred jobs and every fault once, through real processes (dev broker,
/// Apple simulator, a private PostgreSQL, three `verify-worker run`). The long mode is `verify-worker chaos --long`.
@Suite("Chaos: short run", .serialized)
struct ChaosRunTests {
    /// PostgreSQL 15's binaries, which `scripts/test-postgres.sh` starts a private server from.
    static var postgresInstalled: Bool {
        let bin = ProcessInfo.processInfo.environment["PG_BIN"] ?? "/usr/lib/postgresql/15/bin"
        return FileManager.default.isExecutableFile(atPath: bin + "/initdb")
    }

    /// The built binary, the repository's PostgreSQL script and a quiet logger; fails (never skips) without
    /// PostgreSQL.
    static func configuration(for run: String) throws -> ChaosConfiguration {
        let binary = try TestEnvironment.verifyWorkerBinary()
        guard postgresInstalled else {
            throw MissingResource(
                what: "PostgreSQL 15 (\(run) starts a private server with scripts/test-postgres.sh)",
                hint: "apt-get install postgresql-15, or set PG_BIN to its bin directory")
        }
        var logger = Logger(label: "chaos-test")
        logger.logLevel = .notice
        var configuration = ChaosConfiguration(binary: binary, logger: logger)
        configuration.postgresScript = TestEnvironment.packageRoot.appendingPathComponent("scripts/test-postgres.sh")
        return configuration
    }

    // Eight minutes: the notification family adds about 35 s and the Play lifecycle about 30 s; 228 s alone, 380 s in a
    // full suite at load 14.
    @Test("Every fault once, seed mix plus adversarial cases and fuzz: no invariant broken", .timeLimit(.minutes(8)))
    func shortRun() async throws {
        var configuration = try Self.configuration(for: "the chaos run")
        configuration.jobs = Int(ProcessInfo.processInfo.environment["CHAOS_TEST_JOBS"] ?? "") ?? 400
        configuration.fuzz = 120
        configuration.workers = 3
        configuration.seed = 8
        configuration.faultHold = .seconds(2)
        // Full Apple storms (every request fails for the hold): the retry budget's minimum rate lets stranded retries
        // go on without new traffic, so every job still settles (docs/RELIABILITY.md, "History").
        configuration.appleFaultRatio = 1
        configuration.settleTimeout = .seconds(60)
        // Trace level: the run's log audit then proves no worker line holds the shared secret or a receipt.
        configuration.workerLogLevel = "trace"
        let report = try await ChaosRun(configuration: configuration).run()
        #expect(report.violations == 0, "\(report.violationExamples.joined(separator: "\n")) (\(report.workDirectory))")
        // Every fault once, the entitlement service's SIGKILL included; its API then agrees with the run's truth
        // about every account (entitlement_mismatch violations otherwise). The notification family adds the SIGKILLs
        // of the gateway, the reconciler and a worker, and the Play lifecycle the same three again; the Google Play
        // storms are three more.
        #expect(report.faultsInjected == 19)
        // A third of the jobs were Google Play's: none lost, every granted purchase acknowledged or consumed once
        // (play_acknowledgements violations otherwise).
        let play = try #require(report.play)
        #expect(play.lost == 0)
        #expect(play.purchasesGranted > 0)
        #expect(play.acknowledgedOnce + play.consumedOnce == play.purchasesGranted)
        // The notification family ran: lifecycle events under dropped, duplicated and delayed notifications, and the
        // ledger agreed with Apple's truth (notification_drift, consumption_answers, finish_calls and
        // reconcile_budget violations otherwise).
        let notifications = try #require(report.notifications)
        #expect(notifications.eventsTriggered >= 40)
        #expect(notifications.notificationsFailed > 0)
        #expect(notifications.notificationsDuplicated > 0)
        #expect(notifications.convergenceSeconds != nil)
        #expect(notifications.consumptionRequests > 0)
        // Billing retry, expiry, extension and the refund of a subscription's latest period were compared with the
        // simulator's truth too, the subscription's state (its latest transaction's) included; and a purchase shared
        // with a family member, the member's own transaction granted to the member's account and then revoked
        // (FAMILY_REVOKE) while the purchaser's stayed.
        #expect(
            Set(notifications.scenarios.keys).isSuperset(of: [
                "expire", "billing_retry_grace", "extend", "refund_latest", "family_revoke",
            ]), "\(notifications.scenarios)")
        // Google Play's lifecycle ran: pushes to the gateway's Play route dropped, duplicated and delayed, the
        // reconciler sweeping voided purchases and re-reading subscriptions, and the ledger agreed with Google's truth
        // (play_notification_drift, play_refund_review_answers and play_reconcile_budget violations otherwise).
        let playLifecycle = try #require(report.playLifecycle)
        #expect(playLifecycle.eventsTriggered >= 40)
        #expect(playLifecycle.pushesDropped > 0)
        #expect(playLifecycle.pushesDuplicated > 0)
        #expect(playLifecycle.convergenceSeconds != nil)
        #expect(playLifecycle.refundReviews > 0)
        #expect(playLifecycle.refundReviewsAnswered == playLifecycle.refundReviews)
        #expect(playLifecycle.voidedPages > 0)
        #expect(playLifecycle.rereads > 0)
        #expect(
            Set(playLifecycle.scenarios.keys).isSuperset(of: [
                "renew", "grace_period", "hold", "pause", "cancel", "revoke", "refund", "chargeback", "upgrade",
                "grace_recover", "pause_resume", "hold_recover",
            ]), "\(playLifecycle.scenarios)")
        #expect(report.jobsDecided == report.jobs)
        #expect(report.faults.allSatisfy { $0.recoverySeconds != nil })
        #expect(report.harnessErrors == 0, "\(report.harnessErrorExamples.joined(separator: "\n"))")
    }

    @Test("Adversarial inputs through live workers: each a dead letter or rejected, no crash", .timeLimit(.minutes(3)))
    func liveFuzz() async throws {
        var configuration = try Self.configuration(for: "the live fuzz run")
        configuration.workers = 2
        configuration.seed = 11
        configuration.partitions = 12
        configuration.fuzzMaximumSize = 900_000
        configuration.settleTimeout = .seconds(60)
        var plan = ChaosLiveFuzzPlan()
        plan.inputs = 550
        plan.heavyShare = 0.05
        let report = try await ChaosRun(configuration: configuration).runLiveFuzz(plan)
        #expect(report.violations == 0, "\(report.violationExamples.joined(separator: "\n")) (\(report.workDirectory))")
        #expect(report.harnessErrors == 0, "\(report.harnessErrorExamples.joined(separator: "\n"))")
        #expect(report.settled == report.expectedJobs + report.expectedDeadLetters)
        #expect(report.kinds.count == AdversarialMessage.Kind.allCases.count)
        #expect(report.workerCrashes == 0)
        #expect(report.peakRSSMegabytes.values.allSatisfy { $0 > 0 })
    }
}
