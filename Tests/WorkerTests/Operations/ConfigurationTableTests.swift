import Foundation
import Operations
import Testing

/// The generic key table every long-running command reads its configuration through.
@Suite("Configuration table")
struct ConfigurationTableTests {
    static let table = ConfigurationTable(
        command: "verify-worker example",
        keys: [
            .init("port", default: "8090", "HTTP port."),
            .init("store_url", required: true, "Where the state lives."),
            .init("webhook_secret", secret: true, "HMAC key."),
        ])

    @Test("a table of its own parses its flags and names its command in errors and help")
    func ownKeys() throws {
        let sources = try Self.table.loadSources(
            arguments: ["--port", "9000", "--store-url=sqlite:x"], environment: ["VERIFY_WEBHOOK_SECRET": "k"])
        let reader = ConfigurationReader(sources: sources)
        #expect(try reader.int("port", in: 1...65535) == 9000)
        #expect(try reader.string("store_url") == "sqlite:x")
        #expect(try reader.secret("webhook_secret") == "k")
        #expect {
            _ = try Self.table.loadSources(arguments: ["--brokers", "x"], environment: [:])
        } throws: { error in
            (error as? ConfigurationError)?.problem.contains("verify-worker example --help") == true
        }
        #expect(Self.table.flagsHelp().contains("--store-url <value>"))
        #expect(Self.table.flagsHelp().contains("(secret: VERIFY_WEBHOOK_SECRET or VERIFY_WEBHOOK_SECRET_FILE)"))
        let markdown = Self.table.referenceMarkdown(heading: "## Example")
        #expect(markdown.hasPrefix("## Example\n\n`verify-worker example` reads"))
        #expect(
            markdown.contains(
                "| `store_url` | `VERIFY_STORE_URL` | `--store-url` | required | Where the state lives. |"))
    }

    @Test("defaults come from the table; another table's keys are unknown")
    func defaultsAndUnknownKeys() throws {
        let reader = ConfigurationReader(sources: ConfigurationSources(table: Self.table))
        #expect(try reader.int("port", in: 1...65535) == 8090)
        #expect(reader.raw("store_url") == nil)
        var sources = ConfigurationSources(table: Self.table)
        #expect(throws: ConfigurationError.self) { try sources.addFile(contents: "VERIFY_BROKERS=x", path: "f") }
        #expect(throws: ConfigurationError.self) { try sources.addFile(contents: "VERIFY_WEBHOOK_SECRET=k", path: "f") }
        try sources.addFile(contents: "VERIFY_WEBHOOK_SECRET_FILE=/run/k", path: "f")
        #expect(sources.values["webhook_secret_file"] == "/run/k")
    }
}
