import ArgumentParser

/// The options of a harness command (`demo`, `chaos`, each `bench` subcommand), which live in the harness target
/// that runs them; the executable wraps each in one generic command (`HarnessCommand`), so it holds no harness logic
/// and tests parse the options without it.
package protocol HarnessArguments: ParsableArguments {
    /// The command's name, abstract and discussion.
    static var commandConfiguration: CommandConfiguration { get }
    /// Runs the command.
    func run() async throws
}
