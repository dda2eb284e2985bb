import ArgumentParser
import Entitlements
import Gateway
import Operations
import Reconciler
import Worker

/// Prints the configuration reference (the generated parts of docs/CONFIGURATION.md).
struct ConfigReferenceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config-reference",
        abstract:
            "Print every configuration key of `run` (or of `gateway`, `entitlements` or `reconcile`) as Markdown (docs/CONFIGURATION.md)."
    )

    @Option(help: "The command whose keys to print: run, gateway, entitlements or reconcile.")
    var command: String = "run"

    func validate() throws {
        guard ["run", "gateway", "entitlements", "reconcile"].contains(command) else {
            throw ValidationError("--command is run, gateway, entitlements or reconcile")
        }
    }

    func run() {
        switch command {
        case "entitlements":
            print(
                EntitlementsConfiguration.table.referenceMarkdown(heading: "## `verify-worker entitlements`"),
                terminator: "")
        case "reconcile":
            // Its own keys; it reads every key of `run` too.
            print(
                ReconcileConfiguration.ownTable.referenceMarkdown(heading: "## `verify-worker reconcile`"),
                terminator: "")
        case "gateway":
            print(GatewayConfiguration.table.referenceMarkdown(heading: "## `verify-worker gateway`"), terminator: "")
        default:
            print(WorkerConfiguration.referenceMarkdown(), terminator: "")
        }
    }
}
