import Foundation
import Messages
import Receipts
import Traffic

/// `verify-worker bench receipts`: receipts per second on one core for each format, each fully verified at its
/// signing time, and the same inputs through the Python peers (scripts/bench/peers.py), merged with ratios.
package struct ReceiptsBenchmark: Sendable {
    /// The shared fixtures directory.
    package var fixtures: URL
    /// Seconds to measure each case.
    package var seconds: Double
    /// Python interpreter with the peers installed.
    package var python: String
    /// Path to scripts/bench/peers.py.
    package var peersScript: String
    package var runsPeers: Bool
    /// Only these cases; empty: every case.
    package var onlyCases: [String]
    /// Instead of benchmarking, run this many mutated inputs through the analyzer.
    package var fuzz: Int?

    /// Measures every case (or the selected ones) and the peers; returns the report as JSON text.
    package func run() async throws -> String {
        var cases = try ReceiptBenchCase.all(in: fixtures)
        if !onlyCases.isEmpty {
            cases = cases.filter { onlyCases.contains($0.name) }
            guard !cases.isEmpty else {
                throw ReceiptsBenchmarkError(
                    "no such case; cases: \(ReceiptBenchCase.definitions.map(\.name).joined(separator: ", "))")
            }
        }
        if let fuzz { return try runFuzz(count: fuzz, cases: cases) }
        var results: [[String: Any]] = []
        var ours: [String: Double] = [:]
        for benchCase in cases {
            let rate = try benchCase.measure(seconds: seconds)
            ours[benchCase.name] = rate
            results.append(["case": benchCase.name, "file": benchCase.file, "verify_worker_per_second": rate.rounded()])
        }
        var peers: [String: [String: Double]] = [:]
        var peerError: String?
        if runsPeers {
            do {
                peers = try await runPeers(cases: cases)
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
        return String(decoding: data, as: UTF8.self)
    }

    private func runPeers(cases: [ReceiptBenchCase]) async throws -> [String: [String: Double]] {
        var arguments = [python, peersScript, "--seconds", String(seconds)]
        for benchCase in cases { arguments += ["--case", "\(benchCase.name)=\(benchCase.path)"] }
        let process = try ChildProcess(
            name: "peers", executable: "/usr/bin/env", arguments: arguments, readsLines: true)
        let text = await process.allLines().joined(separator: "\n")
        // stdout closed: the peers have ended or are ending.
        var exit = await process.waitForExit(timeout: .seconds(60))
        if exit == nil { exit = await process.stop() }
        guard exit == .exited(0),
            let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: [String: Double]]
        else { throw ReceiptsBenchmarkError("peers.py failed (exit \(exit?.status.description ?? "unknown"))") }
        return object
    }

    private func runFuzz(count: Int, cases: [ReceiptBenchCase]) throws -> String {
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
        return String(decoding: data, as: UTF8.self)
    }
}

/// A fixture is missing or does not verify, no case matches, or the peers failed.
package struct ReceiptsBenchmarkError: Error, CustomStringConvertible {
    package let description: String
    init(_ description: String) { self.description = description }
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
                throw ReceiptsBenchmarkError("fixture not found: \(url.path) (use --fixtures DIR)")
            }
            return ReceiptBenchCase(
                name: definition.name, file: definition.file, path: url.path, input: Array(data),
                mode: definition.mode)
        }
    }

    /// The analyzer every case uses: Apple's roots, no catalog restrictions, sandbox allowed.
    static func analyzer() -> ReceiptAnalyzer {
        ReceiptAnalyzer(trust: .apple, policy: AnalysisPolicy())
    }

    /// Receipts per second on the calling thread, each analyzed as the case's mode says.
    func measure(seconds: Double) throws -> Double {
        let analyzer = Self.analyzer()
        let check = analyzer.analyze(input)
        // iOS 6 receipts are signed by a CA that is not shipped, so they stay `untrusted` (signature checked).
        guard check.format != .unknown, check.signature == .valid || name.contains("ios6") else {
            throw ReceiptsBenchmarkError("benchmark fixture \(file) did not verify: \(check.signature)")
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
