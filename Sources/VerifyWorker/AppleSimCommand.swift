import AppleSimulator
import ArgumentParser
import CodedErrors
import Foundation
import Messages

/// `verify-worker apple-sim`: runs the Apple simulator until SIGTERM or SIGINT.
struct AppleSimCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apple-sim",
        abstract: "Runs a simulated Apple (verifyReceipt, App Store Server API, receipt minting) for tests and demos.",
        discussion: """
            Prints `listening=http://HOST:PORT` once ready. Endpoints: docs/APPLE-SIMULATOR.md.
            The shared secret comes from --shared-secret-file or VERIFY_SIM_SHARED_SECRET and is never logged.
            """
    )

    @OptionGroup var listen: SimulatorListenOptions

    @Option(name: .customLong("state-dir"), help: "Directory where keys, certificates and mints persist.")
    var stateDir: String?

    @Option(name: .customLong("shared-secret-file"), help: "File holding the app's shared secret (21004 on mismatch).")
    var sharedSecretFile: String?

    @Option(
        name: .customLong("api-public-key-file"), help: "PEM P-256 public key that Server API tokens must verify with.")
    var apiPublicKeyFile: String?

    @Option(name: .customLong("app-apple-id"), help: "appAppleId in Server API answers.")
    var appAppleId: Int64 = 1_234_567_890

    @Option(
        name: .customLong("apps-catalog"),
        help: """
            A worker catalog listing apps: the simulator acts as Apple for each (its shared secret, its key's public \
            half, its app_apple_id).
            """)
    var appsCatalog: String?

    @Option(
        name: .customLong("notification-url"),
        help: "Where App Store Server Notifications V2 are posted (POST /sim/notifications/target changes it).")
    var notificationURL: String?

    @Option(
        name: .customLong("notification-time-scale"),
        help: "Divides Apple's notification retry delays (1, 12, 24, 48, 72 hours); 3600 makes them seconds.")
    var notificationTimeScale: Double = 1

    func run() async throws {
        guard notificationTimeScale > 0, notificationTimeScale.isFinite else {
            throw ValidationError("--notification-time-scale must be a positive number")
        }
        var configuration = AppleSimulatorConfiguration()
        configuration.notificationTimeScale = notificationTimeScale
        configuration.host = listen.host
        configuration.port = listen.port
        configuration.stateDirectory = stateDir.map { URL(fileURLWithPath: $0, isDirectory: true) }
        configuration.appAppleId = appAppleId
        if let sharedSecretFile {
            guard let data = FileManager.default.contents(atPath: sharedSecretFile) else {
                throw ValidationError("cannot read --shared-secret-file \(sharedSecretFile)")
            }
            configuration.sharedSecret = String(decoding: data, as: UTF8.self)
                .trimmingCharacters(in: .whitespacesAndNewlines)
        } else if let secret = ProcessInfo.processInfo.environment["VERIFY_SIM_SHARED_SECRET"], !secret.isEmpty {
            configuration.sharedSecret = secret
        }
        if let apiPublicKeyFile {
            guard let data = FileManager.default.contents(atPath: apiPublicKeyFile),
                (try? configuration.setAPIPublicKey(pem: String(decoding: data, as: UTF8.self))) != nil
            else { throw ValidationError("--api-public-key-file must hold a PEM P-256 public key") }
        }
        if let appsCatalog {
            guard let data = FileManager.default.contents(atPath: appsCatalog),
                let catalog = try? Catalog.load(json: data)
            else { throw ValidationError("--apps-catalog \(appsCatalog) is not a readable catalog") }
            do {
                configuration.apps = try SimulatedApp.apps(of: catalog, defaultAppAppleId: appAppleId)
            } catch {
                throw ValidationError("--apps-catalog: \(error.message)")
            }
        }
        let simulator = try AppleSimulator(configuration: configuration)
        if let notificationURL {
            do {
                try simulator.setNotificationTarget(notificationURL)
            } catch {
                throw ValidationError("--notification-url must be an http or https URL")
            }
        }
        try await simulator.serveUntilSignalled(command: "apple-sim", host: listen.host)
    }
}
