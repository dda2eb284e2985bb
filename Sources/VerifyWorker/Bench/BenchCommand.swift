import ArgumentParser

/// `verify-worker bench …`: benchmarks that print JSON. They measure; they are not tests.
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Benchmarks of the worker's parts, printing JSON.",
        subcommands: [
            BenchAppleCommand.self
        ]
    )
}
