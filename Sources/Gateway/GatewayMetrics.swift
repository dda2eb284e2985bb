import Metrics

/// The gateway's metric names, in one place. Served in Prometheus text by `/metrics` on the operations port.
public enum GatewayMetrics {
    /// Counter `{route, status}`: requests answered, by route (`receipts`, `notifications`) and HTTP status.
    public static let requests = "verify_gateway_requests_total"
    /// Histogram `{route}`: time from the request's arrival to its answer, publish included.
    public static let requestDuration = "verify_gateway_request_duration_seconds"
    /// Counter `{route}`: jobs Kafka acknowledged.
    public static let published = "verify_gateway_jobs_published_total"
    /// Counter `{route, error}`: requests refused or failed, by error code (`missing_field`, `kafka_unavailable`…).
    public static let errors = "verify_gateway_errors_total"

    static func recordAnswer(route: String, status: Int, since start: ContinuousClock.Instant) {
        Counter(label: requests, dimensions: [("route", route), ("status", String(status))]).increment()
        Timer(label: requestDuration, dimensions: [("route", route)])
            .recordNanoseconds(nanoseconds(ContinuousClock.now - start))
    }

    static func recordPublished(route: String) {
        Counter(label: published, dimensions: [("route", route)]).increment()
    }

    static func recordError(route: String, _ error: GatewayError) {
        Counter(label: errors, dimensions: [("route", route), ("error", error.code.rawValue)]).increment()
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
