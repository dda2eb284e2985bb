import ArgumentParser
import Foundation
import Traffic

/// `verify-worker bench receipts`: the options of ``ReceiptsBenchmark``.
package struct BenchReceiptsArguments: HarnessArguments {
    package static let commandConfiguration = CommandConfiguration(
        commandName: "receipts",
        abstract: "Benchmark receipt decoding and offline verification; optionally fuzz with --fuzz N."
    )

    @Option(help: "The shared fixtures directory. Default: $VERIFY_FIXTURES_DIR or ../shared/fixtures.")
    package var fixtures: String?

    @Option(help: "Seconds to measure each case.")
    package var seconds: Double = 2

    @Option(help: "Python interpreter with the peers installed (scripts/bench/install-peers.sh); none to skip.")
    package var python: String = "python3"

    @Option(help: "Path to scripts/bench/peers.py.")
    package var peersScript: String = "scripts/bench/peers.py"

    @Flag(help: "Skip the Python peers.")
    package var noPeers = false

    @Option(name: .customLong("case"), help: "Run only this case (repeatable); default: every case.")
    package var onlyCases: [String] = []

    @Option(help: "Instead of benchmarking, run N mutated inputs through the analyzer and report.")
    package var fuzz: Int?

    package init() {}

    package func run() async throws {
        let benchmark = ReceiptsBenchmark(
            fixtures: URL(
                fileURLWithPath: fixtures ?? ProcessInfo.processInfo.environment["VERIFY_FIXTURES_DIR"]
                    ?? "../shared/fixtures"),
            seconds: seconds, python: python, peersScript: peersScript, runsPeers: !noPeers, onlyCases: onlyCases,
            fuzz: fuzz)
        print(try await benchmark.run())
    }
}
