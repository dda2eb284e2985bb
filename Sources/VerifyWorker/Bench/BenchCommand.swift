import ArgumentParser

/// `verify-worker bench …`: benchmarks that print JSON. They are measurements, not tests.
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Runs a benchmark and prints its figures as JSON.",
        subcommands: [
            BenchKafkaCommand.self
        ]
    )
}
