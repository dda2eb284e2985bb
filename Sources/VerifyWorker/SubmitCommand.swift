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
import StoreHTTP
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
        let environment = GatewayEnvironment()
        let logger = GatewayLogging.toolLogger(label: "verify-worker.submit")
        let producer: KafkaProducer
        do {
            let properties = try environment.kafkaProperties(arguments.kafkaProperties)
            KafkaTLSVerification.warnIfSwitchedOff(properties, logger: logger)
            producer = try KafkaProducer(
                configuration: KafkaProducerConfiguration(
                    bootstrapServers: arguments.brokers ?? environment["VERIFY_BROKERS"] ?? "localhost:9092",
                    clientID: "verify-worker-submit", properties: properties),
                logger: logger)
        } catch let error as KafkaError {
            // librdkafka refused a property: the only settings of this producer the caller can get wrong.
            throw CommandFailure.configuration(
                command: "submit", ConfigurationError(key: "kafka_properties", problem: error.message))
        } catch {
            throw CommandFailure.configuration(command: "submit", error)
        }
        let submitter = JobSubmitter(
            producer: producer, topic: arguments.topic ?? environment["VERIFY_JOBS_TOPIC"] ?? Topics.jobs,
            maximumOutstanding: arguments.maximumOutstanding, rate: arguments.rate, output: GatewayOutput.line)
        let signals = TerminationSignals()
        let engine = arguments.generate == nil ? nil : try CurlHTTPEngine()
        defer { engine?.shutdown() }

        let work: @Sendable () async throws -> JobSubmitter.Summary
        if let engine {
            let traffic = try arguments.seedTraffic(engine: engine)
            work = {
                try await submitter.submit(
                    traffic.sequence().map { .job(line: nil, $0.job, category: $0.category.rawValue) })
            }
        } else {
            let lines = try LineReader.lines(of: arguments.file)
            work = { try await submitter.submit(JobSubmitter.items(from: lines, intake: JobIntake())) }
        }
        // A signal stops the reading; the sends in flight finish.
        let outcome = await signals.run(until: work) ?? .success(JobSubmitter.Summary())
        await producer.shutdown(timeout: .seconds(30))
        switch outcome {
        case .success(let summary):
            GatewayOutput.error(GatewayJSON.line(summary))
            if summary.failed > 0 { throw ExitCode(1) }
        case .failure(let error):
            GatewayOutput.error("submit: \(error)")
            throw ExitCode(1)
        }
    }
}

enum GatewayOutput {
    static let line: @Sendable (String) -> Void = { text in
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    static func error(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }
}
