import ArgumentParser
import Foundation
import PlaySimulator

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

    @OptionGroup var listen: SimulatorListenOptions

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
        configuration.host = listen.host
        configuration.port = listen.port
        configuration.clock = PlaySimulatorClock(scale: timeScale)
        configuration.accessTokenLifetime = accessTokenLifetime
        let simulator = PlaySimulator(configuration: configuration)
        let serviceAccountFile = serviceAccountFile
        try await simulator.serveUntilSignalled(command: "play-sim", host: listen.host) {
            // Written before the line is printed, so a parent that reads the line finds the file.
            if let serviceAccountFile {
                try simulator.issueServiceAccount().writeKeyFile(to: URL(fileURLWithPath: serviceAccountFile))
            }
        }
    }
}
