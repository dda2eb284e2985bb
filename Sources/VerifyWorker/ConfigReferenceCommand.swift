import ArgumentParser
import Entitlements
import Operations
import Pipeline

/// Prints the configuration reference (the generated parts of docs/CONFIGURATION.md).
struct ConfigReferenceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config-reference",
        abstract: "Print every configuration key of `run` (or of `entitlements`) as Markdown (docs/CONFIGURATION.md).")

    @Option(help: "The command whose keys to print: run or entitlements.")
    var command: String = "run"

    func validate() throws {
        guard ["run", "entitlements"].contains(command) else {
            throw ValidationError("--command is run or entitlements")
        }
    }

    func run() {
        switch command {
        case "entitlements":
            print(
                EntitlementsConfiguration.table.referenceMarkdown(heading: "## `verify-worker entitlements`"),
                terminator: "")
        default:
            print(WorkerConfiguration.referenceMarkdown(), terminator: "")
        }
    }
}
