import Entitlements
import Gateway
import Operations
import Reconciler
import Testing
import Worker

/// Every long-running command reads its drain timeout under one spelling, `drain_timeout_s`; the gateway's former
/// `gateway_drain_timeout_s` keeps working as a documented alias.
@Suite("Configuration: one drain key for every command")
struct DrainKeyTests {
    static func gateway(
        _ arguments: [String] = [], environment: [String: String] = [:], file: String? = nil
    ) throws(ConfigurationError) -> GatewayConfiguration {
        var environment = environment
        if file != nil { environment["VERIFY_CONFIG_FILE"] = "/etc/verify/gateway.env" }
        return try GatewayConfiguration.load(
            arguments: ["--tokens-file", "/run/tokens"] + arguments, environment: environment,
            readFile: { _ in file ?? "" })
    }

    @Test("run, reconcile, gateway and entitlements each read drain_timeout_s from --drain-timeout-s and its variable")
    func oneSpelling() {
        for table in [
            WorkerConfiguration.table, ReconcileConfiguration.table, GatewayConfiguration.table,
            EntitlementsConfiguration.table,
        ] {
            let key = table.key(named: "drain_timeout_s")
            #expect(key?.flagName == "--drain-timeout-s", "\(table.command)")
            #expect(key?.environmentName == "VERIFY_DRAIN_TIMEOUT_S", "\(table.command)")
        }
    }

    @Test("the gateway reads both spellings; its own wins in one source, a later source wins over it")
    func gatewayAlias() throws {
        #expect(try Self.gateway().drainTimeoutSeconds == 25)
        #expect(try Self.gateway(environment: ["VERIFY_DRAIN_TIMEOUT_S": "8"]).drainTimeoutSeconds == 8)
        #expect(try Self.gateway(environment: ["VERIFY_GATEWAY_DRAIN_TIMEOUT_S": "7"]).drainTimeoutSeconds == 7)
        let both = ["VERIFY_DRAIN_TIMEOUT_S": "8", "VERIFY_GATEWAY_DRAIN_TIMEOUT_S": "7"]
        #expect(try Self.gateway(environment: both).drainTimeoutSeconds == 7)
        #expect(try Self.gateway(file: "VERIFY_GATEWAY_DRAIN_TIMEOUT_S=3\n").drainTimeoutSeconds == 3)
        #expect(
            try Self.gateway(file: "VERIFY_GATEWAY_DRAIN_TIMEOUT_S=3\nVERIFY_DRAIN_TIMEOUT_S=4\n").drainTimeoutSeconds
                == 3)
        #expect(
            try Self.gateway(environment: ["VERIFY_DRAIN_TIMEOUT_S": "9"], file: "VERIFY_GATEWAY_DRAIN_TIMEOUT_S=3\n")
                .drainTimeoutSeconds == 9)
        #expect(
            try Self.gateway(["--drain-timeout-s", "2"], environment: both).drainTimeoutSeconds == 2)
    }

    @Test("a bad value names the spelling it was given under")
    func errorsNameTheSpelling() {
        let alias = #expect(throws: ConfigurationError.self) {
            try Self.gateway(environment: ["VERIFY_GATEWAY_DRAIN_TIMEOUT_S": "3601"])
        }
        #expect(alias?.key == "gateway_drain_timeout_s")
        let canonical = #expect(throws: ConfigurationError.self) {
            try Self.gateway(environment: ["VERIFY_DRAIN_TIMEOUT_S": "x"])
        }
        #expect(canonical?.key == "drain_timeout_s")
    }

    @Test("the alias is a known variable, listed in --help and the reference")
    func aliasDocumented() throws {
        try EnvironmentVariables.refuseUnknown(
            ["VERIFY_GATEWAY_DRAIN_TIMEOUT_S": "5", "VERIFY_DRAIN_TIMEOUT_S": "5"], table: GatewayConfiguration.table,
            otherTables: [], ignored: [])
        #expect(
            GatewayConfiguration.table.flagsHelp().contains("VERIFY_DRAIN_TIMEOUT_S or VERIFY_GATEWAY_DRAIN_TIMEOUT_S"))
        #expect(
            GatewayConfiguration.table.referenceMarkdown(heading: "#").contains(
                "| `drain_timeout_s`, `gateway_drain_timeout_s` (alias) |"))
    }
}
