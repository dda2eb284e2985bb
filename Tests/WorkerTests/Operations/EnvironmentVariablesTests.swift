import Entitlements
import Foundation
import Gateway
import Operations
import Reconciler
import Testing
import Worker

/// A misspelt `VERIFY_…` variable is refused at start with the name it probably meant, in every command that reads
/// a configuration table; keys of the deployment's other commands, documented harness variables and the names
/// listed in `VERIFY_IGNORE_VARIABLES` are not.
@Suite("Configuration: unknown VERIFY_ environment variables")
struct EnvironmentVariablesTests {
    static let tables = [
        WorkerConfiguration.table, ReconcileConfiguration.table, GatewayConfiguration.table,
        EntitlementsConfiguration.table,
    ]

    static func problem(
        _ environment: [String: String], table: ConfigurationTable = WorkerConfiguration.table, ignored: [String] = []
    ) -> ConfigurationError? {
        do {
            try EnvironmentVariables.refuseUnknown(environment, table: table, otherTables: tables, ignored: ignored)
            return nil
        } catch {
            return error
        }
    }

    @Test(
        "a typo is refused in one line naming it and the nearest key",
        arguments: [
            ("VERIFY_ALLOW_SANBOX", "VERIFY_ALLOW_SANDBOX", "verify-worker run"),
            ("VERIFY_SHARED_SECRET_FIEL", "VERIFY_SHARED_SECRET_FILE", "verify-worker run"),
            ("VERIFY_GATEWAY_TOKEN_FILE", "VERIFY_GATEWAY_TOKENS_FILE", "verify-worker gateway"),
            ("VERIFY_ENTITLEMENTS_STORE_ULR", "VERIFY_ENTITLEMENTS_STORE_URL", "verify-worker entitlements"),
            ("VERIFY_RECONCILE_INTERVAL", "VERIFY_RECONCILE_INTERVAL_S", "verify-worker reconcile"),
        ])
    func typo(name: String, meant: String, command: String) throws {
        let table = try #require(Self.tables.first { $0.command == command })
        let error = try #require(Self.problem(["VERIFY_BROKERS": "kafka:9092", name: "true"], table: table))
        #expect(error.description == "configuration: \(name): not a setting of \(command) (did you mean \(meant)?)")
    }

    @Test("a name like no known one is refused without a guess")
    func farFromEverything() throws {
        let error = try #require(Self.problem(["VERIFY_ZZZZZZZZZZZZ": "1"]))
        #expect(error.description == "configuration: VERIFY_ZZZZZZZZZZZZ: not a setting of verify-worker run")
    }

    @Test("keys of the other commands, documented harness variables and other prefixes are accepted")
    func knownElsewhere() {
        let shared = [
            "VERIFY_GATEWAY_TOKENS_FILE": "/t", "VERIFY_ENTITLEMENTS_STORE_URL": "sqlite:x",
            "VERIFY_RECONCILE_INTERVAL_S": "60", "VERIFY_SHARED_SECRET_FILE": "/s", "VERIFY_CONFIG_FILE": "/c",
            "VERIFY_TEST_POSTGRES_URL": "postgres://x", "VERIFY_EXIT_WITH_PARENT": "1", "VERIFY_FIXTURES_DIR": "/f",
            "MALLOC_ARENA_MAX": "2", "PATH": "/bin", "VERIFYING": "x",
        ]
        for table in Self.tables {
            #expect(Self.problem(shared, table: table) == nil, "\(table.command)")
        }
    }

    @Test("VERIFY_IGNORE_VARIABLES lets another tool's variables through, and only those")
    func optOut() throws {
        let environment = ["VERIFY_AGENT_TOKEN": "x", "VERIFY_AGENT_MODE": "y"]
        #expect(Self.problem(environment, ignored: ["VERIFY_AGENT_TOKEN", "VERIFY_AGENT_MODE"]) == nil)
        #expect(Self.problem(environment, ignored: ["VERIFY_AGENT_TOKEN"])?.key == "VERIFY_AGENT_MODE")
        // Read as every key is: from the environment (or a file, or a flag).
        var sources = ConfigurationSources(table: WorkerConfiguration.table)
        sources.addEnvironment(["VERIFY_IGNORE_VARIABLES": "VERIFY_AGENT_TOKEN, VERIFY_AGENT_MODE"])
        #expect(
            ConfigurationReader(sources: sources).list(EnvironmentVariables.ignoreKey.name) == [
                "VERIFY_AGENT_TOKEN", "VERIFY_AGENT_MODE",
            ])
    }

    @Test("every VERIFY_ name the sources, scripts, docs and deployment files use is a key or a documented variable")
    func everyUsedNameIsKnown() throws {
        let known = Set(Self.tables.flatMap(EnvironmentVariables.names(of:)) + EnvironmentVariables.otherVariables)
        let pattern = try NSRegularExpression(pattern: #"VERIFY_[A-Z0-9_]*[A-Z0-9]"#)
        var unknown: Set<String> = []
        var files = try TestEnvironment.swiftFiles(under: "Sources").map(\.1)
        for folder in ["scripts", "docs"] {
            let root = TestEnvironment.packageRoot.appendingPathComponent(folder)
            for name in try FileManager.default.contentsOfDirectory(atPath: root.path)
            where name.hasSuffix(".sh") || name.hasSuffix(".md") {
                files.append(try String(contentsOf: root.appendingPathComponent(name), encoding: .utf8))
            }
        }
        for file in ["README.md", "docker-compose.yml"] {
            files.append(
                try String(contentsOf: TestEnvironment.packageRoot.appendingPathComponent(file), encoding: .utf8))
        }
        let deploy = TestEnvironment.packageRoot.appendingPathComponent("deploy")
        for case let url as URL in FileManager.default.enumerator(at: deploy, includingPropertiesForKeys: nil)
            ?? .init()
        where ["yaml", "yml", "env"].contains(url.pathExtension) {
            files.append(try String(contentsOf: url, encoding: .utf8))
        }
        for text in files {
            for match in pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                let name = String(text[Range(match.range, in: text)!])
                // Placeholders of the docs and of the secret reader's comment, and docs/CONFIGURATION.md's examples of
                // a typo and of another tool's variables, not variables.
                let examples = [
                    "VERIFY_X", "VERIFY_X_FILE", "VERIFY_KEY", "VERIFY_LEDGER", "VERIFY_METRICS", "VERIFY_ALLOW_SANBOX",
                    "VERIFY_AGENT_TOKEN", "VERIFY_AGENT_MODE",
                ]
                if examples.contains(name) { continue }
                if !known.contains(name) { unknown.insert(name) }
            }
        }
        #expect(unknown.isEmpty, "not a key nor documented: \(unknown.sorted())")
    }
}

/// The refusal as the commands print it: one line, exit 2, before anything starts.
@Suite("Configuration: unknown VERIFY_ variables stop each command", .timeLimit(.minutes(2)))
struct UnknownVariableProcessTests {
    static func expectRefused(_ outcome: CommandProcess.Outcome, command: String, _ line: String) {
        #expect(outcome.status == 2, "exit \(outcome.status): \(outcome.stderr)")
        let lines = outcome.stderr.split(separator: "\n").map(String.init)
        #expect(lines == ["verify-worker \(command): \(line)"], "stderr:\n\(outcome.stderr)")
    }

    @Test("run, reconcile, gateway and entitlements refuse a typo and name the key meant")
    func typoRefused() async throws {
        let typo = ["VERIFY_ALLOW_SANBOX": "true"]
        for command in ["run", "reconcile", "gateway", "entitlements"] {
            let port = command == "entitlements" ? "--entitlements-port" : "--metrics-port"
            let outcome = try await CommandProcess.run([command, port, "0"], environment: typo)
            Self.expectRefused(
                outcome, command: command,
                "configuration: VERIFY_ALLOW_SANBOX: not a setting of verify-worker \(command) "
                    + "(did you mean VERIFY_ALLOW_SANDBOX?)")
        }
    }

    @Test("another command's key and an ignored variable pass the check: the next problem is the one reported")
    func otherKeysPass() async throws {
        // No catalog: the command stops on that after the check, so the line names it when the check passed.
        let environment = [
            "VERIFY_GATEWAY_TOKENS_FILE": "/nonexistent", "VERIFY_AGENT_TOKEN": "x",
            "VERIFY_IGNORE_VARIABLES": "VERIFY_AGENT_TOKEN", "VERIFY_CATALOG_FILE": "",
        ]
        let outcome = try await CommandProcess.run(["run", "--metrics-port", "0"], environment: environment)
        #expect(outcome.status == 2, "exit \(outcome.status): \(outcome.stderr)")
        #expect(outcome.stderr.hasPrefix("verify-worker run: configuration: catalog_file: "), "\(outcome.stderr)")
        // Without the opt-out, the same variable is what stops it.
        var refused = environment
        refused["VERIFY_IGNORE_VARIABLES"] = nil
        let again = try await CommandProcess.run(["run", "--metrics-port", "0"], environment: refused)
        #expect(again.stderr.hasPrefix("verify-worker run: configuration: VERIFY_AGENT_TOKEN: "), "\(again.stderr)")
    }
}
