import ArgumentParser
import Benchmarks
import Foundation
import Kafka

/// `verify-worker bench kafka`: produce and consume-and-commit throughput through the mock cluster.
struct BenchKafkaCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kafka",
        abstract: "Measures produce and consume-and-commit throughput (messages/s) through the mock cluster."
    )

    @Option(help: "Messages to produce and then consume.")
    var messages: Int = 100_000

    @Option(help: "Bytes per message value.")
    var size: Int = 1024

    @Option(help: "Mock brokers.")
    var brokers: Int = 3

    @Option(
        help:
            "Partitions of the benchmark topic (the mock keeps about 5 MB per partition: at most 4 MiB of messages each)."
    )
    var partitions: Int = 32

    @Option(help: "Producer linger.ms.")
    var lingerMs: Int = 5

    @Option(help: "Producer in-flight bound (messages).")
    var inFlight: Int = 10_000

    func validate() throws {
        guard messages > 0, size >= 0, brokers > 0, partitions > 0, lingerMs >= 0, inFlight > 0 else {
            throw ValidationError("messages, brokers, partitions and in-flight must be positive")
        }
    }

    func run() async throws {
        let benchmark = KafkaThroughputBenchmark(
            messages: messages, messageBytes: size, brokers: brokers, partitions: partitions,
            producer: KafkaProducerConfiguration(maxInFlightMessages: inFlight, lingerMilliseconds: lingerMs))
        let result = try await benchmark.run()
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        FileHandle.standardOutput.write(try encoder.encode(result) + Data("\n".utf8))
    }
}
