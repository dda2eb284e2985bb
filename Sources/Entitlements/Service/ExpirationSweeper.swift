import Foundation
import Logging
import Messages
import Metrics
import Observability
import ServiceLifecycle

/// Publishes the expirations no verdict reports: every `interval` it looks for subscriptions whose expiry passed
/// since its last look (at start: within `lookback`), and stores an `expiration` event for each entitlement that
/// ended (``ExpirationSweep``), which the publishers then send. Stored once by `event_id`, so several instances, a
/// restart's second look and a verdict reporting the same expiry all publish it once.
public final class ExpirationSweeper: Service, Sendable {
    private let store: any EntitlementStore
    private let catalog: Catalog
    private let interval: Duration
    private let lookback: TimeInterval
    private let webhookURLs: [String]
    private let logger: Logger
    private let now: @Sendable () -> Date
    private let onEvents: @Sendable () -> Void

    public init(
        store: any EntitlementStore, catalog: Catalog, interval: Duration, lookback: TimeInterval = 86_400,
        webhookURLs: [String], logger: Logger, now: @escaping @Sendable () -> Date = { Date() },
        onEvents: @escaping @Sendable () -> Void = {}
    ) {
        self.store = store
        self.catalog = catalog
        self.interval = interval
        self.lookback = lookback
        self.webhookURLs = webhookURLs
        self.logger = logger
        self.now = now
        self.onEvents = onEvents
    }

    public func run() async throws {
        let start = now().addingTimeInterval(-lookback)
        await cancelWhenGracefulShutdown {
            var since = start
            while !Task.isCancelled {
                let until = self.now()
                do {
                    _ = try await self.sweep(since...until)
                    since = until
                } catch is CancellationError {
                    break
                } catch {
                    // The window stays open: the next round looks again from the same point.
                    self.logger.notice(
                        "entitlements: expiry sweep failed", metadata: [LogKeys.error: "\(error)"])
                }
                try? await Task.sleep(for: self.interval)
            }
        }
    }

    /// One look over `window`; returns the events that were new.
    public func sweep(_ window: ClosedRange<Date>, limit: Int = 500) async throws -> [LifecycleEvent] {
        var created: [LifecycleEvent] = []
        // Pages through the accounts in id order: each page's events are stored before the next is read.
        var after = ""
        while true {
            let accounts = try await store.accountsWithExpiries(in: window, after: after, limit: limit)
            guard let last = accounts.last else { break }
            after = last
            var events: [LifecycleEvent] = []
            for account in accounts {
                guard let record = try await store.account(account) else { continue }
                events += ExpirationSweep.events(
                    account: account, transactions: record.transactions, catalog: catalog, window: window)
            }
            created += try await store.record(events: events, webhookURLs: webhookURLs, recordedAt: now())
            if accounts.count < limit { break }
        }
        if !created.isEmpty {
            Counter(label: MetricNames.entitlementsEvents, dimensions: [("type", "expiration")])
                .increment(by: created.count)
            onEvents()
        }
        return created
    }
}
