import AppleClients
import ArgumentParser
import Foundation
import Logging

/// `verify-worker bench apple`: verifyReceipt calls per second and latency with many concurrent requests,
/// next to the Little's-law bound of the same run.
struct BenchAppleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apple",
        abstract: "verifyReceipt throughput and latency through the curl engine, against --url or an in-process fake."
    )

    @Option(help: "Base URL of an Apple look-alike serving POST /verifyReceipt. Omitted: an in-process fake.")
    var url: String?

    @Option(help: "Concurrent callers.")
    var concurrency: Int = 1000

    @Option(help: "Measured requests (after one warm-up request per caller).")
    var requests: Int = 50_000

    @Option(
        help: ArgumentHelp(
            "Latency the in-process fake adds to each answer, in milliseconds; with --url, the latency to "
                + "assume for the Little's-law bound."))
    var latencyMs: Int = 100

    @Option(help: "Most connections to one host (CURLMOPT_MAX_HOST_CONNECTIONS).")
    var maxHostConnections: Int = 1024

    func run() async throws {
        var fake: BenchAppleFakeServer?
        let base: String
        if let url {
            base = url
        } else {
            let server = BenchAppleFakeServer(latency: .milliseconds(latencyMs))
            base = "http://127.0.0.1:\(try await server.start())"
            fake = server
        }
        let engine = try CurlHTTPEngine(
            configuration: HTTPEngineConfiguration(
                maxHostConnections: maxHostConnections, maxTotalConnections: max(maxHostConnections, 2048)))
        var logger = Logger(label: "bench-apple")
        logger.logLevel = .warning
        let client = VerifyReceiptClient(
            transport: engine, configuration: .endpoints(base: base), logger: logger)
        let load = VerifyReceiptLoad(
            client: client, engine: engine, concurrency: concurrency, requests: requests,
            receiptData: "TUlJVGJ3WUpLb1pJaHZjTkFRY0NvSUlUWURDQ0UxdwIBATELMAkGBSsOAwIaBQAw",
            configuredLatency: latencyMs > 0 ? .milliseconds(latencyMs) : nil)
        let report = try await load.run()
        engine.shutdown()
        await fake?.stop()

        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        print(String(decoding: try encoder.encode(report), as: UTF8.self))
    }
}
