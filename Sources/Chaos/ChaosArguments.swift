import ArgumentParser
import Foundation
import Logging
import Traffic

/// `verify-worker chaos`: the multi-process chaos harness. The logic lives in the Chaos target.
package struct ChaosArguments: HarnessArguments {
    package static let commandConfiguration = CommandConfiguration(
        commandName: "chaos",
        abstract:
            "Runs a worker cluster under failure and checks that no purchase is lost, granted twice or misgranted.",
        discussion: """
            Starts `verify-worker dev-broker`, `verify-worker apple-sim`, a private PostgreSQL (scripts/test-postgres.sh, \
            or --ledger-url) and N `verify-worker run` processes in one group; submits the seed-000 mix plus \
            adversarial cases; kills, terminates and restarts workers (and, in the notification family, \
            `verify-worker gateway` and `verify-worker reconcile` while lifecycle events' notifications are dropped, \
            duplicated and delayed), takes a broker down, injects broker request \
            errors, stops PostgreSQL, and switches the simulator to 21005 storms, 503s and timeouts. Then reads every \
            verdict, dead letter and the ledger and checks the invariants of docs/RELIABILITY.md. Prints a JSON \
            summary and exits 1 on any violation.
            """
    )

    @Option(help: "Seed-mix jobs (short default; --long means 100,000).")
    package var jobs: Int?

    @Option(
        name: .customLong("play-share"),
        help: "Share of the seed-mix jobs that are Google Play purchases, in a Play simulator (0: no Google Play).")
    package var playShare: Double = 1.0 / 3

    @Flag(help: "Long mode: 100,000 jobs unless --jobs is given.")
    package var long = false

    @Option(help: "Worker processes.")
    package var workers: Int = 3

    @Option(help: "Traffic and schedule seed.")
    package var seed: UInt64 = 1

    @Option(help: "Cycle the fault schedule for at least this many seconds.")
    package var duration: Int?

    @Option(help: "Adversarial corpus messages to push through the live workers.")
    package var fuzz: Int = 0

    @Option(
        name: .customLong("fuzz-in-process"),
        help: "Only feed N corpus messages through decode and local analysis in this process, print the figures, exit.")
    package var fuzzInProcess: Int?

    @Option(
        name: .customLong("fuzz-size-limit"),
        help:
            "Cut corpus messages to this many bytes (default: 200,000 in the chaos run, 900,000 with --live-fuzz, 2 MiB in-process)."
    )
    package var fuzzMaximumSize: Int?

    @Option(
        name: .customLong("live-fuzz"),
        help: "Only feed N corpus messages through a live cluster (no faults): each must end a dead letter or rejected."
    )
    package var liveFuzz: Int?

    @Option(
        name: .customLong("fuzz-heavy-share"),
        help: "Share of corpus messages that may take their megabyte-sized forms (default: 1, 0.01 with --live-fuzz).")
    package var fuzzHeavyShare: Double?

    @Option(name: .customLong("rss-limit-mb"), help: "With --live-fuzz: the most resident MiB a worker may reach.")
    package var maximumRSSMegabytes: Int = 1_024

    @Option(name: .customLong("job-deadline-s"), help: "VERIFY_JOB_DEADLINE_S of the workers.")
    package var jobDeadlineSeconds: Int = 600

    @Option(
        name: .customLong("settle-timeout-s"),
        help:
            "How long to wait for every message to settle after a fault and at the end (default: 180, 900 with --long)."
    )
    package var settleTimeoutSeconds: Int?

    @Option(
        name: .customLong("apple-fault-ratio"),
        help: "Share of Apple requests the 21005 and 503 storms fail, 0...1.")
    package var appleFaultRatio: Double = 1

    @Option(
        name: .customLong("ledger-url"), help: "Use this PostgreSQL ledger (the PostgreSQL outage is then skipped).")
    package var ledgerURL: String?

    @Option(name: .customLong("pg-script"), help: "Path of scripts/test-postgres.sh (default: found from the binary).")
    package var postgresScript: String?

    @Option(help: "Partitions of every topic (default: from the planned volume, 12...64).")
    package var partitions: Int?

    @Option(
        name: .customLong("flow-window-kb"),
        help: "Unsettled kilobytes the submitter allows before it waits (default: 512 per partition).")
    package var flowWindowKilobytes: Int?

    @Option(name: .customLong("fault-hold-s"), help: "Seconds each fault lasts.")
    package var faultHoldSeconds: Int = 3

    @Flag(name: .customLong("no-faults"), help: "A baseline run without the fault schedule.")
    package var noFaults = false

    @Flag(
        name: .customLong("no-entitlements"),
        help: "Do not run the entitlement service (by default it runs, is killed like a worker, and is checked).")
    package var noEntitlements = false

    @Flag(
        name: .customLong("no-notifications"),
        help:
            "Do not run the notification family (by default: a gateway and a reconciler, lifecycle events under notification faults, the ledger compared with the simulator's truth)."
    )
    package var noNotifications = false

    @Option(
        name: .customLong("notification-transactions"),
        help: "Granted purchases given lifecycle events (default: 40, 400 with --long).")
    package var notificationTransactions: Int?

    @Option(
        name: .customLong("play-lifecycle-purchases"),
        help: "Granted Google Play purchases given lifecycle events (default: 40, 400 with --long).")
    package var playLifecyclePurchases: Int?

    @Option(name: .customLong("worker-log-level"), help: "VERIFY_LOG_LEVEL of the workers.")
    package var workerLogLevel = "info"

    @Option(
        name: .customLong("worker-kafka-properties"),
        help: "VERIFY_KAFKA_PROPERTIES of the workers (e.g. debug=eos,msg).")
    package var workerKafkaProperties: String?

    @Option(
        name: .customLong("only-faults"),
        help: "Only these faults, comma-separated, cycled like the whole schedule (e.g. broker_errors).")
    package var onlyFaults: String?

    @Flag(name: .customLong("allow-sandbox"), help: "Run the workers with VERIFY_ALLOW_SANDBOX=true.")
    package var allowSandbox = false

    @Flag(
        name: .customLong("ios6-refunds"),
        help: "Also submit refunded iOS 6 receipts (a known gap today, see docs/RELIABILITY.md).")
    package var ios6Refunds = false

    @Option(
        name: .customLong("work-dir"),
        help: "Keep state and logs here (default: a temporary directory, kept on failure).")
    package var workDirectory: String?

    package init() {}

    package func validate() throws {
        guard (1...32).contains(workers) else { throw ValidationError("--workers must be 1...32") }
        guard (jobs ?? 1) > 0, fuzz >= 0 else { throw ValidationError("--jobs must be positive, --fuzz not negative") }
        guard (playLifecyclePurchases ?? 1) >= 0 else {
            throw ValidationError("--play-lifecycle-purchases must not be negative")
        }
        guard (notificationTransactions ?? 1) >= 0 else {
            throw ValidationError("--notification-transactions must not be negative")
        }
        guard (0...1).contains(playShare) else { throw ValidationError("--play-share must be 0...1") }
        guard faultHoldSeconds > 0 else { throw ValidationError("--fault-hold-s must be positive") }
        guard (fuzzHeavyShare ?? 0) >= 0, (fuzzHeavyShare ?? 0) <= 1 else {
            throw ValidationError("--fuzz-heavy-share must be 0...1")
        }
        guard (liveFuzz ?? 1) > 0 else { throw ValidationError("--live-fuzz must be positive") }
        for name in onlyFaultNames where !ChaosConfiguration.faultNames.contains(name) {
            throw ValidationError(
                "--only-faults: unknown fault \(name) (known: \(ChaosConfiguration.faultNames.joined(separator: ", ")))"
            )
        }
    }

    private var onlyFaultNames: [String] {
        onlyFaults.map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } } ?? []
    }

    package func run() async throws {
        if let fuzzInProcess {
            var run = try AdversarialCorpusRun.standard(seed: seed, maximumSize: fuzzMaximumSize ?? (2 << 20))
            run.corpus.heavyShare = fuzzHeavyShare ?? 1
            let report = run.run(count: fuzzInProcess)
            try printJSON(report)
            if report.locallyVerified > 0 { throw ExitCode(1) }
            return
        }
        var logger = Logger(label: "verify.chaos")
        logger.logLevel = .info
        var configuration = ChaosConfiguration(binary: RunningExecutable.url, logger: logger)
        configuration.jobs = jobs ?? (long ? 100_000 : 2_000)
        configuration.workers = workers
        configuration.playShare = playShare
        configuration.seed = seed
        configuration.duration = duration.map { .seconds($0) }
        configuration.fuzz = fuzz
        configuration.ledgerURL = ledgerURL
        configuration.postgresScript = postgresScript.map { URL(fileURLWithPath: $0) }
        configuration.partitions = partitions
        configuration.flowWindowBytes = flowWindowKilobytes.map { $0 << 10 }
        configuration.faultHold = .seconds(faultHoldSeconds)
        configuration.faults = !noFaults
        configuration.entitlements = !noEntitlements
        configuration.notifications = !noNotifications
        configuration.notificationTransactions = notificationTransactions ?? (long ? 400 : 40)
        configuration.playLifecyclePurchases = playLifecyclePurchases ?? (long ? 400 : 40)
        if onlyFaults != nil { configuration.onlyFaults = Set(onlyFaultNames) }
        configuration.workerLogLevel = workerLogLevel
        configuration.workerKafkaProperties = workerKafkaProperties
        configuration.allowSandbox = allowSandbox
        configuration.ios6Refunds = ios6Refunds
        configuration.workDirectory = workDirectory.map { URL(fileURLWithPath: $0, isDirectory: true) }
        if long { configuration.settleTimeout = .seconds(900) }
        if let settleTimeoutSeconds { configuration.settleTimeout = .seconds(settleTimeoutSeconds) }
        if let fuzzMaximumSize { configuration.fuzzMaximumSize = fuzzMaximumSize }
        configuration.jobDeadlineSeconds = jobDeadlineSeconds
        configuration.appleFaultRatio = appleFaultRatio
        if let fuzzHeavyShare { configuration.fuzzHeavyShare = fuzzHeavyShare }
        if let liveFuzz {
            var plan = ChaosLiveFuzzPlan()
            plan.inputs = liveFuzz
            plan.heavyShare = fuzzHeavyShare ?? 0.01
            plan.maximumRSSMegabytes = maximumRSSMegabytes
            configuration.fuzzMaximumSize = fuzzMaximumSize ?? 900_000
            let report = try await ChaosRun(configuration: configuration).runLiveFuzz(plan)
            print(report.json)
            if report.violations > 0 || report.harnessErrors > 0 { throw ExitCode(1) }
            return
        }
        let report = try await ChaosRun(configuration: configuration).run()
        print(report.json)
        if report.violations > 0 || report.harnessErrors > 0 { throw ExitCode(1) }
    }
}
