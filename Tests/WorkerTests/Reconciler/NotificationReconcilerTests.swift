import Foundation
import Gateway
import Logging
import Messages
import Observability
import Prometheus
import RateLimiter
import Reconciler
import Synchronization
import Testing

@testable import AppleClients
@testable import Ledger

/// `verify-worker reconcile`'s core on a manual clock, a real SQLite ledger, a fake Get
/// Notification History and a recording sink: every failed notification published once per sweep as the gateway's
/// job, pages paced at the configured share, Apple's Retry-After honoured, the checkpoint moved only by a sweep
/// that finished, and one replica at a time.
@Suite("Reconciler: notification history sweeps", .timeLimit(.minutes(2)))
struct NotificationReconcilerTests {
    typealias S = LedgerTestSupport

    /// Apple's notification history of failed deliveries: payloads by date, served 20 per page as Apple does.
    /// One request as the fake saw it.
    struct Query: Sendable {
        var body: NotificationHistoryQuery
        var paginationToken: String?
        var environment: AppleEnvironment
        var start: Date { body.startDate }
        var end: Date { body.endDate }
        var onlyFailures: Bool { body.onlyFailures }
    }

    final class FakeHistory: NotificationHistorySource, Sendable {
        struct State {
            var notifications: [(date: Date, payload: String)] = []
            var queries: [(query: Query, at: Int64)] = []
            /// Outcomes to give before answering (consumed first to last).
            var scripted: [AppleOutcome<NotificationHistoryPage>] = []
            var onRequest: (@Sendable (Int) async -> Void)?
        }
        let state = Mutex(State())
        let clock: ManualClock
        let pageSize = 20

        init(clock: ManualClock) { self.clock = clock }

        func notificationHistory(
            _ body: NotificationHistoryQuery, paginationToken: String?, environment: AppleEnvironment
        ) async throws -> AppleOutcome<NotificationHistoryPage> {
            let query = Query(body: body, paginationToken: paginationToken, environment: environment)
            let (count, hook) = state.withLock { state in
                state.queries.append((query, clock.unixMillisecondsNow))
                return (state.queries.count, state.onRequest)
            }
            await hook?(count)
            return state.withLock { state in
                if !state.scripted.isEmpty { return state.scripted.removeFirst() }
                let matching = state.notifications.filter { $0.date >= query.start && $0.date < query.end }
                let offset = Int(query.paginationToken ?? "0") ?? 0
                let page = matching.dropFirst(offset).prefix(pageSize).map(\.payload)
                let next = offset + page.count
                return .answered(
                    NotificationHistoryPage(
                        notifications: page.map { NotificationHistoryItem(signedPayload: $0) },
                        hasMore: next < matching.count, paginationToken: next < matching.count ? String(next) : nil,
                        answeredBy: environment))
            }
        }

        var queries: [(query: Query, at: Int64)] { state.withLock { $0.queries } }
    }

    final class RecordingSink: RecoveredJobSink, Sendable {
        let jobs = Mutex<[ReceiptJob]>([])
        let failing = Mutex(false)
        struct Down: Error {}

        func publish(_ job: ReceiptJob) async throws {
            if failing.withLock({ $0 }) { throw Down() }
            jobs.withLock { $0.append(job) }
        }
    }

    /// A notification's signed payload as far as the reconciler reads it (the worker verifies the signature).
    static func payload(uuid: String) -> String {
        let json = #"{"notificationType":"DID_RENEW","notificationUUID":"\#(uuid)","version":"2.0"}"#
        let body = Data(json.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        return "eyJhbGciOiJFUzI1NiJ9.\(body).c2lnbmF0dXJl"
    }

    static func uuid(_ index: Int) -> String {
        String(format: "5f0e1f2c-0000-4000-8000-%012d", index)
    }

    static func configuration() -> ReconcilerConfiguration {
        var configuration = ReconcilerConfiguration()
        configuration.requestsPerSecond = 10
        configuration.interval = .seconds(60)
        configuration.overlap = .seconds(600)
        configuration.firstLookBack = .seconds(7 * 86_400)
        configuration.leaseDuration = .seconds(30)
        return configuration
    }

    static func reconciler(
        _ store: any ReconcilerStateStore, _ history: FakeHistory, _ sink: RecordingSink, _ clock: ManualClock,
        holder: String = "replica-a", configuration: ReconcilerConfiguration = configuration()
    ) -> NotificationReconciler<ManualClock> {
        NotificationReconciler(
            configuration: configuration, store: store, source: history, sink: sink, clock: clock, holder: holder,
            logger: Logger(label: "test.reconcile"))
    }

    /// Runs `body` while moving the manual clock to each sleeper's deadline as soon as one sleeps: time passes only
    /// when the reconciler waits, never by a guessed real-time sleep.
    static func driving<T: Sendable>(_ clock: ManualClock, _ body: @Sendable @escaping () async -> T) async -> T {
        let driver = Task {
            while !Task.isCancelled {
                if let next = clock.nextDeadline { clock.advance(to: next) }
                await Task.yield()
            }
        }
        defer { driver.cancel() }
        return await body()
    }

    static func wall(_ clock: ManualClock) -> Date {
        Date(timeIntervalSince1970: Double(clock.unixMillisecondsNow) / 1000)
    }

    @Test("45 failed notifications: 3 pages paced at the share, 45 jobs as the gateway makes them, checkpoint moved")
    func sweepPublishesEveryNotification() async throws {
        try await S.withLedger(.sqlite) { ledger, _ in
            let store = ledger
            let clock = ManualClock()
            let history = FakeHistory(clock: clock)
            let sink = RecordingSink()
            let now = Self.wall(clock)
            history.state.withLock { state in
                state.notifications = (0..<45).map {
                    (now.addingTimeInterval(-Double(3_600 * ($0 + 1))), Self.payload(uuid: Self.uuid($0)))
                }
                // Older than the first look-back: not asked for.
                state.notifications.append((now.addingTimeInterval(-8 * 86_400), Self.payload(uuid: Self.uuid(99))))
            }
            let reconciler = Self.reconciler(store, history, sink, clock)
            let result = await Self.driving(clock) { await reconciler.sweep() }

            #expect(result == .completed(checkpoint: now, pages: 3, published: 45))
            let jobs = sink.jobs.withLock { $0 }
            #expect(Set(jobs.map(\.jobID)) == Set((0..<45).map { "apple-notification-" + Self.uuid($0) }))
            // The job the gateway makes of the same notification: same id, same content, so it is decided once.
            let intake = JobIntake(notificationAccountID: "apple-notification")
            let viaGateway = try intake.job(
                fromNotificationJSON: Array(#"{"signedPayload":"\#(Self.payload(uuid: Self.uuid(7)))"}"#.utf8))
            let recovered = try #require(jobs.first { $0.jobID == viaGateway.jobID })
            #expect(recovered.contentDigest == viaGateway.contentDigest)
            #expect(recovered.accountID == "apple-notification")
            // onlyFailures, the window from the first look-back to now, pages by Apple's token, 100 ms apart at 10/s.
            let queries = history.queries
            #expect(queries.map(\.query.onlyFailures) == [true, true, true])
            #expect(queries.map(\.query.paginationToken) == [nil, "20", "40"])
            #expect(queries[0].query.start == now.addingTimeInterval(-7 * 86_400))
            #expect(queries[0].query.end == now)
            #expect(queries[1].at - queries[0].at >= 100)
            #expect(queries[2].at - queries[1].at >= 100)
            // The next replica (or sweep) goes on from the checkpoint, less the overlap.
            let lease = try await store.acquireReconcilerLease(
                name: "notification-history", holder: "replica-a", now: now, duration: .seconds(30))
            #expect(lease?.checkpoint == now)
        }
    }

    @Test("the next sweep starts at the checkpoint less the overlap and sees only what failed since")
    func secondSweepFromCheckpoint() async throws {
        try await S.withLedger(.sqlite) { ledger, _ in
            let store = ledger
            let clock = ManualClock()
            let history = FakeHistory(clock: clock)
            let sink = RecordingSink()
            let reconciler = Self.reconciler(store, history, sink, clock)
            let first = await Self.driving(clock) { await reconciler.sweep() }
            guard case .completed(let checkpoint, _, 0) = first else {
                Issue.record("first sweep: \(first)")
                return
            }
            clock.advance(by: .seconds(3_600))
            history.state.withLock {
                $0.notifications = [(Self.wall(clock).addingTimeInterval(-60), Self.payload(uuid: Self.uuid(1)))]
            }
            let second = await Self.driving(clock) { await reconciler.sweep() }
            #expect(second == .completed(checkpoint: Self.wall(clock), pages: 1, published: 1))
            #expect(history.queries.last?.query.start == checkpoint.addingTimeInterval(-600))
        }
    }

    @Test("a notification found again by overlapping sweeps is published again but counted as recovered once")
    func recoveredCountedOnce() async throws {
        // A registry of the test's own: the process's is shared with every test running beside this one.
        let registry = PrometheusCollectorRegistry()
        try await S.withLedger(.sqlite) { ledger, _ in
            let store = ledger
            let clock = ManualClock()
            let history = FakeHistory(clock: clock)
            let sink = RecordingSink()
            let reconciler = NotificationReconciler(
                configuration: Self.configuration(), store: store, source: history, sink: sink, clock: clock,
                holder: "replica-a", logger: Logger(label: "test.reconcile"),
                metricsFactory: PrometheusMetricsFactory(registry: registry))
            func recovered() -> String? {
                registry.emitToString().split(separator: "\n").first {
                    $0.hasPrefix(MetricNames.reconcileNotificationsRecovered + " ")
                }.map { String($0.split(separator: " ").last ?? "") }
            }
            // Two notifications still in Apple's list of failures at each of three sweeps, 60 s apart: each sweep's
            // window starts 600 s before the last one's end, so every sweep finds both again.
            history.state.withLock {
                $0.notifications = [1, 2].map { index in
                    (Self.wall(clock).addingTimeInterval(-Double(index)), Self.payload(uuid: Self.uuid(index)))
                }
            }
            for _ in 0..<3 {
                let result = await Self.driving(clock) { await reconciler.sweep() }
                guard case .completed = result else {
                    Issue.record("sweep: \(result)")
                    return
                }
                clock.advance(by: .seconds(60))
            }
            #expect(sink.jobs.withLock { $0.count } == 6, "each sweep publishes what it finds")
            #expect(recovered() == "2", "\(String(describing: recovered()))")
            // A third notification later on: one more.
            history.state.withLock {
                $0.notifications.append((Self.wall(clock).addingTimeInterval(-1), Self.payload(uuid: Self.uuid(3))))
            }
            _ = await Self.driving(clock) { await reconciler.sweep() }
            #expect(recovered() == "3", "\(String(describing: recovered()))")
        }
    }

    @Test("429 with Retry-After: the same page again after that long; 9 in a row fail the sweep, checkpoint unmoved")
    func retryAfterHonoured() async throws {
        try await S.withLedger(.sqlite) { ledger, _ in
            let store = ledger
            let clock = ManualClock()
            let history = FakeHistory(clock: clock)
            let sink = RecordingSink()
            let now = Self.wall(clock)
            let tooMany = AppleOutcome<NotificationHistoryPage>.retryable(
                AppleRetryAdvice(reason: .httpStatus(429), retryAfter: .seconds(5)))
            history.state.withLock { state in
                state.notifications = (0..<25).map {
                    (now.addingTimeInterval(-Double($0 + 1)), Self.payload(uuid: Self.uuid($0)))
                }
            }
            let reconciler = Self.reconciler(store, history, sink, clock)
            // Page 1, then two 429s, then page 2.
            history.state.withLock { state in
                state.onRequest = { count in
                    if count == 2 {
                        history.state.withLock { $0.scripted = [tooMany, tooMany] }
                    }
                }
            }
            let result = await Self.driving(clock) { await reconciler.sweep() }
            #expect(result == .completed(checkpoint: now, pages: 2, published: 25))
            let queries = history.queries
            #expect(queries.map(\.query.paginationToken) == [nil, "20", "20", "20"])
            #expect(queries[2].at - queries[1].at >= 5_000)
            #expect(queries[3].at - queries[2].at >= 5_000)

            // Apple keeps answering 429: the sweep gives up and the checkpoint stays.
            clock.advance(by: .seconds(120))
            history.state.withLock { state in
                state.onRequest = nil
                state.scripted = Array(repeating: tooMany, count: 20)
            }
            let failed = await Self.driving(clock) { await reconciler.sweep() }
            guard case .failed = failed else {
                Issue.record("expected a failed sweep, got \(failed)")
                return
            }
            let lease = try await store.acquireReconcilerLease(
                name: "notification-history", holder: "replica-a", now: Self.wall(clock), duration: .seconds(30))
            #expect(lease?.checkpoint == now)
        }
    }

    @Test("Kafka down: the sweep fails and the checkpoint stays; the next sweep publishes the same jobs again")
    func sinkFailureKeepsCheckpoint() async throws {
        try await S.withLedger(.sqlite) { ledger, _ in
            let store = ledger
            let clock = ManualClock()
            let history = FakeHistory(clock: clock)
            let sink = RecordingSink()
            let now = Self.wall(clock)
            history.state.withLock { state in
                state.notifications = [(now.addingTimeInterval(-10), Self.payload(uuid: Self.uuid(3)))]
                state.notifications.append((now.addingTimeInterval(-20), "not.a-jws"))
            }
            let reconciler = Self.reconciler(store, history, sink, clock)
            sink.failing.withLock { $0 = true }
            let failed = await Self.driving(clock) { await reconciler.sweep() }
            guard case .failed = failed else {
                Issue.record("expected a failed sweep, got \(failed)")
                return
            }
            sink.failing.withLock { $0 = false }
            clock.advance(by: .seconds(60))
            let again = await Self.driving(clock) { await reconciler.sweep() }
            // The unreadable payload is skipped, never a reason to stop; the window still starts at the first look-back.
            #expect(again == .completed(checkpoint: Self.wall(clock), pages: 1, published: 1))
            #expect(history.queries.last?.query.start == Self.wall(clock).addingTimeInterval(-7 * 86_400))
            #expect(sink.jobs.withLock { $0.map(\.jobID) } == ["apple-notification-" + Self.uuid(3)])
        }
    }

    @Test("a replica that lost its lease mid-sweep stops without moving the checkpoint; the others wait their turn")
    func oneReplicaAtATime() async throws {
        try await S.withLedger(.sqlite) { ledger, _ in
            let store = ledger
            let clock = ManualClock()
            let history = FakeHistory(clock: clock)
            let sink = RecordingSink()
            let now = Self.wall(clock)
            history.state.withLock { state in
                state.notifications = (0..<30).map {
                    (now.addingTimeInterval(-Double($0 + 1)), Self.payload(uuid: Self.uuid($0)))
                }
            }
            let a = Self.reconciler(store, history, sink, clock, holder: "replica-a")
            // Page 2 of a's sweep is answered 429 with a Retry-After longer than a's 30 s lease, and replica b takes
            // the lease once it expired (b's own clock reads 31 s later).
            history.state.withLock { state in
                state.onRequest = { count in
                    guard count == 2 else { return }
                    history.state.withLock {
                        $0.scripted = [.retryable(AppleRetryAdvice(reason: .httpStatus(429), retryAfter: .seconds(40)))]
                    }
                    _ = try? await store.acquireReconcilerLease(
                        name: "notification-history", holder: "replica-b", now: now.addingTimeInterval(31),
                        duration: .seconds(30))
                }
            }
            let result = await Self.driving(clock) { await a.sweep() }
            #expect(result == .leaseLost)
            // a asked for page 2 once, then stopped before asking again on a lease it no longer held.
            #expect(history.queries.map(\.query.paginationToken) == [nil, "20"])
            // While b holds the lease, another replica does nothing at all.
            history.state.withLock { $0.onRequest = nil }
            let c = Self.reconciler(store, history, sink, clock, holder: "replica-c")
            #expect(await c.sweep() == .notLeader)
            #expect(history.queries.count == 2)
            // a never moved the checkpoint: b, the holder, finds none.
            let lease = try await store.acquireReconcilerLease(
                name: "notification-history", holder: "replica-b", now: now.addingTimeInterval(45),
                duration: .seconds(30))
            #expect(lease == ReconcilerLease(expiresAt: now.addingTimeInterval(75), checkpoint: nil))
        }
    }

    @Test("the window: the first look-back, then checkpoint less overlap, never before Apple's 180 days")
    func windowBounds() async throws {
        try await S.withLedger(.sqlite) { ledger, _ in
            let store = ledger
            let clock = ManualClock()
            let history = FakeHistory(clock: clock)
            var configuration = Self.configuration()
            configuration.firstLookBack = .seconds(400 * 86_400)
            let reconciler = Self.reconciler(store, history, RecordingSink(), clock, configuration: configuration)
            let now = Self.wall(clock)
            _ = await Self.driving(clock) { await reconciler.sweep() }
            let start = try #require(history.queries.first?.query.start)
            #expect(start == now.addingTimeInterval(-180 * 86_400 + 3_600))
        }
    }

    @Test("Apple says more pages follow but gives no new token: the sweep fails rather than loop")
    func missingPaginationToken() async throws {
        try await S.withLedger(.sqlite) { ledger, _ in
            let store = ledger
            let clock = ManualClock()
            let history = FakeHistory(clock: clock)
            history.state.withLock {
                $0.scripted = [
                    .answered(
                        NotificationHistoryPage(
                            notifications: [], hasMore: true, paginationToken: nil, answeredBy: .production))
                ]
            }
            let reconciler = Self.reconciler(store, history, RecordingSink(), clock)
            let result = await Self.driving(clock) { await reconciler.sweep() }
            guard case .failed = result else {
                Issue.record("expected a failed sweep, got \(result)")
                return
            }
            #expect(history.queries.count == 1)
        }
    }
}
