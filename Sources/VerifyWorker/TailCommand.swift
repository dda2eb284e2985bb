import ArgumentParser
import Foundation
import Gateway
import Kafka
import Logging
import Messages
import Operations

/// `verify-worker tail`: prints a topic's messages (verdicts by default) as JSON lines.
struct TailCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tail",
        abstract: "Prints verdicts (or any topic's values) as JSON lines, one per message.",
        discussion: """
            Without --group, a group of its own reads from the end (or from the beginning with \
            --from-beginning) and commits nothing. With --group, offsets are committed as messages are printed, \
            so the next tail of that group resumes after them. A value that is not one line of JSON is printed as \
            {"partition","offset","value_base64"}. The dead-letter topic (receipt-jobs-dlq, or \
            VERIFY_DEAD_LETTER_TOPIC), or any topic with --headers, prints {"partition","offset","headers","value"}: \
            a dead letter's reason is in its headers (dlq.reason, dlq.error, dlq.source.*). Exits after --count \
            messages, or 0 on SIGTERM/SIGINT.
            """
    )

    @Option(help: "Kafka bootstrap servers (VERIFY_BROKERS, default localhost:9092).")
    var brokers: String?
    @Option(help: "Topic to read (default receipt-verdicts, or VERIFY_VERDICTS_TOPIC).")
    var topic: String?
    @Flag(name: .customLong("from-beginning"), help: "Start at the oldest message when the group has no offset.")
    var fromBeginning = false
    @Option(help: "Exit after this many messages.")
    var count: Int?
    @Option(help: "Consumer group (default: a new one that commits nothing).")
    var group: String?
    @Flag(help: "Print each message with its headers (always on for the dead-letter topic).")
    var headers = false
    @Option(
        name: .customLong("kafka-properties"),
        help: "Extra librdkafka properties, name=value;name=value (VERIFY_KAFKA_PROPERTIES; e.g. SASL or SSL).")
    var kafkaProperties: String?

    func validate() throws {
        if let count, count < 1 { throw ValidationError("--count must be positive") }
    }

    func run() async throws {
        let environment = GatewayEnvironment()
        let logger = GatewayLogging.toolLogger(label: "verify-worker.tail")
        let properties: [String: String]
        do {
            properties = try environment.kafkaProperties(kafkaProperties)
        } catch {
            throw CommandFailure.configuration(command: "tail", error)
        }
        KafkaTLSVerification.warnIfSwitchedOff(properties, logger: logger)
        let consumer = KafkaConsumerConfiguration(
            bootstrapServers: brokers ?? environment["VERIFY_BROKERS"] ?? "localhost:9092",
            groupID: group ?? TopicTail.ephemeralGroupID(),
            autoOffsetReset: fromBeginning ? "earliest" : "latest", clientID: "verify-worker-tail",
            properties: properties)
        let topic = topic ?? environment["VERIFY_VERDICTS_TOPIC"] ?? Topics.verdicts
        let deadLetters = environment["VERIFY_DEAD_LETTER_TOPIC"] ?? Topics.deadLetters
        let tail = TopicTail(
            consumer: consumer, topic: topic, count: count, commits: group != nil,
            showsHeaders: headers || topic == deadLetters, output: GatewayOutput.line)
        let signals = TerminationSignals()
        do {
            _ = try await tail.run(logger: logger) { await signals.wait() }
        } catch let error as KafkaError where error.code == .invalidArgument {
            // librdkafka refused a property: the only settings of this client the caller can get wrong.
            throw CommandFailure.configuration(
                command: "tail", ConfigurationError(key: "kafka_properties", problem: error.message))
        }
    }
}
