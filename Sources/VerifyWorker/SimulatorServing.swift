import AppleSimulator
import ArgumentParser
import Foundation
import Logging
import PlaySimulator
import ServiceLifecycle
import UnixSignals

/// Where `verify-worker apple-sim` and `play-sim` listen.
struct SimulatorListenOptions: ParsableArguments {
    @Option(help: "Port to listen on (0 picks a free one).")
    var port: Int = 0

    @Option(help: "Interface to listen on.")
    var host: String = "127.0.0.1"
}

/// A simulator that `verify-worker apple-sim` and `play-sim` serve: a `Service` that tells the port it listens on.
protocol ServedSimulator: Service {
    func waitUntilReady() async throws -> Int
}

extension ServedSimulator {
    /// Serves the simulator until SIGTERM or SIGINT, and prints `listening=http://HOST:PORT` once it listens, after
    /// `whenListening` returned.
    func serveUntilSignalled(
        command: String, host: String, whenListening: @escaping @Sendable () throws -> Void = {}
    ) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                // One service in one group: SIGTERM or SIGINT stops it gracefully (the command exits 0).
                try await ServiceGroup(
                    configuration: ServiceGroupConfiguration(
                        services: [.init(service: self, serviceName: "\(Self.self)")],
                        gracefulShutdownSignals: [.sigterm, .sigint],
                        logger: Logger(label: "verify-worker.\(command)"))
                ).run()
            }
            group.addTask {
                let port = try await waitUntilReady()
                try whenListening()
                // Unbuffered, so a parent reading the pipe sees the line at once.
                FileHandle.standardOutput.write(Data("listening=http://\(host):\(port)\n".utf8))
            }
            try await group.waitForAll()
        }
    }
}

/// The simulator's HTTP server runs as long as its task, and stops gracefully with its group.
extension AppleSimulator: ServedSimulator {}

/// The simulator's HTTP server runs as long as its task, and stops gracefully with its group.
extension PlaySimulator: ServedSimulator {}
