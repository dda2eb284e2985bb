import Hummingbird
import Logging
import Metrics
import Observability
import Prometheus
import Synchronization

/// Whether a process can take traffic now, and if not, why (the reasons are codes, never ids or secrets).
public struct Readiness: Sendable, Hashable {
    public var isReady: Bool
    /// Short reasons the process is not ready, e.g. `no_assignment`, `ledger_unreachable`.
    public var reasons: [String]

    public init(isReady: Bool, reasons: [String] = []) {
        self.isReady = isReady
        self.reasons = reasons
    }

    public static let ready = Readiness(isReady: true)

    public static func notReady(_ reasons: String...) -> Readiness { Readiness(isReady: false, reasons: reasons) }
}

/// How the operations port runs. Flags and `VERIFY_METRICS_…` keys of the commands set it.
public struct OperationsServerConfiguration: Sendable {
    /// Interface to bind. Default: `0.0.0.0` (a pod's port must be reachable by the kubelet and Prometheus).
    public var host: String
    /// Port to bind; 0 picks a free one, reported by ``OperationsServer/waitUntilListening()``. Default: 9464.
    public var port: Int

    public init(host: String = "0.0.0.0", port: Int = 9464) {
        self.host = host
        self.port = port
    }
}

/// The operations port every long-running command serves: `GET /healthz` (the process is alive and its event
/// loops answer), `GET /readyz` (the process can do its work now; 503 with the reasons otherwise) and
/// `GET /metrics` (everything recorded through swift-metrics, Prometheus text format).
///
/// Run it as a task next to the work; cancel the task to stop it.
public final class OperationsServer: Sendable {
    public let configuration: OperationsServerConfiguration
    private let registry: PrometheusCollectorRegistry
    private let readiness: @Sendable () async -> Readiness
    private let logger: Logger
    private let listening = OneShot<Int?>()
    /// The metrics `/metrics` declares from the start (``MetricsExposition``).
    private let declaredMetrics: [String]

    /// - Parameters:
    ///   - registry: the registry the process's metrics factory writes to (``MetricsBootstrap/registry``).
    ///   - readiness: asked on every `GET /readyz`; keep it cheap (read state, do not do I/O per probe).
    ///   - declaredMetrics: the names (``MetricNames``) of every metric the command records, declared on `/metrics`
    ///     before anything records them.
    public init(
        configuration: OperationsServerConfiguration, registry: PrometheusCollectorRegistry,
        logger: Logger, declaredMetrics: [String] = [], readiness: @escaping @Sendable () async -> Readiness
    ) {
        self.configuration = configuration
        self.registry = registry
        self.readiness = readiness
        self.logger = logger
        self.declaredMetrics = declaredMetrics
    }

    /// A server for the process's one registry (``MetricsBootstrap/registry()``, bootstrapping swift-metrics).
    public convenience init(
        configuration: OperationsServerConfiguration, logger: Logger, declaredMetrics: [String] = [],
        readiness: @escaping @Sendable () async -> Readiness
    ) {
        self.init(
            configuration: configuration, registry: MetricsBootstrap.registry(), logger: logger,
            declaredMetrics: declaredMetrics, readiness: readiness)
    }

    /// Serves until the task is cancelled.
    public func run() async throws {
        try await HTTPServing.run(
            makeRouter(), host: configuration.host, port: configuration.port, logger: logger, listening: listening
        ) { [logger] port in
            logger.notice(
                "operations: /healthz, /readyz and /metrics listening", metadata: [LogKeys.metricsPort: "\(port)"])
        }
    }

    /// The bound port once the server listens; nil if it stopped or failed before listening.
    public func waitUntilListening() async -> Int? {
        await listening.wait() ?? nil
    }

    /// `HEAD` is answered as `GET` without a body (a probe may use either); another method gets 405, another path 404.
    private func makeRouter() -> Router<BasicRequestContext> {
        let router = Router(options: .autoGenerateHeadEndpoints)
        router.add(
            middleware: RouteFallbackMiddleware(
                methods: Dictionary(uniqueKeysWithValues: Self.paths.map { ($0, [.get, .head]) })))
        Self.addRoutes(to: router, registry: registry, declaredMetrics: declaredMetrics, readiness: readiness)
        return router
    }

    /// The paths ``addRoutes(to:registry:readiness:)`` serves.
    public static let paths = ["healthz", "readyz", "metrics"]

    /// Adds `/healthz`, `/readyz` and `/metrics` to another router, for a command that serves them on its own HTTP
    /// port (the entitlement service) rather than on a separate operations port.
    public static func addRoutes<Context: RequestContext>(
        to router: Router<Context>, registry: PrometheusCollectorRegistry, declaredMetrics: [String] = [],
        readiness: @escaping @Sendable () async -> Readiness
    ) {
        router.get("healthz") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "text/plain"], body: .init(byteBuffer: ByteBuffer(string: "ok\n")))
        }
        router.get("readyz") { _, _ in
            let state = await readiness()
            let text = state.isReady ? "ready\n" : "not ready: " + state.reasons.joined(separator: ", ") + "\n"
            return Response(
                status: state.isReady ? .ok : .serviceUnavailable, headers: [.contentType: "text/plain"],
                body: .init(byteBuffer: ByteBuffer(string: text)))
        }
        router.get("metrics") { _, _ in
            let buffer = MetricsExposition.render(registry, declaring: declaredMetrics)
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                body: .init(byteBuffer: ByteBuffer(bytes: buffer)))
        }
    }
}

/// The one Prometheus registry of a process, behind swift-metrics.
public enum MetricsBootstrap {
    private static let state = Mutex<PrometheusCollectorRegistry?>(nil)

    /// Bootstraps swift-metrics with a Prometheus factory once per process and returns its registry; later calls
    /// return the same registry (swift-metrics allows one bootstrap per process).
    public static func registry() -> PrometheusCollectorRegistry {
        state.withLock { current in
            if let current { return current }
            let registry = PrometheusCollectorRegistry()
            var factory = PrometheusMetricsFactory(registry: registry)
            factory.defaultDurationHistogramBuckets = [
                .milliseconds(1), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
                .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5),
                .seconds(10), .seconds(30),
            ]
            MetricsSystem.bootstrap(factory)
            current = registry
            return registry
        }
    }
}
