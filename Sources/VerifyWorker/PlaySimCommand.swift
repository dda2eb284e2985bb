import ArgumentParser
import Foundation
import Logging
import PlaySimulator
import ServiceLifecycle
import UnixSignals

/// `verify-worker play-sim`: runs the Google Play simulator until SIGTERM or SIGINT.
struct PlaySimCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "play-sim",
        abstract:
            "Runs a simulated Google Play (OAuth token endpoint, Android Publisher purchases, minting) for tests and demos.",
        discussion: """
            Prints `listening=http://HOST:PORT` once ready. Endpoints: docs/PLAY-SIMULATOR.md.
            The service-account key file holds a private key: it is written with mode 0600 and never logged.
            """
    )

    @Option(help: "Port to listen on (0 picks a free one).")
    var port: Int = 0

    @Option(help: "Interface to listen on.")
    var host: String = "127.0.0.1"

    @Option(
        name: .customLong("time-scale"),
        help: "How much faster than real time the simulator's clock runs (86400 makes Google's three days 3 seconds).")
    var timeScale: Double = 1

    @Option(
        name: .customLong("access-token-lifetime"),
        help: "Seconds (of the simulator's clock) an access token lives; Google's is 3599.")
    var accessTokenLifetime: Double = 3599

    @Option(
        name: .customLong("service-account-file"),
        help: "Once listening, writes a service-account key file the simulator accepts (Google's JSON) to this path.")
    var serviceAccountFile: String?

    func run() async throws {
        guard timeScale > 0, timeScale <= 1_000_000 else {
            throw ValidationError("--time-scale must be a number above 0 and at most 1000000")
        }
        guard (1...31_536_000).contains(accessTokenLifetime) else {
            throw ValidationError("--access-token-lifetime must be 1 to 31536000 seconds")
        }
        var configuration = PlaySimulatorConfiguration()
        configuration.host = host
        configuration.port = port
        configuration.clock = PlaySimulatorClock(scale: timeScale)
        configuration.accessTokenLifetime = accessTokenLifetime
        let simulator = PlaySimulator(configuration: configuration)
        let host = host
        let serviceAccountFile = serviceAccountFile
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                // One service in one group: SIGTERM or SIGINT stops it gracefully (the command exits 0).
                try await ServiceGroup(
                    configuration: ServiceGroupConfiguration(
                        services: [.init(service: simulator, serviceName: "PlaySimulator")],
                        gracefulShutdownSignals: [.sigterm, .sigint],
                        logger: Logger(label: "verify-worker.play-sim"))
                ).run()
            }
            group.addTask {
                let port = try await simulator.waitUntilReady()
                if let serviceAccountFile {
                    try simulator.issueServiceAccount().writeKeyFile(to: URL(fileURLWithPath: serviceAccountFile))
                }
                // Unbuffered, so a parent reading the pipe sees the line at once (after the key file is written).
                FileHandle.standardOutput.write(Data("listening=http://\(host):\(port)\n".utf8))
            }
            try await group.waitForAll()
        }
    }
}

/// The simulator's HTTP server runs as long as its task, and stops gracefully with its group.
extension PlaySimulator: Service {}
