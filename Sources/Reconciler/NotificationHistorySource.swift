import AppleClients
import Messages

/// Where the reconciler reads Apple's notification history: ``AppStoreServerAPIClient`` in production (its
/// Get Notification History), a fake in tests. One call is one request to Apple (no retries inside: the reconciler
/// paces and retries).
public protocol NotificationHistorySource: Sendable {
    func notificationHistory(
        _ query: NotificationHistoryQuery, paginationToken: String?, environment: AppleEnvironment
    ) async throws -> AppleOutcome<NotificationHistoryPage>
}

extension AppStoreServerAPIClient: NotificationHistorySource {}

/// Where the reconciler publishes the jobs it recovers: the jobs topic, as the gateway publishes.
public protocol RecoveredJobSink: Sendable {
    /// Returns once the job is durably in the jobs topic (a delivery report with an offset).
    func publish(_ job: ReceiptJob) async throws
}
