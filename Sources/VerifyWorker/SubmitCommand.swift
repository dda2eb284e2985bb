import AppleClients
import AppleSimulator
import ArgumentParser
import Foundation
import Gateway
import Kafka
import Logging
import Messages
import Operations
import Receipts
import Traffic

/// `verify-worker submit`: jobs from JSON lines (or generated seed-000 traffic) produced to `receipt-jobs`.
struct SubmitCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "submit",
        abstract:
            "Produces jobs from JSON lines (a file or stdin) or generated seed-mix traffic, one result line each.",
        discussion: """
            Each input line is a receipt-job/v1 object (docs/messages.md; schema and job_id may be left out). \
            Each job is produced keyed by account_id and its delivery awaited; stdout gets one JSON line per job: \
            {"line","job_id","account_id","partition","offset"} or {"line","error","message"} for a line that \
            is not a job (it is skipped). The exit code is 1 if any line failed. Jobs of one account are sent in \
            input order.

            --generate seed-mix mints genuine receipts at a running simulator (POST /sim/mint) and makes the \
            other categories locally (79% other apps, 9.3% cracker, 1% repeats, 0.7% forged, 10% genuine); \
            result lines then carry "category". The bundle id and products come from --catalog-file.
            """
    )

    @OptionGroup var arguments: SubmitArguments

    func run() async throws {
        let environment = EdgeEnvironment()
        var logger = Logger(label: "verify-worker.submit")
        logger.logLevel = .warning
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(
                bootstrapServers: arguments.brokers ?? environment["VERIFY_BROKERS"] ?? "localhost:9092",
                clientID: "verify-worker-submit"),
            logger: logger)
        let submitter = JobSubmitter(
            producer: producer, topic: arguments.topic ?? environment["VERIFY_JOBS_TOPIC"] ?? Topics.jobs,
            maxOutstanding: arguments.maxOutstanding, rate: arguments.rate, output: EdgeOutput.line)
        let signals = TerminationSignals()
        let engine = arguments.generate == nil ? nil : try CurlHTTPEngine()
        defer { engine?.shutdown() }

        let work: @Sendable () async throws -> JobSubmitter.Summary
        if let engine {
            let plan = try generationPlan(engine: engine)
            work = { try await submitter.submit(plan.items()) }
        } else {
            let lines = try LineReader.lines(of: arguments.file)
            work = { try await submitter.submit(JobSubmitter.items(from: lines, intake: JobIntake())) }
        }
        let outcome = await Self.submitUntilSignalled(work, signals: signals)
        await producer.shutdown(timeout: .seconds(30))
        switch outcome {
        case .success(let summary):
            EdgeOutput.error(GatewayJSON.line(summary))
            if summary.failed > 0 { throw ExitCode(1) }
        case .failure(let error):
            EdgeOutput.error("submit: \(error)")
            throw ExitCode(1)
        }
    }

    /// Submits until the input ends or SIGTERM/SIGINT arrives; then reading stops and the sends in flight finish.
    private static func submitUntilSignalled(
        _ work: @escaping @Sendable () async throws -> JobSubmitter.Summary, signals: TerminationSignals
    ) async -> Result<JobSubmitter.Summary, any Error> {
        await withTaskGroup(of: Result<JobSubmitter.Summary, any Error>?.self) { group in
            group.addTask {
                do {
                    return .success(try await work())
                } catch {
                    return .failure(error)
                }
            }
            group.addTask {
                await signals.wait()
                return nil
            }
            var result: Result<JobSubmitter.Summary, any Error>?
            while result == nil, let next = await group.next() {
                // The first to finish is the submission (done) or the signal (stop reading, keep waiting).
                group.cancelAll()
                result = next
            }
            return result ?? .success(JobSubmitter.Summary())
        }
    }

    /// Seed-000 traffic minted at the simulator over HTTP.
    private func generationPlan(engine: CurlHTTPEngine) throws -> SubmitGenerationPlan {
        guard let catalogFile = arguments.catalogFile, let simulator = arguments.simulator else {
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
            let response = try await engine.execute(
                TransportRequest(
                    method: .post, url: url, headers: [("Content-Type", "application/json")], body: body,
                    timeout: .seconds(30)))
            return (response.status, response.body)
        }
        return SubmitGenerationPlan(
            minter: minter, bundleID: bundleID, productIDs: catalog.products.keys.sorted(),
            mix: arguments.mix.flatMap(TrafficMix.init(parsing:)) ?? .seed000, seed: arguments.seed,
            count: arguments.count)
    }
}

/// What `submit --generate seed-mix` generates; the sequence is made where it is read.
struct SubmitGenerationPlan: Sendable {
    var minter: RemoteSimulatorMinter
    var bundleID: String
    var productIDs: [String]
    var mix: TrafficMix
    var seed: UInt64
    var count: Int

    func items() -> AsyncMapSequence<SeedTrafficSequence, JobSubmitter.Item> {
        let generator = SeedTrafficGenerator(
            minter: minter, bundleID: bundleID, productIDs: productIDs, mix: mix, seed: seed)
        return SeedTrafficSequence(generator: generator, count: count).map { generated -> JobSubmitter.Item in
            .job(line: nil, generated.job, category: generated.category.rawValue)
        }
    }
}

/// Whole-line writes of the edge tools: results on stdout, summaries and errors on stderr.
enum EdgeOutput {
    static let line: @Sendable (String) -> Void = { text in
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    static func error(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }
}
