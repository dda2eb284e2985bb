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
    @OptionGroup var source: LedgerURLOption

    func validate() throws {
        guard (transactionID == nil) != (accountID == nil) else {
            throw ValidationError("give exactly one of --transaction and --account")
        }
        guard source.ledgerURL ?? ProcessInfo.processInfo.environment["VERIFY_LEDGER_URL"] != nil else {
            throw ValidationError("--ledger-url or VERIFY_LEDGER_URL is required")
        }
    }

    func run() async throws {
        let url = source.ledgerURL ?? ProcessInfo.processInfo.environment["VERIFY_LEDGER_URL"] ?? ""
        let subject: LedgerShow.Subject = transactionID.map { .transaction($0) } ?? .account(accountID ?? "")
        let report = try await LedgerReport.print(command: "ledger show", ledgerURL: url) { ledger in
            try await LedgerShow.report(subject, ledger: ledger)
        }
        if (report["transactions"] as? [Any])?.isEmpty ?? true { throw ExitCode(1) }
    }
}
