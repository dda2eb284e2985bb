import ArgumentParser

/// `verify-worker bench …`: benchmarks that print JSON. They are not tests; CI does not run them.
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Benchmarks that print JSON.",
        subcommands: [
            BenchReceiptsCommand.self
        ]
    )
}
