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

    @Option(
        name: .customLong("push-endpoint"),
        help: "URL Real-time developer notifications are pushed to (Pub/Sub push, with an OIDC token); none: no pushes."
    )
    var pushEndpoint: String?

    @Option(
        name: .customLong("push-subscription"), help: "The push subscription's name, the envelope's `subscription`.")
    var pushSubscription = "projects/play-simulator/subscriptions/play-rtdn"

    @Option(name: .customLong("push-audience"), help: "The OIDC token's `aud` (default: the push endpoint URL).")
    var pushAudience: String?

    @Option(name: .customLong("push-service-account"), help: "The OIDC token's `email`, the pushing service account.")
    var pushServiceAccount = "rtdn-push@play-simulator.iam.gserviceaccount.com"

    @Option(
        name: .customLong("push-min-backoff"),
        help: "Seconds (of the simulator's clock) before the first redelivery of an unacknowledged push, 0 to 600.")
    var pushMinimumBackoff: Double = 10

    @Option(name: .customLong("push-max-backoff"), help: "The longest wait between redeliveries (seconds), 0 to 600.")
    var pushMaximumBackoff: Double = 600

    @Flag(name: .customLong("push-jitter"), help: "Spreads each redelivery wait over 50% to 150% of it.")
    var pushJitter = false

    @Option(
        name: .customLong("push-retention"),
        help: "Seconds (of the simulator's clock) an unacknowledged push is redelivered; Pub/Sub's is 604800.")
    var pushRetention: Double = 604_800

    @Flag(
        name: .customLong("push-token-system-clock"),
        help:
            "Dates the pushes' OIDC tokens by the system clock, not the simulator's (for receivers under --time-scale)."
    )
    var pushTokenSystemClock = false

    @Option(name: .customLong("jwks-max-age"), help: "max-age (seconds) of GET /oauth2/v3/certs' Cache-Control.")
    var jwksMaxAge = 3600

    func run() async throws {
        guard (0...600).contains(pushMinimumBackoff), (0...600).contains(pushMaximumBackoff),
            pushMinimumBackoff <= pushMaximumBackoff
        else {
            throw ValidationError("--push-min-backoff and --push-max-backoff must be 0 to 600, the minimum first")
        }
        guard pushRetention >= 1, pushRetention <= 31 * 86_400 else {
            throw ValidationError("--push-retention must be 1 to 2678400 seconds")
        }
        guard (0...86_400).contains(jwksMaxAge) else { throw ValidationError("--jwks-max-age must be 0 to 86400") }
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
        configuration.push.endpoint = pushEndpoint
        configuration.push.subscription = pushSubscription
        configuration.push.audience = pushAudience
        configuration.push.serviceAccountEmail = pushServiceAccount
        configuration.push.minimumBackoff = pushMinimumBackoff
        configuration.push.maximumBackoff = pushMaximumBackoff
        configuration.push.jitter = pushJitter
        configuration.push.retention = pushRetention
        configuration.push.jwksMaxAge = jwksMaxAge
        configuration.push.tokenDatesFromSystemClock = pushTokenSystemClock
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
