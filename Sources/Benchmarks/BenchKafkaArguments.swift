import ArgumentParser
import Foundation
import Kafka
import Traffic

/// `verify-worker bench kafka`: produce and consume-and-commit throughput through the mock cluster.
package struct BenchKafkaArguments: HarnessArguments {
    package static let commandConfiguration = CommandConfiguration(
        commandName: "kafka",
        abstract: "Measures produce and consume-and-commit throughput (messages/s) through the mock cluster."
    )

    @Option(help: "Messages to produce and then consume.")
    package var messages: Int = 100_000

    @Option(help: "Bytes per message value.")
    package var size: Int = 1024

    @Option(help: "Mock brokers.")
    package var brokers: Int = 3

    @Option(
        help:
            "Partitions of the benchmark topic (the mock keeps about 5 MB per partition: at most 4 MiB of messages each)."
    )
    package var partitions: Int = 32

    @Option(help: "Producer linger.ms.")
    package var lingerMs: Int = 5

    @Option(help: "Producer in-flight bound (messages).")
    package var inFlight: Int = 10_000

    package init() {}

    package func validate() throws {
        guard messages > 0, size >= 0, brokers > 0, partitions > 0, lingerMs >= 0, inFlight > 0 else {
            throw ValidationError("messages, brokers, partitions and in-flight must be positive")
        }
    }

    package func run() async throws {
        let benchmark = KafkaThroughputBenchmark(
            messages: messages, messageBytes: size, brokers: brokers, partitions: partitions,
            producer: KafkaProducerConfiguration(maximumInFlightMessages: inFlight, lingerMilliseconds: lingerMs))
        let result = try await benchmark.run()
        try printJSON(result, snakeCaseKeys: true)
    }
}
