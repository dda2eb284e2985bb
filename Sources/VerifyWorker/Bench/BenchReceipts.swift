import ArgumentParser
import Foundation
import Messages
import Receipts
import Traffic

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

    @Option(name: .customLong("case"), help: "Run only this case (repeatable); default: every case.")
    var onlyCases: [String] = []

    @Option(help: "Instead of benchmarking, run N mutated inputs through the analyzer and report.")
    var fuzz: Int?

    func run() throws {
        let directory = URL(
            fileURLWithPath: fixtures ?? ProcessInfo.processInfo.environment["VERIFY_FIXTURES_DIR"]
                ?? "../shared/fixtures")
        var cases = try ReceiptBenchCase.all(in: directory)
        if !onlyCases.isEmpty {
            cases = cases.filter { onlyCases.contains($0.name) }
            guard !cases.isEmpty else {
                throw ValidationError(
                    "no such case; cases: \(ReceiptBenchCase.definitions.map(\.name).joined(separator: ", "))")
            }
        }
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
        var breakdown: [String: Any] = [:]
        if let jws = cases.first(where: { $0.name.contains("jws") }) {
            breakdown["jws"] = ReceiptCostBreakdown.jws(jws.input, seconds: 0.25)
        }
        if let large = cases.first(where: { $0.name == "app_receipt_187_purchases" }) {
            breakdown["app_receipt_187_purchases"] = ReceiptCostBreakdown.appReceipt(large.input, seconds: 0.25)
        }
        var output: [String: Any] = [
            "benchmark": "receipts", "cores": 1, "seconds_per_case": seconds, "cases": results,
            "cost_breakdown_microseconds": breakdown,
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
        var files = Set<String>()
        var seeds = cases.filter { files.insert($0.file).inserted }.map(\.input)
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
    /// What each receipt of a case costs.
    enum Mode {
        /// Decode, parse, signature and chain at signing time; the chain cache keeps what it learnt.
        case verified
        /// Decode and full parse, no signature (the iOS 6 peer runs a regex and verifies nothing either).
        case parseOnly
        /// The chain cache is emptied before every receipt but verified intermediates are kept: a leaf never
        /// seen before under a known Apple intermediate.
        case coldLeaf
        /// Every cache is emptied before every receipt: root, intermediate and leaf checked from scratch.
        case fullyCold
    }

    var name: String
    var file: String
    var path: String
    var input: [UInt8]
    var mode: Mode

    static let jwsFixture = "go-iap/real_sandbox_signedRenewalInfo_2000000335310644.jws"
    static let definitions: [(name: String, file: String, mode: Mode)] = [
        ("ios6_transaction_receipt", "venice/legacy_transaction_receipt_ios6.b64", .verified),
        ("ios6_transaction_receipt_parse_only", "venice/legacy_transaction_receipt_ios6.b64", .parseOnly),
        ("small_app_receipt", "mbaasy/validator_receipts_unified.txt", .verified),
        ("app_receipt_187_purchases", "tpinappreceipt/receipt-sandbox-legacy", .verified),
        ("production_app_receipt", "tpinappreceipt/receipt-production", .verified),
        ("jws_fully_cold", jwsFixture, .fullyCold),
        ("jws_cold_leaf", jwsFixture, .coldLeaf),
        ("jws_warm_chain_cache", jwsFixture, .verified),
    ]

    static func all(in directory: URL) throws -> [ReceiptBenchCase] {
        try definitions.map { definition in
            let url = directory.appendingPathComponent(definition.file)
            guard let data = FileManager.default.contents(atPath: url.path) else {
                throw ValidationError("fixture not found: \(url.path) (use --fixtures DIR)")
            }
            return ReceiptBenchCase(
                name: definition.name, file: definition.file, path: url.path, input: Array(data),
                mode: definition.mode)
        }
    }

    /// The analyzer every case uses: Apple's roots, no catalog restrictions, sandbox allowed.
    static func analyzer() -> ReceiptAnalyzer {
        ReceiptAnalyzer(trust: .apple, catalog: .any, policy: AnalysisPolicy())
    }

    /// Receipts per second on the calling thread, each analyzed as the case's mode says.
    func measure(seconds: Double) throws -> Double {
        let analyzer = Self.analyzer()
        let check = analyzer.analyze(input)
        // iOS 6 receipts are signed by a CA that is not shipped, so they stay `untrusted` (signature checked).
        guard check.format != .unknown, check.signature == .valid || name.contains("ios6") else {
            throw ValidationError("benchmark fixture \(file) did not verify: \(check.signature)")
        }
        let parseOnly = mode == .parseOnly
        let clock = ContinuousClock()
        let budget = Duration.milliseconds(Int64(seconds * 1000))
        var count = 0
        var transactions = 0
        let started = clock.now
        var elapsed = Duration.zero
        while elapsed < budget {
            for _ in 0..<16 {
                switch mode {
                case .verified, .parseOnly: break
                case .coldLeaf: analyzer.chains.removeCachedLeafChains()
                case .fullyCold: analyzer.chains.removeAllCachedChains()
                }
                let analysis = parseOnly ? analyzer.analyzeWithoutVerifying(input) : analyzer.analyze(input)
                transactions &+= analysis.transactions.count  // keeps the work observable
                count += 1
            }
            elapsed = started.duration(to: clock.now)
        }
        let totalSeconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        return transactions == Int.min ? 0 : Double(count) / totalSeconds
    }
}
