import ArgumentParser
import Pipeline

/// Prints the configuration reference (the generated part of docs/CONFIGURATION.md).
struct ConfigReferenceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config-reference",
        abstract: "Print every configuration key of `run` as Markdown (docs/CONFIGURATION.md).")

    func run() {
        print(WorkerConfiguration.referenceMarkdown(), terminator: "")
    }
}
