import ArgumentParser
import Foundation
import Receipts

/// `verify-worker bench receipts`: receipts per second on one core for each format, each fully verified at its
/// signing time, and the same inputs through the Python peers (scripts/bench/peers.py), merged with ratios.
struct BenchReceiptsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "receipts",
        abstract: "Benchmark receipt decoding and offline verification; optionally fuzz with --fuzz N."
    )

    @Option(help: "The shared fixtures directory. Default: $VERIFY_FIXTURES_DIR or ../shared/fixtures.")
    var fixtures: String?

    @Option(help: "Seconds to measure each case.")
    var seconds: Double = 2

    @Option(help: "Python interpreter with the peers installed (scripts/bench/install-peers.sh); none to skip.")
    var python: String = "python3"

    @Option(help: "Path to scripts/bench/peers.py.")
    var peersScript: String = "scripts/bench/peers.py"

    @Flag(help: "Skip the Python peers.")
    var noPeers = false

    @Option(help: "Instead of benchmarking, run N mutated inputs through the analyzer and report.")
    var fuzz: Int?

    func run() throws {
        let directory = URL(
            fileURLWithPath: fixtures ?? ProcessInfo.processInfo.environment["VERIFY_FIXTURES_DIR"]
                ?? "../shared/fixtures")
        let cases = try ReceiptBenchCase.all(in: directory)
        if let fuzz {
            try runFuzz(count: fuzz, cases: cases, directory: directory)
            return
        }
        var results: [[String: Any]] = []
        var ours: [String: Double] = [:]
        for benchCase in cases {
            let rate = try benchCase.measure(seconds: seconds)
            ours[benchCase.name] = rate
            results.append(["case": benchCase.name, "file": benchCase.file, "verify_worker_per_second": rate.rounded()])
        }
        var peers: [String: [String: Double]] = [:]
        var peerError: String?
        if !noPeers {
            do {
                peers = try runPeers(cases: cases)
            } catch {
                peerError = "\(error)"
            }
        }
        for index in results.indices {
            let name = results[index]["case"] as? String ?? ""
            var fastest = 0.0
            var perPeer: [String: Any] = [:]
            for (peer, rates) in peers.sorted(by: { $0.key < $1.key }) {
                guard let rate = rates[name] else { continue }
                perPeer[peer] = rate.rounded()
                fastest = max(fastest, rate)
            }
            results[index]["peers_per_second"] = perPeer
            if fastest > 0, let mine = ours[name] {
                results[index]["ratio_to_fastest_peer"] = (mine / fastest * 100).rounded() / 100
            }
        }
        var output: [String: Any] = [
            "benchmark": "receipts", "cores": 1, "seconds_per_case": seconds, "cases": results,
        ]
        if let peerError { output["peers_error"] = peerError }
        let data = try JSONSerialization.data(withJSONObject: output, options: [.prettyPrinted, .sortedKeys])
        print(String(decoding: data, as: UTF8.self))
    }

    private func runPeers(cases: [ReceiptBenchCase]) throws -> [String: [String: Double]] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        var arguments = [python, peersScript, "--seconds", String(seconds)]
        for benchCase in cases { arguments += ["--case", "\(benchCase.name)=\(benchCase.path)"] }
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0,
            let object = try JSONSerialization.jsonObject(with: data) as? [String: [String: Double]]
        else { throw ValidationError("peers.py failed (exit \(process.terminationStatus))") }
        return object
    }

    private func runFuzz(count: Int, cases: [ReceiptBenchCase], directory: URL) throws {
        var seeds = cases.map(\.input)
        // Binary forms too, so mutations hit the BER reader directly and not only the base64 decoder.
        for benchCase in cases where benchCase.name.contains("app_receipt") {
            if let decoded = Base64.decode(benchCase.input) { seeds.append(decoded) }
        }
        let analyzer = ReceiptBenchCase.analyzer()
        let report = ReceiptFuzzer(seeds: seeds).run(count: count, analyzer: analyzer)
        let output: [String: Any] = [
            "fuzz_inputs": report.inputs,
            "seconds": report.totalSeconds,
            "slowest_input_seconds": report.slowestSeconds,
            "formats": Dictionary(uniqueKeysWithValues: report.formatCounts.map { ($0.key.rawValue, $0.value) }),
        ]
        let data = try JSONSerialization.data(withJSONObject: output, options: [.prettyPrinted, .sortedKeys])
        print(String(decoding: data, as: UTF8.self))
    }
}

/// One benchmark case: a fixture read as a client would send it (base64 or JWS text).
struct ReceiptBenchCase {
    var name: String
    var file: String
    var path: String
    var input: [UInt8]
    /// The JWS cold case clears the chain cache before every receipt.
    var coldChainCache = false

    static let definitions: [(name: String, file: String, cold: Bool)] = [
        ("ios6_transaction_receipt", "venice/legacy_transaction_receipt_ios6.b64", false),
        ("small_app_receipt", "mbaasy/validator_receipts_unified.txt", false),
        ("app_receipt_187_purchases", "tpinappreceipt/receipt-sandbox-legacy", false),
        ("production_app_receipt", "tpinappreceipt/receipt-production", false),
        ("jws_cold_chain_cache", "go-iap/real_sandbox_signedRenewalInfo_2000000335310644.jws", true),
        ("jws_warm_chain_cache", "go-iap/real_sandbox_signedRenewalInfo_2000000335310644.jws", false),
    ]

    static func all(in directory: URL) throws -> [ReceiptBenchCase] {
        try definitions.map { definition in
            let url = directory.appendingPathComponent(definition.file)
            guard let data = FileManager.default.contents(atPath: url.path) else {
                throw ValidationError("fixture not found: \(url.path) (use --fixtures DIR)")
            }
            return ReceiptBenchCase(
                name: definition.name, file: definition.file, path: url.path, input: Array(data),
                coldChainCache: definition.cold)
        }
    }

    /// The analyzer every case uses: Apple's roots, no catalog restrictions, sandbox allowed.
    static func analyzer() -> ReceiptAnalyzer {
        ReceiptAnalyzer(trust: .apple, catalog: .any, policy: AnalysisPolicy())
    }

    /// Receipts per second on the calling thread, each fully analyzed (decode, signature, chain at signing time).
    func measure(seconds: Double) throws -> Double {
        let analyzer = Self.analyzer()
        let check = analyzer.analyze(input)
        guard check.format != .unknown, check.signature == .valid || name.contains("ios6") else {
            throw ValidationError("benchmark fixture \(file) did not verify: \(check.signature)")
        }
        let clock = ContinuousClock()
        let budget = Duration.milliseconds(Int64(seconds * 1000))
        var count = 0
        var transactions = 0
        let started = clock.now
        var elapsed = Duration.zero
        while elapsed < budget {
            for _ in 0..<16 {
                if coldChainCache { analyzer.chains.removeAllCachedChains() }
                transactions &+= analyzer.analyze(input).transactions.count  // keeps the work observable
                count += 1
            }
            elapsed = started.duration(to: clock.now)
        }
        let totalSeconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        return transactions == Int.min ? 0 : Double(count) / totalSeconds
    }
}
