import AppleSimulator
import ArgumentParser
import Foundation
import Logging
import Operations
import Traffic

/// `verify-worker demo`: the whole system in one process, with nothing installed.
package struct DemoArguments: HarnessArguments {
    package static let commandConfiguration = CommandConfiguration(
        commandName: "demo",
        abstract:
            "Runs workers, a mock Kafka cluster, a simulated Apple and a simulated Google Play in one process on seed-000-shaped traffic.",
        discussion: """
            Produces receipt jobs (other apps' receipts, cracker receipts, repeats, forgeries and genuine purchases \
            in the three receipt formats, sandbox and production) and Google Play purchases (other apps' purchases, \
            patched apps' forged signatures, replays and genuine one-time, consumable and subscription purchases, \
            minted by the Play simulator), decides them with W workers, and prints per store and traffic category \
            the verdicts, Apple calls versus jobs, Google calls per genuine purchase, whether every granted Play \
            purchase was acknowledged, throughput and submit-to-verdict latency. \
            The workers are the real ones (`verify-worker run`'s runtime) with a SQLite ledger in a temporary \
            directory. At the end the entitlement service (`verify-worker entitlements`' service, in process) reads \
            every verdict and the demo shows a few accounts' entitlements from its API; with --serve it keeps \
            running and prints the support console's URL and a token.
            """
    )

    @Option(help: "Jobs to produce.")
    package var jobs: Int = 10_000

    @Option(help: "Traffic mix: category=share pairs (other_app, cracker, repeat, forged, genuine).")
    package var mix: String = "other_app=0.79,cracker=0.093,repeat=0.01,forged=0.007,genuine=0.1"

    @Option(
        name: .customLong("play-share"),
        help: "Share of jobs that are Google Play purchases, 0...1 (their mix: other_app, forged, repeat, genuine).")
    package var playShare: Double = 0.4

    @Option(name: .customLong("play-mix"), help: "Google Play traffic mix: category=share pairs.")
    package var playMix: String = "other_app=0.3,forged=0.45,repeat=0.05,genuine=0.2"

    @Option(name: .customLong("apple-latency-ms"), help: "Latency added to every simulated Apple answer.")
    package var appleLatencyMs: Double = 0

    @Option(name: .customLong("apple-21005"), help: "Share of Apple answers that are 21005 (overloaded), 0...1.")
    package var apple21005: Double = 0

    @Option(help: "Worker tasks (consumers in one group).")
    package var workers: Int = 2

    @Option(help: "Partitions of every topic.")
    package var partitions: Int = 8

    @Option(
        name: .customLong("apple-deadline-s"), help: "Seconds a job may keep trying Apple before it is unverifiable.")
    package var appleDeadlineSeconds: Int = 30

    @Option(help: "Ledger of the workers: postgres://… or sqlite:PATH (default: SQLite in a temporary directory).")
    package var ledgerURL: String?

    @Option(help: "Log level of the workers (trace, debug, info, notice, warning, error).")
    package var logLevel: String = "warning"

    @Flag(help: "Keep the entitlement service running after the run and print the console's URL and a token.")
    package var serve = false

    @Option(name: .customLong("console-port"), help: "Port of the entitlement API and console (0: a free one).")
    package var consolePort: Int = 0

    @Option(
        name: .customLong("console-host"),
        help: "Interface of the console (127.0.0.1; 0.0.0.0 to reach it from outside).")
    package var consoleHost: String = "127.0.0.1"

    package init() {}

    package func validate() throws {
        guard jobs > 0 else { throw ValidationError("--jobs must be positive") }
        guard workers > 0, partitions > 0 else { throw ValidationError("--workers and --partitions must be positive") }
        guard TrafficMix(parsing: mix) != nil else {
            throw ValidationError(
                "--mix must look like other_app=0.79,cracker=0.093,repeat=0.01,forged=0.007,genuine=0.1")
        }
        guard (0...1).contains(playShare), TrafficMix(parsing: playMix) != nil else {
            throw ValidationError(
                "--play-share must be within 0...1 and --play-mix look like other_app=0.3,forged=0.45,…")
        }
        guard (0...1).contains(apple21005), appleLatencyMs >= 0 else {
            throw ValidationError("--apple-21005 must be within 0...1 and --apple-latency-ms not negative")
        }
    }

    package func run() async throws {
        let isTerminal = isatty(1) == 1
        var options = DemoOptions()
        options.jobs = jobs
        options.mix = TrafficMix(parsing: mix) ?? .seed000
        options.playShare = playShare
        options.playMix = TrafficMix(parsing: playMix) ?? .android
        options.appleLatencyMs = appleLatencyMs
        options.apple21005Ratio = apple21005
        options.workers = workers
        options.partitions = partitions
        options.appleDeadline = .seconds(appleDeadlineSeconds)
        options.ledgerURL = ledgerURL
        options.progressInterval = isTerminal ? .milliseconds(200) : .seconds(1)
        print(
            "demo: \(jobs) jobs (Google Play \(Int(playShare * 100))%), App Store mix \(options.mix), Play mix"
                + " \(options.playMix), \(workers) workers, \(partitions) partitions")
        var logger = Logger(label: "demo")
        logger.logLevel = Logger.Level(rawValue: logLevel) ?? .warning
        let entitlements = DemoEntitlements(port: consolePort, host: consoleHost)
        options.entitlements = entitlements
        let serve = self.serve
        let signals = serve ? TerminationSignals() : nil
        options.afterDecided = { bootstrap, report, running in
            if isTerminal { print("") }
            print(report.table())
            guard let running else { return }
            print("")
            print(try await DemoEntitlements.table(running, accounts: DemoEntitlements.showcase(report)))
            if let signals {
                print("")
                print("console: \(running.consoleURL)  (host \(entitlements.host))")
                print("token:   \(running.token)")
                print(
                    "API:     curl -H 'Authorization: Bearer \(running.token)' \(running.consoleURL.replacingOccurrences(of: "/console", with: ""))/v1/accounts/<account>/entitlements"
                )
                print("Ctrl-C stops the demo.")
                // Standard output may be a pipe (fully buffered): the URL and token must show now.
                fflush(nil)
                await signals.wait()
            }
        }
        let report = try await DemoRun(options: options, logger: logger).run { progress in
            if isTerminal {
                FileHandle.standardOutput.write(Data(progress.bar.utf8))
            } else {
                print(progress.line)
            }
        }
        if report.missingAndDuplicated.missing > 0 { throw ExitCode.failure }
        if let play = report.playCalls, play.followedUp < play.granted { throw ExitCode.failure }
    }
}
