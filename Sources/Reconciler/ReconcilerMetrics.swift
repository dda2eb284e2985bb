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

    init(app: String? = nil) {
        let app = app.map { [("app", $0)] } ?? []
        self.app = app
        checkpoint = Gauge(label: MetricNames.reconcileCheckpoint, dimensions: app)
        leaseHeld = Gauge(label: MetricNames.reconcileLeaseHeld, dimensions: app)
        recovered = Counter(label: MetricNames.reconcileNotificationsRecovered, dimensions: app)
        unreadable = Counter(label: MetricNames.reconcileNotificationsUnreadable, dimensions: app)
        sweepsCompleted = Counter(label: MetricNames.reconcileSweeps, dimensions: app + [("result", "completed")])
        sweepsFailed = Counter(label: MetricNames.reconcileSweeps, dimensions: app + [("result", "failed")])
        sweepsAbandoned = Counter(label: MetricNames.reconcileSweeps, dimensions: app + [("result", "lease_lost")])
        corrections = Counter(label: MetricNames.reconcileCorrections, dimensions: app)
    }

    func rereads(_ result: String) -> Counter {
        Counter(label: MetricNames.reconcileRereads, dimensions: app + [("result", result)])
    }

    func requests(_ result: String) -> Counter {
        Counter(label: MetricNames.reconcileRequests, dimensions: app + [("result", result)])
    }
}
