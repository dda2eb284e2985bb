import Metrics
import Observability

/// The reconciler's metrics (`verify_reconcile_*`, docs/OPERATIONS.md).
struct ReconcilerMetrics: Sendable {
    /// `[("app", bundle id)]` when the catalog lists several apps (one reconciler each), else none.
    let app: [(String, String)]
    let checkpoint: Gauge
    let leaseHeld: Gauge
    let recovered: Counter
    let unreadable: Counter
    let sweepsCompleted: Counter
    let sweepsFailed: Counter
    let sweepsAbandoned: Counter
    let corrections: Counter
    /// Where the metrics go: the process's factory, or a test's own (a process-wide registry refuses one name both
    /// with and without the `app` label, which tests running side by side would otherwise mix).
    let factory: any MetricsFactory

    init(app: String? = nil, factory: any MetricsFactory = MetricsSystem.factory) {
        let app = app.map { [("app", $0)] } ?? []
        self.app = app
        self.factory = factory
        checkpoint = Gauge(label: MetricNames.reconcileCheckpoint, dimensions: app, factory: factory)
        leaseHeld = Gauge(label: MetricNames.reconcileLeaseHeld, dimensions: app, factory: factory)
        recovered = Counter(label: MetricNames.reconcileNotificationsRecovered, dimensions: app, factory: factory)
        unreadable = Counter(label: MetricNames.reconcileNotificationsUnreadable, dimensions: app, factory: factory)
        sweepsCompleted = Counter(
            label: MetricNames.reconcileSweeps, dimensions: app + [("result", "completed")], factory: factory)
        sweepsFailed = Counter(
            label: MetricNames.reconcileSweeps, dimensions: app + [("result", "failed")], factory: factory)
        sweepsAbandoned = Counter(
            label: MetricNames.reconcileSweeps, dimensions: app + [("result", "lease_lost")], factory: factory)
        corrections = Counter(label: MetricNames.reconcileCorrections, dimensions: app, factory: factory)
    }

    func rereads(_ result: String) -> Counter {
        Counter(label: MetricNames.reconcileRereads, dimensions: app + [("result", result)], factory: factory)
    }

    func requests(_ result: String) -> Counter {
        Counter(label: MetricNames.reconcileRequests, dimensions: app + [("result", result)], factory: factory)
    }
}
