import AppleClients
import AppleSimulator
import ArgumentParser
import Foundation
import Logging
import Messages
import Operations
import StoreHTTP
import Traffic

/// `verify-worker bench apple`: verifyReceipt calls per second and latency with many concurrent requests, next to
/// the Little's-law bound (concurrency / latency) of the same run, against the Apple simulator at each requested
/// added latency (default 0 and 100 ms), or against `--url`. The simulator runs in a child process
/// (`verify-worker apple-sim --port 0`) unless `--in-process-simulator` is given. With `wrk` installed, the same run
/// also measures the simulator alone under wrk (0 ms), so both rates come from one run.
package struct BenchAppleArguments: HarnessArguments {
    package static let commandConfiguration = CommandConfiguration(
        commandName: "apple",
        abstract: "verifyReceipt throughput and latency through the curl engine, against the Apple simulator or --url."
    )

    @Option(
        help: "Base URL of an Apple look-alike serving POST /verifyReceipt. Omitted: the simulator in a child process.")
    package var url: String?

    @Flag(help: "Run the simulator inside this process (shares its CPU and cooperative pool with the client).")
    package var inProcessSimulator = false

    @Option(help: "curl engines (each its own multi handle and thread) the calls are spread over, round robin.")
    package var shards: Int = 1

    @Option(help: "Concurrent callers.")
    package var concurrency: Int = 1000

    @Option(help: "Measured requests per latency (after one warm-up request per caller).")
    package var requests: Int = 20_000

    @Option(
        help: ArgumentHelp(
            "Latencies the simulator adds to each answer, in milliseconds, comma-separated, one run each; with "
                + "--url, the latency to assume for the Little's-law bound."))
    package var latencyMs: String = "0,100"

    @Option(
        name: .customLong("max-host-connections"), help: "Most connections to one host (CURLMOPT_MAX_HOST_CONNECTIONS)."
    )
    package var maximumHostConnections: Int = 1024

    @Option(help: "Seconds of wrk against the in-process simulator (0 ms latency) after the client runs; 0: skip.")
    package var wrkSeconds: Int = 10

    @Option(help: "wrk connections.")
    package var wrkConnections: Int = 64

    @Option(help: "wrk threads.")
    package var wrkThreads: Int = 2

    /// What the command prints.
    struct Output: Encodable {
        var client: [VerifyReceiptLoad.Report]
        /// The simulator alone under wrk, when measured.
        var simulatorUnderWrk: WrkLoad.Report?
        /// Why wrk was not run, when it was not.
        var wrkSkipped: String?
        /// How the simulator's child process ended, when not with exit 0 after SIGTERM.
        var simulatorExit: String?
    }

    package init() {}

    package func run() async throws {
        let latencies = latencyMs.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard !latencies.isEmpty, latencies.allSatisfy({ $0 >= 0 }) else {
            throw ValidationError("--latency-ms takes whole milliseconds, comma-separated")
        }
        guard shards >= 1 else { throw ValidationError("--shards must be at least 1") }
        var output = Output(client: [])
        if let url {
            for latency in latencies {
                output.client.append(
                    try await measure(base: url, receipt: Self.placeholderReceipt, latency: latency))
            }
            output.wrkSkipped = "--url given: measure the server with scripts/sim/bench_verify_receipt.sh"
        } else if inProcessSimulator {
            var configuration = AppleSimulatorConfiguration()
            configuration.logger.logLevel = .critical
            let simulator = try AppleSimulator(configuration: configuration)
            try await HarnessServices.run([SimulatorService(simulator)], logger: configuration.logger) {
                let port = try await simulator.waitUntilReady()
                let minted = try simulator.mint(
                    MintRequest(
                        bundleId: Self.bundleID, productId: Self.productID, format: .appReceipt,
                        environment: .production))
                let base = "http://127.0.0.1:\(port)"
                for latency in latencies {
                    var faults = FaultPlan()
                    faults.latencyMs = Double(latency)
                    simulator.setFaults(faults)
                    output.client.append(try await measure(base: base, receipt: minted.receipt, latency: latency))
                }
                simulator.setFaults(FaultPlan())
                try await runWrk(base: base, receipt: minted.receipt, into: &output)
            }
        } else {
            // The simulator ends with the bench, even when the bench is stopped with Ctrl-C.
            let child = try await SimulatorChildProcess.start(executable: RunningExecutable.url.path)
            do {
                let controlEngine = try CurlHTTPEngine()
                defer { controlEngine.shutdown() }
                let control = SimulatorControl(transport: controlEngine, baseURL: child.baseURL)
                let receipt = try await control.mintAppReceipt(bundleID: Self.bundleID, productID: Self.productID)
                for latency in latencies {
                    try await control.setLatency(milliseconds: latency)
                    output.client.append(try await measure(base: child.baseURL, receipt: receipt, latency: latency))
                }
                try await control.setLatency(milliseconds: 0)
                try await runWrk(base: child.baseURL, receipt: receipt, into: &output)
            } catch {
                await child.stop()
                throw error
            }
            let exit = await child.stop()
            if exit != .exited(0) { output.simulatorExit = exit.map { "\($0)" } ?? "still running after SIGKILL" }
        }
        try printJSON(output, snakeCaseKeys: true)
    }

    /// wrk against the simulator at `base` (0 ms of added latency), unless skipped or not installed.
    private func runWrk(base: String, receipt: String, into output: inout Output) async throws {
        guard wrkSeconds > 0 else {
            output.wrkSkipped = "--wrk-seconds 0"
            return
        }
        guard let wrk = WrkLoad.findExecutable() else {
            output.wrkSkipped = "wrk is not installed (apt-get install wrk)"
            return
        }
        var body: [UInt8] = Array(#"{"receipt-data":"#.utf8)
        body.append(contentsOf: "\"\(receipt)\"}".utf8)
        output.simulatorUnderWrk = try await WrkLoad(
            executable: wrk, url: base + "/verifyReceipt", body: body, connections: wrkConnections,
            threads: wrkThreads, durationSeconds: wrkSeconds
        ).run()
    }

    private func measure(base: String, receipt: String, latency: Int) async throws -> VerifyReceiptLoad.Report {
        let engine = try ShardedCurlEngine(
            shards: shards,
            configuration: HTTPEngineConfiguration(
                maximumHostConnections: maximumHostConnections,
                maximumTotalConnections: max(maximumHostConnections, 2048)))
        defer { engine.shutdown() }
        var logger = Logger(label: "bench-apple")
        logger.logLevel = .warning
        let client = VerifyReceiptClient(transport: engine, configuration: .endpoints(base: base), logger: logger)
        let load = VerifyReceiptLoad(
            client: client, engine: engine, concurrency: concurrency, requests: requests, receiptData: receipt,
            configuredLatency: latency > 0 ? .milliseconds(latency) : nil)
        return try await load.run()
    }

    static let bundleID = "com.example.verifyworker"
    static let productID = "com.example.verifyworker.gems100"

    /// A well-formed receipt prefix for servers that only need a body (with `--url`).
    static let placeholderReceipt = "TUlJVGJ3WUpLb1pJaHZjTkFRY0NvSUlUWURDQ0UxdwIBATELMAkGBSsOAwIaBQAw"
}
