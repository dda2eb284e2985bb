import ArgumentParser
import Foundation
import Receipts

/// `verify-worker inspect`: decode and verify one receipt offline and print what is known about it as JSON.
struct InspectCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inspect",
        abstract: "Decode one receipt or JWS (raw, base64 or JWS text), verify it offline and print JSON.",
        discussion: """
            Apple's roots (Apple Inc. Root CA, Apple Root CA - G3) are always trusted; add test roots with \
            --trust-anchor. Chains are validated at the receipt's own signing date unless --at is given.
            """
    )

    @Option(name: .customLong("trust-anchor"), help: "An extra trust anchor certificate (DER or PEM). Repeatable.")
    var trustAnchors: [String] = []

    @Flag(name: .customLong("allow-xcode"), help: "Accept Xcode StoreKit-testing receipts.")
    var allowXcode = false

    @Option(name: .customLong("at"), help: "Validate the chain at this RFC 3339 time instead of the signing date.")
    var validationTime: String?

    @Option(name: .customLong("catalog"), help: "A catalog JSON file (bundle ids and products) for the verdict.")
    var catalogPath: String?

    @Argument(help: "The receipt file, or - for standard input.")
    var file: String

    func run() throws {
        do {
            let result = try inspect()
            print(result.json)
            if let reason = result.unknownReason {
                // Still printed as JSON above (format "unknown"), but the exit status says it was no receipt.
                FileHandle.standardError.write(Data("verify-worker inspect: \(reason)\n".utf8))
                throw ExitCode(1)
            }
        } catch let failure as InspectFailure {
            FileHandle.standardError.write(Data("verify-worker inspect: \(failure.reason)\n".utf8))
            throw ExitCode(2)
        }
    }

    private func inspect() throws(InspectFailure) -> (json: String, unknownReason: String?) {
        var trust = TrustStore.apple
        for path in trustAnchors {
            do {
                trust = trust.adding(anchors: [try TrustStore.loadCertificate(contentsOf: URL(fileURLWithPath: path))])
            } catch {
                throw InspectFailure(reason: "cannot read trust anchor \(path): not a DER or PEM certificate")
            }
        }
        var time: Date?
        if let validationTime {
            guard let parsed = ReceiptDates.parseRFC3339(validationTime) else {
                throw InspectFailure(reason: "--at \(validationTime) is not an RFC 3339 date")
            }
            time = parsed
        }
        var catalog = Catalog.any
        if let catalogPath {
            guard let data = FileManager.default.contents(atPath: catalogPath),
                let loaded = try? Catalog.load(json: data)
            else { throw InspectFailure(reason: "cannot read catalog \(catalogPath)") }
            catalog = loaded
        }
        let input: Data?
        if file == "-" {
            input = FileHandle.standardInput.readDataToEndOfFile()
        } else {
            input = FileManager.default.contents(atPath: file)
        }
        guard let input else { throw InspectFailure(reason: "cannot read \(file)") }
        guard !input.isEmpty else { throw InspectFailure(reason: "\(file == "-" ? "standard input" : file) is empty") }
        let policy = AnalysisPolicy(
            allowedEnvironments: [.production, .sandbox], allowXcode: allowXcode)
        let analyzer = ReceiptAnalyzer(trust: trust, catalog: catalog, policy: policy)
        let analysis = analyzer.analyze(Array(input), at: time)
        return (analysis.jsonText(), analysis.format == .unknown ? analysis.unknownReason ?? "not a receipt" : nil)
    }
}

/// A one-line reason `inspect` prints on standard error before exiting non-zero.
struct InspectFailure: Error {
    var reason: String
}
