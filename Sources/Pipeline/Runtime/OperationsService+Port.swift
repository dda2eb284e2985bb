import Logging
import Operations
import Prometheus

extension OperationsService {
    /// The operations port of the worker or the reconciler at `host:port`: `/metrics` from `registry`, `/readyz`
    /// from `readiness`.
    init(
        host: String, port: Int, registry: PrometheusCollectorRegistry, logger: Logger, listening: OneShot<Bool>,
        declaredMetrics: [String] = [], readiness: @escaping @Sendable () async -> Readiness
    ) {
        self.init(
            server: OperationsServer(
                configuration: OperationsServerConfiguration(host: host, port: port), registry: registry,
                logger: logger, declaredMetrics: declaredMetrics, readiness: readiness),
            host: host, port: port, listening: listening)
    }
}
