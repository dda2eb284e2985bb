import Hummingbird
import Logging

/// How the entitlement API and the operations port run their Hummingbird server: `listening` gets the bound port,
/// or nil once the server ends without one.
public enum HTTPServing {
    /// Serves until graceful shutdown or cancellation; `started` is told the bound port first.
    public static func run<Routes: HTTPResponderBuilder>(
        _ routes: Routes, host: String, port: Int, backlog: Int = 256, logger: Logger, listening: OneShot<Int?>,
        started: @escaping @Sendable (Int) -> Void
    ) async throws where Routes.Responder.Context: InitializableFromSource<ApplicationRequestContextSource> {
        // Hummingbird logs its own cancellation at error level when the task ends; failures to bind are thrown.
        var serverLogger = logger
        serverLogger.logLevel = .critical
        let application = Application(
            router: routes,
            configuration: .init(address: .hostname(host, port: port), serverName: nil, backlog: backlog),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? 0
                started(port)
                listening.resolve(port)
            },
            logger: serverLogger)
        do {
            try await application.run()
            listening.resolve(nil)
        } catch {
            listening.resolve(nil)
            throw error
        }
    }
}
