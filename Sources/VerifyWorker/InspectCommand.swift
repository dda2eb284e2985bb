import ArgumentParser
import Decision
import Foundation
import Messages
import Receipts

/// `verify-worker inspect`: decode and verify one receipt offline and print what is known about it as JSON.
struct InspectCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inspect",
        abstract: "Decode one receipt or JWS (raw, base64 or JWS text), verify it offline and print JSON.",
        discussion: """
            Apple's roots (Apple Inc. Root CA, Apple Root CA - G3) are always trusted; add test roots with \
            --trust-anchor (a PEM file may hold several). Chains are validated at the receipt's own signing date \
            unless --at is given. Exit status: 0 when the input decodes and its signature is valid (or not checked: \
            another app's receipt, an allowed Xcode receipt), 1 when it is no receipt or its signature or chain does \
            not verify (the JSON is printed all the same), 2 for a bad option or an unreadable file.
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
            if let reason = result.failure {
                // Still printed as JSON above, but the exit status says it was no receipt or is not authentic.
                FileHandle.standardError.write(Data("verify-worker inspect: \(reason)\n".utf8))
                throw ExitCode(1)
            }
        } catch let failure as InspectFailure {
            FileHandle.standardError.write(Data("verify-worker inspect: \(failure.reason)\n".utf8))
            throw ExitCode(2)
        }
    }

    /// The JSON of the analysis, and why the exit status is 1 (no receipt, or a signature that does not verify).
    private func inspect() throws(InspectFailure) -> (json: String, failure: String?) {
        var trust = TrustStore.apple
        for path in trustAnchors {
            do {
                trust = trust.adding(anchors: try TrustStore.loadCertificates(contentsOf: URL(fileURLWithPath: path)))
            } catch {
                throw InspectFailure(reason: "cannot read trust anchor \(path): not a DER or PEM certificate")
            }
        }
        var time: Date?
        if let validationTime {
            guard let parsed = RFC3339.parse(validationTime) else {
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
        let judging = ProofPolicy(
            catalog: catalog, allowedEnvironments: [.production, .sandbox], allowXcode: allowXcode)
        let analyzer = ReceiptAnalyzer(
            trust: trust, policy: AnalysisPolicy(allowXcode: allowXcode),
            isWorthVerifying: judging.isWorthVerifying(bundleID:))
        let analysis = analyzer.analyze(Array(input), at: time)
        let json = analysis.jsonText(adding: ["verdict": Self.jsonObject(judging.judge(analysis.facts), of: analysis)])
        if analysis.format == .unknown { return (json, analysis.unknownReason ?? "not a receipt") }
        switch analysis.signature {
        case .invalid(let reason), .untrusted(let reason):
            return (json, "signature \(analysis.signature.code): \(reason)")
        case .valid, .notChecked:
            return (json, nil)
        }
    }

    /// The judgement as `inspect` prints it under `verdict`: its code and what it names.
    static func jsonObject(_ judgement: ProofJudgement, of analysis: ReceiptAnalysis) -> [String: any Sendable] {
        var object: [String: any Sendable] = ["code": judgement.code]
        switch judgement {
        case .malformed(let reason), .notAuthenticated(let reason), .needsApple(let reason):
            object["reason"] = reason
        case .wrongBundle(let bundle): object["bundle_id"] = bundle
        case .unknownProduct(let products): object["product_ids"] = products
        case .productMismatch(let product): object["product_id"] = product
        case .environmentNotAllowed(let environment):
            object["environment"] = environment?.rawValue ?? analysis.unrecognizedEnvironment
        case .locallyVerified: break
        }
        return object
    }
}

/// A one-line reason `inspect` prints on standard error before exiting non-zero.
struct InspectFailure: Error {
    var reason: String
}
