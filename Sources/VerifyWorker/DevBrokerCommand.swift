import ArgumentParser
import Dispatch
import Foundation
import Kafka
import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals

/// `verify-worker dev-broker`: hosts librdkafka's mock Kafka cluster in this process for local runs
/// and tests. Any Kafka client can use it through the printed bootstrap servers.
struct DevBrokerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dev-broker",
        abstract: "Runs an in-process mock Kafka cluster until SIGTERM/SIGINT.",
        discussion: """
            Once the brokers listen and the topics exist, prints exactly one line on stdout:
              bootstrap=HOST:PORT[,HOST:PORT...]
            and runs until SIGTERM or SIGINT, then exits 0.

            Control (for chaos tests): each line read on stdin is one command; each gets one reply \
            line on stdout starting with "ok" or "error":
              down <broker-id>                          disconnect a broker (-1: all)
              up <broker-id>                            let it accept connections again
              errors <api-key> <count> <error-code>     fail the next <count> requests of that Kafka ApiKey \
            (0 produce, 1 fetch, 8 offset commit, 11 join group) with a numeric rd_kafka_resp_err_t \
            (e.g. 6 NOT_LEADER_FOR_PARTITION, 7 REQUEST_TIMED_OUT, -195 disconnect)
              clear-errors <api-key>                    forget pushed errors
              topic <name> <partitions>                 create another topic
            End of input on stdin is not a stop signal.

            The mock keeps about 5 MB per partition (older batches are deleted) and does not move \
            leaders when a broker is down.
            """
    )

    @Option(help: "Number of mock brokers (ids 1...N).")
    var brokers: Int = 3

    @Option(help: "Partitions of every topic created at start.")
    var partitions: Int = 8

    @Option(help: "Comma-separated topics to create at start.")
    var topics: String = "receipt-jobs,receipt-verdicts,receipt-jobs-dlq,receipt-control"

    func validate() throws {
        guard (1...32).contains(brokers) else { throw ValidationError("--brokers must be 1...32") }
        guard (1...10_000).contains(partitions) else { throw ValidationError("--partitions must be 1...10000") }
    }

    func run() async throws {
        let cluster = try MockKafkaCluster(brokers: brokers)
        for topic in topics.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !topic.isEmpty
        {
            try cluster.createTopic(topic, partitions: partitions)
        }
        DevBrokerOutput.writeLine("bootstrap=\(cluster.bootstrapServers)")
        let control = Thread {
            while let line = readLine() {
                guard !line.trimmingCharacters(in: .whitespaces).isEmpty else { continue }
                DevBrokerOutput.writeLine(cluster.perform(controlCommand: line))
            }
        }
        control.name = "dev-broker-control"
        control.start()
        // The cluster lives as long as its service; SIGTERM or SIGINT stops the group, and the command exits 0.
        try await ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [.init(service: MockClusterService(cluster: cluster), serviceName: "MockClusterService")],
                gracefulShutdownSignals: [.sigterm, .sigint], logger: Logger(label: "verify-worker.dev-broker"))
        ).run()
    }
}

/// Keeps librdkafka's mock cluster up until the group stops.
struct MockClusterService: Service {
    let cluster: MockKafkaCluster

    func run() async throws {
        try? await gracefulShutdown()
        withExtendedLifetime(cluster) {}
    }
}

/// Unbuffered, whole-line writes to stdout (the control thread and the main task both write).
private enum DevBrokerOutput {
    static let lock = Mutex(())
    static func writeLine(_ line: String) {
        lock.withLock { _ in FileHandle.standardOutput.write(Data((line + "\n").utf8)) }
    }
}
