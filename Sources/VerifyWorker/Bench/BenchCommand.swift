import ArgumentParser

/// `verify-worker bench …`: benchmarks that print JSON. Their figures, with the commands that made them, are in
/// docs/BENCHMARKS.md. Benchmarks are not tests: run them on a quiet machine and compare side by side.
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Run a benchmark and print its figures as JSON.",
        subcommands: [
            BenchKafkaCommand.self,
            BenchRateLimiter.self,
            BenchAppleCommand.self,
            BenchReceiptsCommand.self,
            BenchLedgerCommand.self,
            BenchPipelineCommand.self,
            BenchReplayStormCommand.self,
            BenchEntitlementsCommand.self,
            BenchReconcileCommand.self,
        ]
    )
}
