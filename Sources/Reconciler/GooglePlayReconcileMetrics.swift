import Metrics
import Observability

/// The Google Play reconciler's metrics (`verify_reconcile_voided_*`, `verify_reconcile_play_rereads_*`,
/// `verify_reconcile_quota_spent_total`, docs/OPERATIONS.md): every series labelled `store="google_play"` and `app`
/// (the package name), beside the App Store's series, which keep their names and labels.
struct GooglePlayReconcileMetrics: Sendable {
    let labels: [(String, String)]
    let factory: any MetricsFactory
    let pages: Counter
    let found: Counter
    let rereads: Counter
    let checkpointAge: Gauge

    init(app: String, factory: any MetricsFactory = MetricsSystem.factory) {
        labels = [("store", "google_play"), ("app", app)]
        self.factory = factory
        pages = Counter(label: MetricNames.reconcileVoidedPages, dimensions: labels, factory: factory)
        found = Counter(label: MetricNames.reconcileVoidedFound, dimensions: labels, factory: factory)
        rereads = Counter(label: MetricNames.reconcilePlayRereads, dimensions: labels, factory: factory)
        checkpointAge = Gauge(label: MetricNames.reconcileVoidedCheckpointAge, dimensions: labels, factory: factory)
    }

    func sweeps(_ result: String) -> Counter {
        Counter(label: MetricNames.reconcileVoidedSweeps, dimensions: labels + [("result", result)], factory: factory)
    }

    func jobs(_ result: String) -> Counter {
        Counter(label: MetricNames.reconcileVoidedJobs, dimensions: labels + [("result", result)], factory: factory)
    }

    func quotaSpent(_ call: String) -> Counter {
        Counter(label: MetricNames.reconcileQuotaSpent, dimensions: labels + [("call", call)], factory: factory)
    }
}
