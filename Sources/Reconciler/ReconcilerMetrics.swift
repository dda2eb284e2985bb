import Metrics
import Observability

/// The reconciler's metrics (`verify_reconcile_*`, docs/OPERATIONS.md).
struct ReconcilerMetrics: Sendable {
    let checkpoint = Gauge(label: MetricNames.reconcileCheckpoint)
    let leaseHeld = Gauge(label: MetricNames.reconcileLeaseHeld)
    let recovered = Counter(label: MetricNames.reconcileNotificationsRecovered)
    let unreadable = Counter(label: MetricNames.reconcileNotificationsUnreadable)
    let sweepsCompleted = Counter(label: MetricNames.reconcileSweeps, dimensions: [("result", "completed")])
    let sweepsFailed = Counter(label: MetricNames.reconcileSweeps, dimensions: [("result", "failed")])
    let sweepsAbandoned = Counter(label: MetricNames.reconcileSweeps, dimensions: [("result", "lease_lost")])

    let corrections = Counter(label: MetricNames.reconcileCorrections)

    func rereads(_ result: String) -> Counter {
        Counter(label: MetricNames.reconcileRereads, dimensions: [("result", result)])
    }

    func requests(_ result: String) -> Counter {
        Counter(label: MetricNames.reconcileRequests, dimensions: [("result", result)])
    }
}
