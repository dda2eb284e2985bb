import Foundation
import Kafka
import Testing
import Traffic

/// `verify-worker dev-broker` in a process of its own, used by this package's client and by kcat.
@Suite("Kafka dev-broker process")
struct KafkaDevBrokerTests {
    @Test(
        "dev-broker serves the Swift client and kcat, obeys control lines, exits 0 on SIGTERM", .timeLimit(.minutes(2)))
    func devBrokerServesClients() async throws {
        let broker = try KafkaTestBrokerProcess(arguments: [
            "dev-broker", "--brokers", "2", "--partitions", "3", "--topics", "kt-dev-a,kt-dev-b",
        ])
        defer { broker.terminateIfRunning() }
        let bootstrap = try await broker.bootstrap()
        #expect(!bootstrap.isEmpty)

        // Swift producer → kcat consumer.
        let producer = try KafkaTest.producer(bootstrap: bootstrap)
        _ = try await KafkaTest.produce(producer, topic: "kt-dev-a", count: 10, prefix: "swift")
        await producer.shutdown()
        let kcat = try KafkaTestKcat.path()
        let consumed = try await KafkaTestKcat.run(
            kcat, ["-b", bootstrap, "-C", "-t", "kt-dev-a", "-o", "beginning", "-c", "10", "-e", "-q", "-f", "%s\\n"])
        #expect(Set(consumed.split(separator: "\n").map(String.init)) == Set((0..<10).map { "swift-\($0)" }))

        // kcat producer → Swift consumer.
        let lines = (0..<10).map { "kcat-\($0)" }.joined(separator: "\n") + "\n"
        _ = try await KafkaTestKcat.run(kcat, ["-b", bootstrap, "-P", "-t", "kt-dev-b"], input: lines)
        let consumer = try KafkaTest.consumer(bootstrap, group: KafkaTest.uniqueGroup("dev"))
        try consumer.subscribe(topics: ["kt-dev-b"])
        let messages = try await KafkaTest.collect(consumer.events, messages: 10)
        await consumer.close()
        #expect(Set(messages.map { KafkaTest.text($0.value) }) == Set((0..<10).map { "kcat-\($0)" }))

        // The control channel answers each line.
        #expect(try await broker.control("down 2") == "ok down 2")
        #expect(try await broker.control("up 2") == "ok up 2")
        #expect(try await broker.control("errors 0 1 6") == "ok errors 0 1 6")
        #expect(try await broker.control("nonsense").hasPrefix("error"))

        #expect(try await broker.terminate() == 0)
    }
}

/// A `verify-worker` child process with line-wise access to its stdout and stdin.
final class KafkaTestBrokerProcess: Sendable {
    private let child: TestChild

    init(arguments: [String]) throws {
        child = try TestChild.verifyWorker(arguments, opensStdin: true)
    }

    /// Waits for the `bootstrap=` line.
    func bootstrap() async throws -> String {
        guard let line = await child.nextLine(), line.hasPrefix("bootstrap=") else {
            throw KafkaTestFailure("dev-broker did not print a bootstrap= line first")
        }
        return String(line.dropFirst("bootstrap=".count))
    }

    /// Sends one control line and returns the reply line.
    func control(_ command: String) async throws -> String {
        child.process.send(line: command)
        guard let reply = await child.nextLine() else { throw KafkaTestFailure("dev-broker closed stdout") }
        return reply
    }

    /// Sends SIGTERM and returns the exit status.
    func terminate() async throws -> Int32 {
        guard let exit = await child.terminate() else { throw KafkaTestFailure("dev-broker did not end") }
        return exit.status
    }

    func terminateIfRunning() { child.kill() }
}

/// Runs kcat (or the older `kafkacat` name).
enum KafkaTestKcat {
    static func path() throws -> URL {
        let paths = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin").split(separator: ":")
        for directory in paths {
            for name in ["kcat", "kafkacat"] {
                let candidate = URL(fileURLWithPath: String(directory)).appendingPathComponent(name)
                if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            }
        }
        throw MissingResource(what: "kcat", hint: "install it with `apt-get install kcat` (or kafkacat)")
    }

    /// Runs kcat to its end and returns its stdout.
    static func run(_ kcat: URL, _ arguments: [String], input: String? = nil) async throws -> String {
        let done = try await ChildProcess.run(
            executable: kcat.path, arguments: arguments, input: Array((input ?? "").utf8), timeout: .seconds(120))
        guard done.succeeded else {
            throw KafkaTestFailure("kcat \(arguments.joined(separator: " ")) exited \(done.exit): \(done.errors)")
        }
        return done.output
    }
}
