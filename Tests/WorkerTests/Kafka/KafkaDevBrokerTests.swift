import Foundation
import Kafka
import Testing

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
    private let process: Process
    private let input: Pipe
    private let lines: KafkaTestLineReader

    init(arguments: [String]) throws {
        let process = try TestEnvironment.verifyWorkerProcess(arguments)
        let output = Pipe()
        let input = Pipe()
        process.standardOutput = output
        process.standardInput = input
        try process.run()
        self.process = process
        self.input = input
        self.lines = KafkaTestLineReader(output.fileHandleForReading)
    }

    /// Waits for the `bootstrap=` line.
    func bootstrap() async throws -> String {
        guard let line = await lines.next(), line.hasPrefix("bootstrap=") else {
            throw KafkaTestFailure("dev-broker did not print a bootstrap= line first")
        }
        return String(line.dropFirst("bootstrap=".count))
    }

    /// Sends one control line and returns the reply line.
    func control(_ command: String) async throws -> String {
        input.fileHandleForWriting.write(Data((command + "\n").utf8))
        guard let reply = await lines.next() else { throw KafkaTestFailure("dev-broker closed stdout") }
        return reply
    }

    /// Sends SIGTERM and returns the exit status.
    func terminate() async throws -> Int32 {
        process.terminate()
        let process = self.process
        return await withCheckedContinuation { continuation in
            Thread {
                process.waitUntilExit()
                continuation.resume(returning: process.terminationStatus)
            }.start()
        }
    }

    func terminateIfRunning() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}

/// Reads lines from a pipe on a thread of its own.
final class KafkaTestLineReader: Sendable {
    private let stream: AsyncStream<String>

    init(_ handle: FileHandle) {
        stream = TestLines.stream(of: handle)
    }

    func next() async -> String? {
        var iterator = stream.makeAsyncIterator()
        return await iterator.next()
    }
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

    /// Runs kcat to completion on a thread of its own and returns its stdout.
    static func run(_ kcat: URL, _ arguments: [String], input: String? = nil) async throws -> String {
        let process = Process()
        process.executableURL = kcat
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        let stdin = Pipe()
        process.standardInput = stdin
        try process.run()
        if let input { stdin.fileHandleForWriting.write(Data(input.utf8)) }
        try stdin.fileHandleForWriting.close()
        let data: Data = await withCheckedContinuation { continuation in
            Thread {
                let data = output.fileHandleForReading.readDataToEndOfFile()
                process.waitUntilExit()
                continuation.resume(returning: data)
            }.start()
        }
        guard process.terminationStatus == 0 else {
            throw KafkaTestFailure("kcat \(arguments.joined(separator: " ")) exited \(process.terminationStatus)")
        }
        return String(decoding: data, as: UTF8.self)
    }
}
