import Logging
import Observability
import Prometheus
import ServiceLifecycle

/// `/healthz`, `/readyz` and `/metrics` as a command's service. A port that cannot be bound fails the group at start
/// with a ``ConfigurationError`` naming `metrics_port` (exit 2), before the command says it started: probes must
/// find the operations port, or the command is not running at all.
public struct OperationsService: Service {
    let server: OperationsServer
    let host: String
    let port: Int
    /// Resolved true once the port listens (nil: nobody waits for it but the server's own
    /// ``OperationsServer/waitUntilListening()``).
    let listening: OneShot<Bool>?

    public init(server: OperationsServer, host: String, port: Int, listening: OneShot<Bool>? = nil) {
        self.server = server
        self.host = host
        self.port = port
        self.listening = listening
    }

    /// The operations port of the worker or the reconciler at `host:port`: `/metrics` from `registry`, `/readyz`
    /// from `readiness`.
    public init(
        host: String, port: Int, registry: PrometheusCollectorRegistry, logger: Logger, listening: OneShot<Bool>,
        declaredMetrics: [String] = [], readiness: @escaping @Sendable () async -> Readiness
    ) {
        self.init(
            server: OperationsServer(
                configuration: OperationsServerConfiguration(host: host, port: port), registry: registry,
                logger: logger, declaredMetrics: declaredMetrics, readiness: readiness),
            host: host, port: port, listening: listening)
    }

    public func run() async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { [server] in
                do {
                    try await server.run()
                } catch is CancellationError {
                } catch {
                    // A port never bound is reported once, as the configuration error below.
                    if await server.waitUntilListening() != nil {
                        Logger(label: "verify-worker.operations").error(
                            "operations port stopped", metadata: [LogKeys.error: "\(error)"])
                    }
                }
            }
            guard await server.waitUntilListening() != nil else {
                group.cancelAll()
                throw ConfigurationError(key: "metrics_port", problem: "cannot listen on \(host):\(port) (in use?)")
            }
            listening?.resolve(true)
            try? await gracefulShutdown()
            group.cancelAll()
        }
    }
}
