import ArgumentParser
import Foundation
import Ledger

/// `verify-worker ledger`: operators' read-only views of the ledger.
struct LedgerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger",
        abstract: "Read-only views of the ledger (PostgreSQL or SQLite).",
        subcommands: [LedgerShowCommand.self]
    )
}

/// `verify-worker ledger show --transaction ID | --account ID`: JSON of what the ledger holds.
struct LedgerShowCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Print a transaction's or an account's transactions as JSON: owner, state, dates, verdicts.",
        discussion: """
            Read-only: nothing is written and the schema is not migrated. --transaction also accepts an original \
            transaction id (every transaction of the subscription). Exit status: 0 when something was found, 1 when \
            nothing was (the JSON is printed all the same), 2 for a bad option or a ledger that cannot be read.
            """
    )

    @Option(name: .customLong("transaction"), help: "A transaction id or an original transaction id.")
    var transactionID: String?
    @Option(name: .customLong("account"), help: "An account id.")
    var accountID: String?
    @Option(
        name: .customLong("ledger-url"),
        help: "postgres://… or sqlite:PATH (default: VERIFY_LEDGER_URL).")
    var ledgerURL: String?

    func validate() throws {
        guard (transactionID == nil) != (accountID == nil) else {
            throw ValidationError("give exactly one of --transaction and --account")
        }
        guard ledgerURL ?? ProcessInfo.processInfo.environment["VERIFY_LEDGER_URL"] != nil else {
            throw ValidationError("--ledger-url or VERIFY_LEDGER_URL is required")
        }
    }

    func run() async throws {
        let url = ledgerURL ?? ProcessInfo.processInfo.environment["VERIFY_LEDGER_URL"] ?? ""
        let subject: LedgerShow.Subject = transactionID.map { .transaction($0) } ?? .account(accountID ?? "")
        let report: [String: Any]
        do {
            let ledger = try LedgerFactory.make(url: url)
            report = try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await ledger.run() }
                defer { group.cancelAll() }
                return try await LedgerShow.report(subject, ledger: ledger)
            }
        } catch {
            FileHandle.standardError.write(Data("verify-worker ledger show: \(error)\n".utf8))
            throw ExitCode(2)
        }
        let data = try JSONSerialization.data(withJSONObject: report, options: [.prettyPrinted, .sortedKeys])
        print(String(decoding: data, as: UTF8.self))
        if (report["transactions"] as? [Any])?.isEmpty ?? true { throw ExitCode(1) }
    }
}
