import Foundation
import Gateway
import Operations
import Testing

/// `verify-worker gateway` reads the same kind of key table as `run` and `entitlements`: its flags (the
/// same short names as before), `VERIFY_…` variables and config-file lines, its `--help` and its section of
/// docs/CONFIGURATION.md all come from ``GatewayConfiguration/keys``.
@Suite("Gateway: configuration through the key table")
struct GatewayConfigurationTableTests {
    static let tokens = ["--tokens-file", "/run/tokens"]

    static func load(
        _ arguments: [String], environment: [String: String] = [:], file: String? = nil
    ) throws(ConfigurationError) -> GatewayConfiguration {
        var environment = environment
        if file != nil { environment["VERIFY_CONFIG_FILE"] = "/etc/verify/gateway.env" }
        return try GatewayConfiguration.load(
            arguments: arguments, environment: environment, readFile: { _ in file ?? "" })
    }

    @Test("the defaults are the documented ones, and every flag of before still sets its key")
    func flags() throws {
        let defaults = try Self.load(Self.tokens)
        let expected = GatewayConfiguration(tokensFile: "/run/tokens")
        #expect(defaults.host == expected.host && defaults.port == expected.port)
        #expect(defaults.brokers == expected.brokers && defaults.jobsTopic == expected.jobsTopic)
        #expect(defaults.maximumBodyBytes == expected.maximumBodyBytes)
        #expect(defaults.publishTimeoutMilliseconds == expected.publishTimeoutMilliseconds)
        #expect(defaults.notificationAccountID == expected.notificationAccountID)
        #expect(defaults.drainTimeoutSeconds == expected.drainTimeoutSeconds)
        #expect(defaults.operations.port == 9464 && defaults.authentication == .tokens)

        let given = try Self.load([
            "--host", "127.0.0.1", "--port", "0", "--brokers", "k1:9092,k2:9092", "--jobs-topic", "jobs",
            "--metrics-host", "127.0.0.2", "--metrics-port", "9999", "--max-message-bytes", "2048",
            "--publish-timeout-ms", "500", "--notification-account", "notes", "--drain-timeout-s", "3",
            "--kafka-properties", "linger.ms=7;acks=all", "--auth=disabled", "--trust-anchors", "/a.pem, /b.der",
            "--log-level", "debug", "--log-format", "text",
        ])
        #expect(given.host == "127.0.0.1" && given.port == 0 && given.brokers == "k1:9092,k2:9092")
        #expect(given.jobsTopic == "jobs" && given.maximumBodyBytes == 2048 && given.publishTimeoutMilliseconds == 500)
        #expect(given.operations.host == "127.0.0.2" && given.operations.port == 9999)
        #expect(given.notificationAccountID == "notes" && given.drainTimeoutSeconds == 3)
        #expect(given.kafkaProperties == ["linger.ms": "7", "acks": "all"])
        #expect(given.authentication == .disabled && given.tokensFile == nil)
        #expect(given.trustAnchorFiles == ["/a.pem", "/b.der"])
    }

    @Test("a file, the environment and flags, in that precedence")
    func precedence() throws {
        let file = "VERIFY_GATEWAY_PORT=1001\nVERIFY_JOBS_TOPIC=from-file\nVERIFY_GATEWAY_TOKENS_FILE=/file/tokens\n"
        let fromFile = try Self.load([], file: file)
        #expect(fromFile.port == 1001 && fromFile.jobsTopic == "from-file" && fromFile.tokensFile == "/file/tokens")
        let fromEnvironment = try Self.load([], environment: ["VERIFY_GATEWAY_PORT": "1002"], file: file)
        #expect(fromEnvironment.port == 1002 && fromEnvironment.jobsTopic == "from-file")
        let fromFlag = try Self.load(["--port", "1003"], environment: ["VERIFY_GATEWAY_PORT": "1002"], file: file)
        #expect(fromFlag.port == 1003)
    }

    @Test(
        "each setting wrong in turn: one error naming its key",
        arguments: [
            (["--port", "65536"], "gateway_port"), (["--port", "x"], "gateway_port"),
            (["--metrics-port", "-1"], "metrics_port"), (["--brokers", " "], "brokers"),
            (["--jobs-topic", ""], "jobs_topic"), (["--max-message-bytes", "0"], "max_message_bytes"),
            (["--max-message-bytes", "67108865"], "max_message_bytes"),
            (["--publish-timeout-ms", "0"], "gateway_publish_timeout_ms"),
            (["--publish-timeout-ms", "600001"], "gateway_publish_timeout_ms"),
            (["--notification-account", String(repeating: "a", count: 257)], "gateway_notification_account"),
            (["--drain-timeout-s", "3601"], "drain_timeout_s"), (["--auth", "maybe"], "gateway_auth"),
            (["--kafka-properties", "novalue"], "kafka_properties"), (["--log-level", "loud"], "log_level"),
            (["--log-format", "xml"], "log_format"), (["--colour", "red"], "--colour"), (["--port"], "gateway_port"),
        ])
    func wrong(arguments: [String], key: String) throws {
        let error = #expect(throws: ConfigurationError.self) {
            let sources = try GatewayConfiguration.table.loadSources(
                arguments: Self.tokens + arguments, environment: [:])
            _ = try GatewayConfiguration(sources)
            _ = try GatewayConfiguration.logSettings(sources)
        }
        #expect(error?.key == key, "\(String(describing: error))")
    }

    @Test("no tokens file with tokens on: the error names gateway_tokens_file")
    func tokensRequired() throws {
        let error = #expect(throws: ConfigurationError.self) { try Self.load([]) }
        #expect(error?.key == "gateway_tokens_file")
        #expect(try Self.load(["--auth", "disabled"]).tokensFile == nil)
    }

    @Test("docs/CONFIGURATION.md carries the gateway section generated from its key table; --help lists each flag")
    func reference() throws {
        let url = TestEnvironment.packageRoot.appendingPathComponent("docs/CONFIGURATION.md")
        let onDisk = try String(contentsOf: url, encoding: .utf8)
        let section = GatewayConfiguration.table.referenceMarkdown(heading: "## `verify-worker gateway`")
        #expect(onDisk.contains(section), "regenerate with `verify-worker config-reference --command gateway`")
        let help = GatewayConfiguration.table.flagsHelp()
        for flag in ["--port", "--host", "--auth", "--tokens-file", "--publish-timeout-ms", "--metrics-port"] {
            #expect(help.contains("  \(flag) <value>"), "\(flag) missing from --help")
        }
    }
}
