import ArgumentParser

/// `verify-worker bench …`: benchmarks that print JSON (not tests; figures go to docs/BENCHMARKS.md).
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Benchmarks of the worker's parts, printed as JSON.",
        subcommands: [
            BenchLedgerCommand.self
        ]
    )
}
