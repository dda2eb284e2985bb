import Foundation
import Kafka
import Logging
import Metrics
import Observability
import ServiceLifecycle
import Synchronization

/// Publishes the lifecycle events the projection stored (the outbox) to `entitlement-events`, key = account id,
/// then marks them published. Woken after each batch that created events, and every second in case a wake-up was
/// missed or an earlier attempt failed; an event is stored before it is published, so a crash in between
/// publishes it after the restart (with the same `event_id`: consumers de-duplicate on it).
///
/// It runs beside the projection and never holds it up: a Kafka outage only delays events.
public final class EventPublisher: Service, Sendable {
    private let producer: KafkaProducer
    private let topic: String
    private let store: any EntitlementStore
    private let logger: Logger
    private let wake = WakeSignal()
    private let now: @Sendable () -> Date

    public init(
        producer: KafkaProducer, topic: String, store: any EntitlementStore, logger: Logger,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.producer = producer
        self.topic = topic
        self.store = store
        self.logger = logger
        self.now = now
    }

    /// Asks for a publishing round soon.
    public func poke() { wake.signal() }

    public func run() async throws {
        let stopping = Atomic<Bool>(false)
        let wake = self.wake
        await withGracefulShutdownHandler {
            // On graceful shutdown the projection has stopped already (it comes later in the group): one last round
            // publishes what it stored, then the producer is flushed.
            await wake.rounds(
                logger: self.logger, failure: "entitlements: publishing events failed; retrying",
                stop: { stopping.load(ordering: .acquiring) }
            ) { try await self.publishRound() }
        } onGracefulShutdown: {
            stopping.store(true, ordering: .releasing)
            wake.signal()
        }
        await producer.shutdown(timeout: .seconds(10))
    }

    /// Publishes one page of unpublished events; returns how many were published.
    func publishRound(limit: Int = 500) async throws -> Int {
        let events = try await store.unpublishedEvents(limit: limit)
        guard !events.isEmpty else { return 0 }
        // One task per account, sending its events one after another: per-account order, accounts in parallel.
        var byAccount: [String: [LifecycleEvent]] = [:]
        for event in events { byAccount[event.accountID, default: []].append(event) }
        let producer = self.producer
        let topic = self.topic
        let published = try await withThrowingTaskGroup(of: [String].self) { group in
            for (account, list) in byAccount {
                group.addTask {
                    var sent: [String] = []
                    for event in list {
                        let record = KafkaProducerRecord(
                            topic: topic, key: Array(account.utf8), value: event.json,
                            headers: [KafkaHeader(name: "event_id", value: Array(event.eventID.utf8))])
                        do {
                            _ = try await producer.sendConfirmed(record)
                            sent.append(event.eventID)
                        } catch {
                            // Stop this account here: a later event must not overtake the one that failed.
                            Counter(label: MetricNames.entitlementsEventsPublished, dimensions: [("result", "failed")])
                                .increment()
                            break
                        }
                    }
                    return sent
                }
            }
            var all: [String] = []
            for try await sent in group { all += sent }
            return all
        }
        if !published.isEmpty {
            try await store.markPublished(published, at: now())
            Counter(label: MetricNames.entitlementsEventsPublished, dimensions: [("result", "published")])
                .increment(by: published.count)
        }
        if published.count < events.count {
            throw KafkaError(code: .timedOut, message: "some events were not acknowledged", isRetryable: true)
        }
        return published.count
    }
}

/// A wake-up that is not lost when it comes before the wait, with a timeout.
final class WakeSignal: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
    }
    private let state = Mutex(State())

    func signal() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.pending = true
            return nil
        }
        waiter?.resume()
    }

    /// Runs `round` again while it does work, then waits for the next signal (at most a second), until the task is
    /// cancelled or `stop` says so; a failed round is logged as `failure` and retried at the next wake-up.
    func rounds(
        logger: Logger, failure: Logger.Message, stop: () -> Bool = { false }, _ round: () async throws -> Int
    ) async {
        while !Task.isCancelled {
            do {
                while try await round() > 0 {}
            } catch is CancellationError {
                break
            } catch {
                logger.notice(failure, metadata: [LogKeys.error: "\(error)"])
            }
            if stop() { break }
            await wait(timeout: .seconds(1))
        }
    }

    /// Returns at the next signal (at once if one is pending), after `timeout`, or when the task is cancelled.
    func wait(timeout: Duration) async {
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            self?.signal()
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now = state.withLock { state -> Bool in
                    if state.pending || Task.isCancelled {
                        state.pending = false
                        return true
                    }
                    state.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            self.signal()
        }
        timer.cancel()
        state.withLock { $0.pending = false }
    }
}
