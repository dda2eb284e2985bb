import AppleClients
import Foundation
import Messages

/// One request of App Store Server API Get Notification History: a time span, Apple's pagination token for the
/// next page, and whether to list only the notifications Apple failed to deliver.
public struct NotificationHistoryQuery: Sendable, Hashable {
    public var environment: AppleEnvironment
    public var start: Date
    public var end: Date
    public var paginationToken: String?
    public var onlyFailures: Bool

    public init(
        environment: AppleEnvironment, start: Date, end: Date, paginationToken: String? = nil,
        onlyFailures: Bool = true
    ) {
        self.environment = environment
        self.start = start
        self.end = end
        self.paginationToken = paginationToken
        self.onlyFailures = onlyFailures
    }
}

/// One page of Get Notification History: the notifications' signed payloads, as Apple sent them (the reconciler
/// verifies none of them: the worker does, as it does for the gateway's).
public struct NotificationHistoryPage: Sendable, Hashable {
    public var signedPayloads: [String]
    /// Whether another page follows (ask again with ``paginationToken``).
    public var hasMore: Bool
    public var paginationToken: String?

    public init(signedPayloads: [String], hasMore: Bool, paginationToken: String?) {
        self.signedPayloads = signedPayloads
        self.hasMore = hasMore
        self.paginationToken = paginationToken
    }
}

/// Where the reconciler reads Apple's notification history: the App Store Server API client in production, a fake
/// in tests. One call is one request to Apple (no retries inside: the reconciler paces and retries).
public protocol NotificationHistorySource: Sendable {
    func notificationHistory(_ query: NotificationHistoryQuery) async throws -> AppleOutcome<NotificationHistoryPage>
}

/// Where the reconciler publishes the jobs it recovers: the jobs topic, as the gateway publishes.
public protocol RecoveredJobSink: Sendable {
    /// Returns once the job is durably in the jobs topic (a delivery report with an offset).
    func publish(_ job: ReceiptJob) async throws
}
