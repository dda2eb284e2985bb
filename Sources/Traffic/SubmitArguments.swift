import AppleClients
import ArgumentParser
import Foundation
import Messages
import StoreHTTP

/// The options of `verify-worker submit` (the command in the executable wires them to a producer): jobs from JSON
/// lines, or seed-000 traffic generated at a running simulator (the compose file's load generator).
package struct SubmitArguments: ParsableArguments {
    @Option(help: "Kafka bootstrap servers (VERIFY_BROKERS, default localhost:9092).")
    package var brokers: String?
    @Option(help: "Topic to produce to (VERIFY_JOBS_TOPIC, default receipt-jobs).")
    package var topic: String?
    @Option(
        name: .customLong("kafka-properties"),
        help: "Extra librdkafka properties, name=value;name=value (VERIFY_KAFKA_PROPERTIES; e.g. SASL or SSL).")
    package var kafkaProperties: String?
    @Option(help: "Generate traffic instead of reading it: seed-mix.")
    package var generate: String?
    @Option(help: "Jobs to generate.")
    package var count: Int = 10_000
    @Option(help: "Jobs per second (default: as fast as Kafka takes them).")
    package var rate: Double?
    @Option(help: "Base URL of a running Apple simulator, for --generate (e.g. http://apple-sim:8443).")
    package var simulator: String?
    @Option(name: .customLong("catalog-file"), help: "Catalog JSON naming the app's bundle id and products.")
    package var catalogFile: String?
    @Option(help: "Seed of the generated mix.")
    package var seed: UInt64 = 42
    @Option(help: "Share of generated traffic by category, e.g. other_app=0.79,cracker=0.093,… (default seed 000).")
    package var mix: String?
    @Option(name: .customLong("max-outstanding"), help: "Jobs awaiting their delivery report at once.")
    package var maximumOutstanding: Int = 1_000
    @Argument(help: "JSON-lines file of jobs; - or nothing reads stdin.")
    package var file: String?

    package init() {}

    package func validate() throws {
        if let generate {
            guard generate == "seed-mix" else { throw ValidationError("--generate knows only seed-mix") }
            guard simulator != nil else { throw ValidationError("--generate needs --simulator URL") }
            guard catalogFile != nil else { throw ValidationError("--generate needs --catalog-file") }
            guard file == nil else { throw ValidationError("give either --generate or a FILE, not both") }
            guard count >= 0 else { throw ValidationError("--count must not be negative") }
        }
        if let rate, !(rate > 0) { throw ValidationError("--rate must be positive") }
        if let mix, TrafficMix(parsing: mix) == nil { throw ValidationError("--mix: expected category=share,…") }
        guard maximumOutstanding > 0 else { throw ValidationError("--max-outstanding must be positive") }
    }
}

extension SubmitArguments {
    /// `--generate seed-mix`: seed-000 traffic whose genuine receipts are minted at the running simulator named by
    /// `--simulator` (`POST /sim/mint` over `engine`), for the bundle id and products of `--catalog-file`.
    package func seedTraffic(engine: CurlHTTPEngine) throws -> SeedTrafficPlan {
        guard let catalogFile, let simulator else {
            throw ValidationError("--generate needs a catalog and simulator")
        }
        guard let data = FileManager.default.contents(atPath: catalogFile) else {
            throw ValidationError("cannot read --catalog-file \(catalogFile)")
        }
        let catalog = try Catalog.load(json: data)
        guard let bundleID = catalog.bundleIDs.sorted().first, !catalog.products.isEmpty else {
            throw ValidationError("--catalog-file must name a bundle id and at least one product")
        }
        let minter = RemoteSimulatorMinter(baseURL: simulator) { url, body in
            let response = try await engine.postJSON(url, body: body, timeout: .seconds(30))
            return (response.status, response.body)
        }
        return SeedTrafficPlan(
            minter: minter, bundleID: bundleID, productIDs: catalog.products.keys.sorted(),
            mix: mix.flatMap(TrafficMix.init(parsing:)) ?? .seed000, seed: seed, count: count)
    }
}

/// What `--generate seed-mix` will produce, checked before the first job: the sequence is made where it is read.
package struct SeedTrafficPlan: Sendable {
    var minter: RemoteSimulatorMinter
    var bundleID: String
    var productIDs: [String]
    var mix: TrafficMix
    var seed: UInt64
    var count: Int

    package func sequence() -> SeedTrafficSequence {
        SeedTrafficSequence(
            generator: SeedTrafficGenerator(
                minter: minter, bundleID: bundleID, productIDs: productIDs, mix: mix, seed: seed),
            count: count)
    }
}
