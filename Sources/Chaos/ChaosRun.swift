import AppleSimulator
import Foundation
import Kafka
import Ledger
import Logging
import Messages
import Receipts

#if canImport(Glibc)
    import Glibc
#endif

/// What `verify-worker chaos` runs.
public struct ChaosConfiguration: Sendable {
    /// The `verify-worker` executable the services and workers are started from.
    public var binary: URL
    /// Seed-mix jobs to submit (adversarial cases and malformed messages come on top). Default: 2 000.
    public var jobs = 2_000
    /// Share of ``jobs`` that are Google Play jobs, minted in a Play simulator started beside Apple's (0: no Google
    /// Play, no Play simulator). Default: a third.
    public var playShare = 1.0 / 3
    /// Adversarial corpus messages to submit through the live workers. Default: 0.
    public var fuzz = 0
    /// Worker processes in the group. Default: 3.
    public var workers = 3
    /// Traffic and schedule seed. Default: 1.
    public var seed: UInt64 = 1
    /// Keep cycling the fault schedule until this much time has passed (at least one cycle). Default: one cycle.
    public var duration: Duration?
    /// Ledger of the workers. Nil: a private PostgreSQL started with `postgresScript` (which the outage fault
    /// pauses); given: used as is, and the PostgreSQL outage fault is skipped. Default: nil.
    public var ledgerURL: String?
    /// `scripts/test-postgres.sh`. Default: found beside the package the binary was built in, or in the working
    /// directory.
    public var postgresScript: URL?
    /// Partitions of every topic. Nil: from the planned volume, at most 20 MiB per partition, between 12 and 64 (the mock
    /// broker keeps only 5 MiB per partition). Default: nil.
    public var partitions: Int?
    /// Bytes submitted and not yet settled (no verdict, no dead letter) before the submitter waits. Nil: 512 KiB per
    /// partition. Default: nil.
    public var flowWindowBytes: Int?
    /// Mock brokers. Default: 3.
    public var brokers = 3
    /// Inject the fault schedule (off: a baseline run). Default: true.
    public var faults = true
    /// Only these kinds of fault (their names in ``faultNames``), cycled like the whole schedule: to hammer one
    /// failure mode. Nil: every kind. Default: nil.
    public var onlyFaults: Set<String>?
    /// The names of the kinds of fault the schedule injects.
    public static var faultNames: [String] { ChaosEnvironment.Fault.allCases.map(\.rawValue) }
    /// Share of Apple requests the 21005 and 503 storms fail (the timeout storm holds at most half of them).
    /// Default: 1 (every request).
    public var appleFaultRatio = 1.0
    /// How long each fault lasts before it is cleared. Default: 3 s.
    public var faultHold: Duration = .seconds(3)
    /// How long the run may wait for the verdicts after the last fault. Default: 180 s.
    public var settleTimeout: Duration = .seconds(180)
    /// Accept sandbox purchases in the workers. Default: false (a production deployment).
    public var allowSandbox = false
    /// Submit refunded iOS 6 receipts too (a known gap, see ``ChaosTrafficBuilder/ios6Refunds``). Default: false.
    public var ios6Refunds = false
    /// `VERIFY_JOB_DEADLINE_S` of the workers: how long a job may wait for Apple. Default: 600 (the worker's).
    public var jobDeadlineSeconds = 600
    /// The largest corpus message submitted to the live workers. Default: 200 000 bytes.
    public var fuzzMaximumSize = 200_000
    /// ``AdversarialJobCorpus/heavyShare`` of the run's corpus messages. Default: 1.
    public var fuzzHeavyShare = 1.0
    /// `VERIFY_DRAIN_TIMEOUT_S` of the workers. Default: 10.
    public var drainTimeoutSeconds = 10
    /// `VERIFY_LOG_LEVEL` of the workers (`trace` for the security check of their logs). Default: info.
    public var workerLogLevel = "info"
    /// Also run the entitlement service (`verify-worker entitlements`, SQLite), kill it with the workers' faults
    /// (`kill_entitlements`), and check at the end that every account's entitlements from its API equal the run's
    /// truth. Default: true.
    public var entitlements = true
    /// The notification family: run a gateway (the simulator's notification URL) and a
    /// reconciler, trigger lifecycle events for ``notificationTransactions`` granted purchases while notifications are
    /// dropped, duplicated and delayed and the gateway, the reconciler and a worker are killed; then compare the ledger
    /// with the simulator's truth. Turns on Finish Transaction and consumption answers in the workers. Default: true.
    public var notifications = true
    /// Granted purchases given a lifecycle scenario. Default: 40.
    public var notificationTransactions = 40
    /// Granted Google Play purchases given a lifecycle scenario, after the App Store's (with the notification family
    /// and Google Play traffic): pushed to the gateway's Play route under push faults, swept and re-read by the
    /// reconciler, then compared with the Play simulator's truth. Default: 40.
    public var playLifecyclePurchases = 40
    /// `VERIFY_KAFKA_PROPERTIES` of the workers (e.g. `debug=eos,msg` to see the idempotent producer's state).
    /// Default: none.
    public var workerKafkaProperties: String?
    /// Where state, logs and the catalog go. Nil: a new temporary directory, deleted after a clean run.
    public var workDirectory: URL?
    public var logger = Logger(label: "verify.chaos")
}

/// One fault the schedule injected.
public struct ChaosFaultRecord: Sendable, Codable, Hashable {
    /// `kill_worker`, `sigterm_worker`, `broker_down`, `broker_errors`, `postgres_outage`, `apple_21005`,
    /// `apple_503`, `apple_timeouts`, `play_429`, `play_5xx`, `play_token_endpoint_down`, and the notification
    /// family's `kill_gateway`, `kill_reconciler`.
    public var kind: String
    /// What it hit (a worker index, a broker id), when it applies.
    public var target: String?
    /// Seconds since the run started.
    public var atSeconds: Double
    public var heldSeconds: Double
    /// From clearing the fault until every message submitted before then was settled; nil when that did not happen
    /// within the settle timeout.
    public var recoverySeconds: Double?
    public var detail: String?

    enum CodingKeys: String, CodingKey {
        case kind, target, detail
        case atSeconds = "at_s"
        case heldSeconds = "held_s"
        case recoverySeconds = "recovery_s"
    }
}

/// The JSON summary a run prints.
public struct ChaosReport: Sendable, Codable, ChaosPrintedReport {
    public var jobs: Int
    public var messages: Int
    public var malformed: Int
    public var fuzz: Int
    public var cases: [String: Int]
    public var workers: Int
    public var partitions: Int
    public var seed: UInt64
    public var verdictsDelivered: Int
    public var jobsDecided: Int
    public var duplicatesDelivered: Int
    /// Jobs decided again on redelivery (same decision, another `decided_at`).
    public var redecided: Int
    public var deadLetters: Int
    public var grantedTransactions: Int
    public var outcomes: [String: Int]
    public var faultsInjected: Int
    public var faults: [ChaosFaultRecord]
    public var violations: Int
    public var violationKinds: [String: Int]
    public var violationExamples: [String]
    /// Requests the simulated Apple counted per endpoint.
    public var appleRequests: [String: Int]
    public var elapsedSeconds: Double
    public var workDirectory: String
    /// What the harness could not check because the broker deleted it first (``ChaosHarnessError``); not violations,
    /// but a run with any is not clean.
    public var harnessErrors: Int
    public var harnessErrorKinds: [String: Int]
    public var harnessErrorExamples: [String]
    /// The traffic's size, the submitter's window and the most bytes produced to one `receipt-jobs` partition.
    public var plannedMegabytes: Int
    public var windowKilobytes: Int
    public var largestJobPartitionKilobytes: Int
    /// Partitions per topic whose low watermark had moved past 0 at the end (the broker deleted old batches).
    public var trimmedPartitions: [String: Int]
    /// Worker log lines `Offset out of range` (a fetch position the broker had deleted; see ``ChaosHarnessError``).
    public var workerOffsetResets: Int
    /// The notification family's figures (nil when it did not run).
    public var notifications: ChaosNotificationReport?
    /// The Google Play figures (nil without Google Play traffic).
    public var play: ChaosPlayReport?
    /// The Google Play lifecycle's figures (nil when it did not run).
    public var playLifecycle: ChaosPlayLifecycleReport?

    enum CodingKeys: String, CodingKey {
        case jobs, messages, malformed, fuzz, cases, workers, partitions, seed, outcomes, faults, violations
        case verdictsDelivered = "verdicts_delivered"
        case jobsDecided = "jobs_decided"
        case duplicatesDelivered = "duplicates_delivered"
        case redecided
        case deadLetters = "dead_letters"
        case grantedTransactions = "granted_transactions"
        case faultsInjected = "faults_injected"
        case violationKinds = "violation_kinds"
        case violationExamples = "violation_examples"
        case appleRequests = "apple_requests"
        case elapsedSeconds = "elapsed_s"
        case workDirectory = "work_directory"
        case harnessErrors = "harness_errors"
        case harnessErrorKinds = "harness_error_kinds"
        case harnessErrorExamples = "harness_error_examples"
        case plannedMegabytes = "planned_mb"
        case windowKilobytes = "window_kb"
        case largestJobPartitionKilobytes = "largest_job_partition_kb"
        case trimmedPartitions = "trimmed_partitions"
        case workerOffsetResets = "worker_offset_resets"
        case notifications
        case play
        case playLifecycle = "play_lifecycle"
    }
}

/// Why a run could not be set up.
public struct ChaosError: Error, CustomStringConvertible, Sendable {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// The multi-process chaos harness: starts the dev broker, the Apple simulator, PostgreSQL and N
/// `verify-worker run` processes; submits the seed mix with adversarial cases; injects the fault schedule; reads
/// back every verdict and dead letter and the ledger; checks the invariants (``ChaosInvariantChecker``).
public struct ChaosRun: Sendable {
    public var configuration: ChaosConfiguration

    public init(configuration: ChaosConfiguration) { self.configuration = configuration }

    /// Runs once. Throws only when the system could not be set up; broken promises are in the report.
    public func run() async throws -> ChaosReport {
        try await withEnvironment(runIDPrefix: "chaos", keepsDirectory: { $0.violations != 0 }) { try await $0.run() }
    }

    /// Runs `body` in a fresh environment (in the configured work directory, or a temporary one named after the run)
    /// and tears the environment down either way; a temporary directory is removed unless `keepsDirectory` says the
    /// report needs it looked at.
    func withEnvironment<Report>(
        runIDPrefix: String, keepsDirectory: (Report) -> Bool, _ body: (ChaosEnvironment) async throws -> Report
    ) async throws -> Report {
        let started = ContinuousClock().now
        let runID = "\(runIDPrefix)\(String(UInt32.random(in: 0...UInt32.max), radix: 36))"
        let directory =
            configuration.workDirectory
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("verify-\(runID)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let environment = try ChaosEnvironment(
            configuration: configuration, directory: directory, runID: runID, started: started)
        do {
            let report = try await body(environment)
            await environment.tearDown()
            if !keepsDirectory(report), configuration.workDirectory == nil {
                try? FileManager.default.removeItem(at: directory)
            }
            return report
        } catch {
            await environment.tearDown()
            throw error
        }
    }
}
