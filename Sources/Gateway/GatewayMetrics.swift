import Metrics
import Observability

/// Records the gateway's metrics (their names are in `MetricNames`). Served in Prometheus text by `/metrics` on the
/// operations port.
public enum GatewayMetrics {

    static func recordAnswer(route: String, status: Int, since start: ContinuousClock.Instant) {
        Counter(label: MetricNames.gatewayRequests, dimensions: [("route", route), ("status", String(status))])
            .increment()
        Timer(label: MetricNames.gatewayRequestDuration, dimensions: [("route", route)])
            .recordNanoseconds(nanoseconds(ContinuousClock.now - start))
    }

    static func recordPublished(route: String) {
        Counter(label: MetricNames.gatewayPublished, dimensions: [("route", route)]).increment()
    }

    static func recordError(route: String, _ error: GatewayError) {
        Counter(label: MetricNames.gatewayErrors, dimensions: [("route", route), ("error", error.code.rawValue)])
            .increment()
    }

    static func recordPush(outcome: String) {
        Counter(label: MetricNames.gatewayPushes, dimensions: [("outcome", outcome)]).increment()
    }

    static func recordDiscarded(reason: String) {
        Counter(label: MetricNames.gatewayNotificationsDiscarded, dimensions: [("reason", reason)]).increment()
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
