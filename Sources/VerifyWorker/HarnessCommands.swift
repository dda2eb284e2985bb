import ArgumentParser
import Benchmarks
import Chaos
import Demo
import Traffic

/// A harness command (`demo`, `chaos`, a `bench` subcommand): its options and logic live in the harness targets;
/// here it only takes its name and runs them.
struct HarnessCommand<Arguments: HarnessArguments>: AsyncParsableCommand {
    static var configuration: CommandConfiguration { Arguments.commandConfiguration }
    @OptionGroup var arguments: Arguments
    func run() async throws { try await arguments.run() }
}

/// `verify-worker demo`: a worker cluster against the simulator, with its verdict table.
typealias DemoCommand = HarnessCommand<DemoArguments>

/// `verify-worker chaos`: the multi-process chaos harness (docs/RELIABILITY.md).
typealias ChaosCommand = HarnessCommand<ChaosArguments>

/// `verify-worker bench …`: benchmarks that print JSON. Their figures, with the commands that made them, are in
/// docs/BENCHMARKS.md. Benchmarks are not tests: run them on a quiet machine and compare side by side.
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Run a benchmark and print its figures as JSON.",
        subcommands: [
            HarnessCommand<BenchKafkaArguments>.self,
            HarnessCommand<BenchRateLimiterArguments>.self,
            HarnessCommand<BenchAppleArguments>.self,
            HarnessCommand<BenchReceiptsArguments>.self,
            HarnessCommand<BenchLedgerArguments>.self,
            HarnessCommand<BenchPipelineArguments>.self,
            HarnessCommand<BenchReplayStormArguments>.self,
            HarnessCommand<BenchEntitlementsArguments>.self,
            HarnessCommand<BenchReconcileArguments>.self,
            HarnessCommand<BenchReconcilePlayArguments>.self,
            HarnessCommand<BenchNotificationsArguments>.self,
            HarnessCommand<BenchPlayArguments>.self,
            HarnessCommand<BenchRtdnArguments>.self,
        ]
    )
}
