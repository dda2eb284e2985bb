import ArgumentParser
import Operations

/// The `verify-worker` command. Every subcommand is thin: the logic lives in the library targets.
@main
struct VerifyWorkerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify-worker",
        abstract: "Verifies Apple in-app purchase receipts from Kafka jobs and publishes verdicts.",
        subcommands: [
            // Subcommands are registered here, one line each, in the order a newcomer meets them.
            DemoCommand.self,
            RunCommand.self,
            ReconcileCommand.self,
            DevBrokerCommand.self,
            AppleSimCommand.self,
            PlaySimCommand.self,
            InspectCommand.self,
            ConfigReferenceCommand.self,
            GatewayCommand.self,
            EntitlementsCommand.self,
            SubmitCommand.self,
            TailCommand.self,
            HealthcheckCommand.self,
            LedgerCommand.self,
            RefundPolicyCommand.self,
            ChaosCommand.self,
            BenchCommand.self,
        ]
    )

    /// Every subcommand first starts the parent watch when it was started as another process's child
    /// (`VERIFY_EXIT_WITH_PARENT`), so it never outlives a crashed test run, bench or chaos harness.
    static func main() async {
        ParentWatch.startIfRequested()
        await main(nil)
    }
}
