import Entitlements
import Gateway
import Operations
import Reconciler
import Worker

/// The check every command that loads a configuration table makes first: a `VERIFY_…` variable that no command of
/// verify-worker reads, and that is neither documented for another purpose nor listed in `ignore_variables`, is
/// refused (``EnvironmentVariables``).
enum UnknownVariables {
    /// Every command's table: one environment often serves several commands of a deployment.
    static var tables: [ConfigurationTable] {
        [
            WorkerConfiguration.table, ReconcileConfiguration.table, GatewayConfiguration.table,
            EntitlementsConfiguration.table,
        ]
    }

    static func refuse(
        table: ConfigurationTable, arguments: [String], environment: [String: String]
    ) throws(ConfigurationError) {
        let sources = try table.loadSources(arguments: arguments, environment: environment)
        try EnvironmentVariables.refuseUnknown(
            environment, table: table, otherTables: tables,
            ignored: ConfigurationReader(sources: sources).list(EnvironmentVariables.ignoreKey.name))
    }
}
