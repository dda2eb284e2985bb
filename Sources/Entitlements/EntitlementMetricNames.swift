/// Every metric of the entitlement service, in one table (names are part of the operator's contract: dashboards
/// and alerts use them; docs/ENTITLEMENTS.md lists them).
public enum EntitlementMetricNames {
    /// Counter, `result` = applied, no_change, stale, duplicate, ignored: messages of the verdicts topic projected.
    public static let verdicts = "verify_entitlements_verdicts_total"
    /// Counter, `code`: messages ignored because they could not be understood (unknown schema, outcome, …).
    public static let ignored = "verify_entitlements_ignored_total"
    /// Timer: one batch, from the store's load to its commit.
    public static let batchDuration = "verify_entitlements_batch_duration_seconds"
    /// Counter, `error`: batches that failed and were retried (the store was down or busy).
    public static let storeErrors = "verify_entitlements_store_errors_total"
    /// Gauge: seconds between now and the Kafka timestamp of the newest verdict applied (visibility delay).
    public static let lagSeconds = "verify_entitlements_lag_seconds"
    /// Counter, `type`: lifecycle events created.
    public static let events = "verify_entitlements_events_total"
    /// Counter, `result` = published, failed: lifecycle events sent to the events topic.
    public static let eventsPublished = "verify_entitlements_events_published_total"
    /// Counter, `result` = delivered, failed, given_up: webhook attempts.
    public static let webhooks = "verify_entitlements_webhook_attempts_total"
    /// Counter, `route`, `status`: API and console requests.
    public static let requests = "verify_entitlements_requests_total"
    /// Timer, `route`: API request duration.
    public static let requestDuration = "verify_entitlements_request_duration_seconds"
    /// Counter: requests refused for a missing or wrong token.
    public static let authenticationFailures = "verify_entitlements_authentication_failures_total"
}
