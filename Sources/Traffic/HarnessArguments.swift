import ArgumentParser
import Foundation

/// The options of a harness command (`demo`, `chaos`, each `bench` subcommand), which live in the harness target
/// that runs them; the executable wraps each in one generic command (`HarnessCommand`), so it holds no harness logic
/// and tests parse the options without it.
package protocol HarnessArguments: ParsableArguments {
    /// The command's name, abstract and discussion.
    static var commandConfiguration: CommandConfiguration { get }
    /// Runs the command.
    func run() async throws
}

extension HarnessArguments {
    /// Prints what the command measured: one JSON document, pretty, keys sorted (converted from the Swift names to
    /// snake case when `snakeCaseKeys`), and a newline.
    package func printJSON(_ value: some Encodable, snakeCaseKeys: Bool = false) throws {
        let encoder = JSONEncoder()
        if snakeCaseKeys { encoder.keyEncodingStrategy = .convertToSnakeCase }
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        FileHandle.standardOutput.write(try encoder.encode(value) + Data("\n".utf8))
    }
}
