import ArgumentParser
import Foundation
import Ledger

/// How the read-only commands (`ledger show`, `refund-policy explain`) use the ledger: open it without migrating, make
/// the report while the ledger runs, print the report as pretty JSON with sorted keys. A ledger that cannot be opened
/// or read ends the command with exit status 2 and one line on standard error that names the command.
enum LedgerReport {
    /// Prints and returns the report `make` reads from the ledger at `url`; `command` names the command in an error.
    static func print(
        command: String, ledgerURL url: String, _ make: (any Ledger) async throws -> [String: Any]
    ) async throws -> [String: Any] {
        let report: [String: Any]
        do {
            let ledger = try LedgerFactory.make(url: url)
            report = try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await ledger.run() }
                defer { group.cancelAll() }
                return try await make(ledger)
            }
        } catch {
            FileHandle.standardError.write(Data("verify-worker \(command): \(error)\n".utf8))
            throw ExitCode(2)
        }
        let data = try JSONSerialization.data(withJSONObject: report, options: [.prettyPrinted, .sortedKeys])
        Swift.print(String(decoding: data, as: UTF8.self))
        return report
    }
}

/// `--ledger-url`, of the commands that read the ledger.
struct LedgerURLOption: ParsableArguments {
    @Option(name: .customLong("ledger-url"), help: "postgres://… or sqlite:PATH (default: VERIFY_LEDGER_URL).")
    var ledgerURL: String?
}
