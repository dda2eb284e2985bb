import ArgumentParser

/// `verify-worker bench …`: benchmarks that print JSON. They are not tests; docs/BENCHMARKS.md records their figures.
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Runs a benchmark and prints its figures as JSON.",
        subcommands: [
            BenchRateLimiter.self
        ]
    )
}
