import ArgumentParser
import Decision
import Foundation
import Ledger
import Logging
import Messages
import Operations
import StoreHTTP
import Worker

/// `verify-worker refund-policy`: the refund policy's answers, before the worker sends them (docs/REFUNDS.md).
struct RefundPolicyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "refund-policy",
        abstract: "Check a refund policy file, or explain what it answers for one purchase.",
        subcommands: [RefundPolicyExplainCommand.self, RefundPolicyCheckCommand.self]
    )
}

/// Where the refund policy commands read their settings: each option, else the worker's environment variable.
private enum RefundPolicySettings {
    static func value(_ option: String?, _ variable: String) -> String? {
        let value = option ?? ProcessInfo.processInfo.environment[variable]
        return value?.isEmpty == true ? nil : value
    }

    /// The catalog `--catalog-file` or `VERIFY_CATALOG_FILE` names; a catalog that checks nothing when neither
    /// does (only `check` allows that). A file that cannot be read as a catalog is one line and exit status 2.
    static func catalog(_ option: String?, command: String) throws -> Catalog {
        guard let path = value(option, "VERIFY_CATALOG_FILE") else { return .any }
        let reason: String
        if let data = FileManager.default.contents(atPath: path) {
            do {
                return try Catalog.load(json: data)
            } catch {
                reason = "catalog_file: not a catalog: \(error)"
            }
        } else {
            reason = "catalog_file: cannot read \(path)"
        }
        FileHandle.standardError.write(Data("verify-worker refund-policy \(command): \(reason)\n".utf8))
        throw ExitCode(2)
    }

    /// The policy of `path`, or the policy without a file; a fault is one line and exit status 2.
    static func policy(_ path: String?, catalog: Catalog, command: String) throws -> RefundPolicy {
        guard let path else { return RefundPolicy(catalog: catalog) }
        do {
            return try RefundPolicy.load(path: path, catalog: catalog)
        } catch {
            FileHandle.standardError.write(Data("verify-worker refund-policy \(command): \(error)\n".utf8))
            throw ExitCode(2)
        }
    }
}

/// `verify-worker refund-policy explain --transaction ID`: the rule that matches a purchase and the exact body the
/// worker would send for it now.
struct RefundPolicyExplainCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "explain",
        abstract: "Print, as JSON, the facts of a purchase, the refund policy rule that matches it and the body sent.",
        discussion: """
            Read-only: nothing is written and nothing is sent. The transaction is looked up in the ledger (an App \
            Store transaction id, or a Google Play claim's id as `ledger show` prints it); its store is the claim's \
            (--store for a purchase the ledger has no claim on). Exit status: 0 when the ledger has a claim, 1 when it \
            has none (the answer for an order nobody holds is printed all the same), 2 for a bad option, a ledger that \
            cannot be read or a policy file that is refused.
            """
    )

    @Option(
        name: .customLong("transaction"), help: "A transaction id (App Store) or an order's claim id (Google Play).")
    var transactionID: String
    @OptionGroup var source: LedgerURLOption
    @Option(name: .customLong("catalog-file"), help: "The catalog (default: VERIFY_CATALOG_FILE).")
    var catalogFile: String?
    @Option(
        name: .customLong("refund-policy-file"),
        help:
            "The refund policy (default: VERIFY_REFUND_POLICY_FILE; none: the catalog's refund_preference, then data only)."
    )
    var refundPolicyFile: String?
    @Option(help: "app_store or google_play: the store of a purchase the ledger has no claim on (default: app_store).")
    var store: String?
    @Option(help: "The product of a Google Play order the ledger has no claim on.")
    var product: String?
    @Option(
        name: .customLong("customer-consented"),
        help: "true or false (default: VERIFY_CONSUMPTION_CUSTOMER_CONSENTED, else false).")
    var customerConsented: String?
    @Option(
        name: .customLong("consumption-lookup-url"),
        help: "The consumption lookup asked for a one-time product's units (default: VERIFY_CONSUMPTION_LOOKUP_URL).")
    var consumptionLookupURL: String?
    @Option(
        name: .customLong("consumption-lookup-token-file"),
        help: "The lookup's bearer token file (default: VERIFY_CONSUMPTION_LOOKUP_TOKEN_FILE).")
    var consumptionLookupTokenFile: String?
    @Option(
        name: .customLong("consumption-lookup-timeout-ms"),
        help: "The lookup's timeout, 1 to 60000 (default: VERIFY_CONSUMPTION_LOOKUP_TIMEOUT_MS, else 2000).")
    var consumptionLookupTimeout: String?

    func validate() throws {
        guard RefundPolicySettings.value(source.ledgerURL, "VERIFY_LEDGER_URL") != nil else {
            throw ValidationError("--ledger-url or VERIFY_LEDGER_URL is required")
        }
        guard RefundPolicySettings.value(catalogFile, "VERIFY_CATALOG_FILE") != nil else {
            throw ValidationError("--catalog-file or VERIFY_CATALOG_FILE is required")
        }
        if let store, Store(rawValue: store) == nil { throw ValidationError("--store is app_store or google_play") }
        if let value = RefundPolicySettings.value(customerConsented, "VERIFY_CONSUMPTION_CUSTOMER_CONSENTED"),
            !["true", "false"].contains(value)
        {
            throw ValidationError("--customer-consented is true or false")
        }
        if let value = RefundPolicySettings.value(consumptionLookupTimeout, "VERIFY_CONSUMPTION_LOOKUP_TIMEOUT_MS"),
            !(Int(value).map { (1...60_000).contains($0) } ?? false)
        {
            throw ValidationError("--consumption-lookup-timeout-ms is a whole number from 1 to 60000")
        }
    }

    /// The consumption lookup the options (or the worker's variables) name, checked as the worker checks it, with
    /// the engine it runs on (shut down by the caller); nil when none is set. A fault is one line and exit status 2.
    func consumptionLookup() throws -> (lookup: ConsumptionLookup, engine: CurlHTTPEngine)? {
        let settings: (url: String?, token: Secret?)
        do {
            settings = try WorkerConfiguration.consumptionLookup(
                url: RefundPolicySettings.value(consumptionLookupURL, "VERIFY_CONSUMPTION_LOOKUP_URL"),
                tokenFile: RefundPolicySettings.value(
                    consumptionLookupTokenFile, "VERIFY_CONSUMPTION_LOOKUP_TOKEN_FILE"),
                readFile: { try String(contentsOfFile: $0, encoding: .utf8) })
        } catch {
            FileHandle.standardError.write(Data("verify-worker refund-policy explain: \(error)\n".utf8))
            throw ExitCode(2)
        }
        guard let url = settings.url else { return nil }
        let timeout =
            RefundPolicySettings.value(consumptionLookupTimeout, "VERIFY_CONSUMPTION_LOOKUP_TIMEOUT_MS")
            .flatMap { Int($0) } ?? 2000
        // The lookup's failures are in the report (consumption_lookup); its warnings would only repeat them.
        var logger = Logger(label: "refund-policy-explain")
        logger.logLevel = .error
        let engine = try CurlHTTPEngine()
        let lookup = ConsumptionLookup(
            transport: engine,
            configuration: ConsumptionLookupConfiguration(
                url: url, token: settings.token?.value, timeout: .milliseconds(timeout)),
            logger: logger)
        return (lookup, engine)
    }

    func run() async throws {
        let catalog = try RefundPolicySettings.catalog(catalogFile, command: "explain")
        let policy = try RefundPolicySettings.policy(
            RefundPolicySettings.value(refundPolicyFile, "VERIFY_REFUND_POLICY_FILE"), catalog: catalog,
            command: "explain")
        let consented =
            RefundPolicySettings.value(customerConsented, "VERIFY_CONSUMPTION_CUSTOMER_CONSENTED") == "true"
        let url = RefundPolicySettings.value(source.ledgerURL, "VERIFY_LEDGER_URL") ?? ""
        // The lookup's answer is reported (consumption_lookup), never a reason to fail: explain is read-only.
        let consumption = try consumptionLookup()
        defer { consumption?.engine.shutdown() }
        let lookup = consumption?.lookup
        let report = try await LedgerReport.print(command: "refund-policy explain", ledgerURL: url) { ledger in
            try await RefundPolicyExplanation.explain(
                transactionID: transactionID, store: store.flatMap(Store.init(rawValue:)), productID: product,
                ledger: ledger, catalog: catalog, policy: policy, customerConsented: consented, now: Date(),
                lookup: lookup)
        }
        if report["claimed"] as? Bool == false { throw ExitCode(1) }
    }
}

/// `verify-worker refund-policy check FILE`: the start's check of a policy file, alone.
struct RefundPolicyCheckCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Check a refund policy file as the worker does at start, and list its rules in order.",
        discussion: """
            Exit status: 0 when the file is accepted (its rules are printed, one a line: name and answer, the \
            catalog's shorthand rules and the default last), 2 when it is refused (one line naming the file, the \
            rule and the field).
            """
    )

    @Argument(help: "The policy file.")
    var file: String
    @Option(
        name: .customLong("catalog-file"),
        help: "The catalog whose refund_preference fields follow the file's rules (default: VERIFY_CATALOG_FILE).")
    var catalogFile: String?

    func run() throws {
        let catalog = try RefundPolicySettings.catalog(catalogFile, command: "check")
        let policy = try RefundPolicySettings.policy(file, catalog: catalog, command: "check")
        for rule in policy.rules { print("\(rule.name)\t\(rule.answer.rawValue)") }
    }
}
