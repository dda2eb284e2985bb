import Decision
import Foundation
import Ledger
import Logging
import Messages
import Observability
import Prometheus
import RateLimiter
import StoreHTTP
import Synchronization
import Testing
import _CryptoExtras

@testable import GooglePlayClients
@testable import Reconciler

/// The Google Play half of `verify-worker reconcile` on a manual clock, a real ledger (both backends where the ledger
/// matters), a stub Voided Purchases API and a recording sink: every voided order one job (`google-play-voided-
/// <orderId>`, keyed by its token), every page read, the checkpoint moved only once every job is delivered, a
/// restart reading the same window again, Google's 30 days never overstepped, the quota share held in every wall
/// minute, and re-read jobs for the Play subscriptions about to change.
@Suite("Reconciler: Google Play voided purchases and re-reads", .timeLimit(.minutes(2)))
struct GooglePlayVoidedSweepTests {
    typealias S = LedgerTestSupport
    typealias Sweeps = NotificationReconcilerTests
    static let package = "com.example.play"

    /// Google's voided purchases of one package, each under the time Google saw it voided, served `pageSize` a page
    /// by token as Google does.
    final class StubVoided: VoidedPurchaseSource, Sendable {
        struct Query: Sendable {
            var query: GooglePlayVoidedPurchasesQuery
            var at: Int64
        }
        struct State {
            var records: [(seen: Date, record: GooglePlayVoidedPurchase)] = []
            var queries: [Query] = []
            var scripted: [GooglePlayOutcome<GooglePlayVoidedPurchasesPage>] = []
        }
        let state = Mutex(State())
        let clock: ManualClock
        let pageSize: Int

        init(clock: ManualClock, pageSize: Int = 1_000) {
            self.clock = clock
            self.pageSize = pageSize
        }

        func listVoidedPurchases(
            _ query: GooglePlayVoidedPurchasesQuery
        ) async -> GooglePlayOutcome<GooglePlayVoidedPurchasesPage> {
            state.withLock { state in
                state.queries.append(Query(query: query, at: clock.unixMillisecondsNow))
                if !state.scripted.isEmpty { return state.scripted.removeFirst() }
                let matching = state.records.filter { $0.seen >= query.startTime && $0.seen <= query.endTime }
                let offset = Int(query.pageToken ?? "0") ?? 0
                let page = matching.dropFirst(offset).prefix(pageSize).map(\.record)
                let next = offset + page.count
                return .answered(
                    GooglePlayVoidedPurchasesPage(
                        voidedPurchases: page, nextPageToken: next < matching.count ? String(next) : nil))
            }
        }

        var queries: [Query] { state.withLock { $0.queries } }
    }

    /// A sink whose `failOn` job fails once (Kafka refused its delivery).
    final class FlakySink: RecoveredJobSink, Sendable {
        let jobs = Mutex<[ReceiptJob]>([])
        let failOn = Mutex<String?>(nil)
        struct Refused: Error {}

        func publish(_ job: ReceiptJob) async throws {
            let fail = failOn.withLock { failOn -> Bool in
                guard failOn == job.jobID else { return false }
                failOn = nil
                return true
            }
            if fail { throw Refused() }
            jobs.withLock { $0.append(job) }
        }

        var jobIDs: Set<String> { Set(jobs.withLock { $0.map(\.jobID) }) }
    }

    static func record(_ index: Int, partial: Bool = false) -> GooglePlayVoidedPurchase {
        GooglePlayVoidedPurchase(
            orderID: "GPA.0000-0000-0000-\(String(format: "%05d", index))", purchaseToken: "token-\(index)",
            purchaseTimeMillis: 1_766_000_000_000, voidedTimeMillis: 1_767_000_000_000 + Int64(index), voidedSource: 0,
            voidedReason: 1, voidedQuantity: partial ? 1 : nil)
    }

    /// The `voidedPurchaseNotification` a job carries, read as the workers read it.
    static func voided(_ job: ReceiptJob) throws -> DeveloperNotification.VoidedPurchase? {
        guard case .googlePlayNotification(let proof) = job.proof, let text = proof.notification else { return nil }
        let notification = try DeveloperNotification.parse(text)
        #expect(notification.packageName == package && proof.packageName == package)
        guard case .voidedPurchase(let voided) = notification.kind else { return nil }
        return voided
    }

    static func sweep(
        _ store: any ReconcilerStateStore, _ source: StubVoided, _ sink: FlakySink, _ clock: ManualClock,
        callsPerMinute: Int = 1_000, holder: String = "replica-a",
        productType: @escaping @Sendable (String) async -> Int? = { _ in nil }
    ) -> GooglePlayVoidedSweep<ManualClock> {
        GooglePlayVoidedSweep(
            packageName: package, settings: GooglePlayReconcileSettings(), store: store, source: source, sink: sink,
            quota: GooglePlayQuotaShare(callsPerMinute: callsPerMinute, clock: clock), clock: clock, holder: holder,
            logger: Logger(label: "test.voided"), productType: productType)
    }

    @Test("2,500 voided orders over 3 pages: one job per order, its id from the order, its key from the token")
    func pagesBecomeJobs() async throws {
        try await S.withLedger(.sqlite) { ledger, _ in
            let clock = ManualClock()
            let now = Sweeps.wall(clock)
            let source = StubVoided(clock: clock)
            source.state.withLock { state in
                state.records = (0..<2_500).map { (now.addingTimeInterval(-Double(3_600 + $0)), Self.record($0)) }
                // Google lists an order twice (a subscription's refund and its revocation): one job.
                state.records.append((now.addingTimeInterval(-7_200), Self.record(7)))
            }
            let sink = FlakySink()
            let sweep = Self.sweep(ledger, source, sink, clock) { $0 == "token-1" ? 1 : nil }
            let result = await Sweeps.driving(clock) { await sweep.sweep() }
            guard case .completed(let checkpoint, let pages, let published) = result else {
                Issue.record("expected a completed sweep, got \(result)")
                return
            }
            #expect(pages == 3 && published == 2_500)
            #expect(source.queries.count == 3, "one call per page")
            #expect(source.queries.map(\.query.pageToken) == [nil, "1000", "2000"])
            #expect(sink.jobIDs.count == 2_500)
            #expect(sink.jobIDs.contains("google-play-voided-GPA.0000-0000-0000-00007"))
            let job = try #require(sink.jobs.withLock { $0.first { $0.jobID.hasSuffix("-00001") } })
            #expect(job.accountID == "google-play-notification")
            #expect(String(decoding: job.messageKey, as: UTF8.self) == "google-play-notification/token-1")
            // The notification Google would have sent: the ledger knows token-1 as a subscription; a full refund.
            #expect(
                try Self.voided(job)
                    == .init(
                        purchaseToken: "token-1", orderID: "GPA.0000-0000-0000-00001", productType: 1, refundType: 1))
            // The first sweep looked back Google's 30 days (less the margin), and its end is the checkpoint.
            let first = try #require(source.queries.first?.query)
            #expect(first.startTime > now.addingTimeInterval(-30 * 86_400))
            #expect(first.startTime < now.addingTimeInterval(-29 * 86_400))
            let lease = try await ledger.acquireReconcilerLease(
                name: "google-play-voided/\(Self.package)", holder: "replica-a", now: now, duration: .seconds(30))
            #expect(lease?.checkpoint.map { abs($0.timeIntervalSince(checkpoint)) < 0.002 } == true)
            // The next sweep starts at the checkpoint less the overlap.
            clock.advance(by: .seconds(60))
            _ = await Sweeps.driving(clock) { await sweep.sweep() }
            let next = try #require(source.queries.last?.query)
            #expect(abs(next.startTime.timeIntervalSince(checkpoint.addingTimeInterval(-600))) < 0.002)
        }
    }

    @Test(
        "a delivery that fails leaves the checkpoint; a restarted reconciler reads the window again and delivers all",
        arguments: LedgerBackend.allCases)
    func checkpointOnlyAfterDelivery(_ backend: LedgerBackend) async throws {
        try await S.withLedger(backend) { ledger, _ in
            let clock = ManualClock()
            let now = Sweeps.wall(clock)
            let source = StubVoided(clock: clock, pageSize: 10)
            source.state.withLock { state in
                state.records = (0..<25).map { (now.addingTimeInterval(-Double(600 + $0)), Self.record($0)) }
            }
            let sink = FlakySink()
            sink.failOn.withLock { $0 = "google-play-voided-GPA.0000-0000-0000-00017" }
            let name = "google-play-voided/\(Self.package)"
            let failed = await Sweeps.driving(clock) { await Self.sweep(ledger, source, sink, clock).sweep() }
            guard case .failed = failed else {
                Issue.record("expected a failed sweep, got \(failed)")
                return
            }
            // The checkpoint did not move: the replica that takes over sees none.
            clock.advance(by: .seconds(120))
            let peek = try await ledger.acquireReconcilerLease(
                name: name, holder: "replica-b", now: Sweeps.wall(clock), duration: .seconds(1))
            #expect(peek?.checkpoint == nil)
            try await ledger.releaseReconcilerLease(name: name, holder: "replica-b", now: Sweeps.wall(clock))
            // A restart (a new reconciler on the same ledger) reads the same window from its start again.
            let restarted = Self.sweep(ledger, source, sink, clock, holder: "replica-c")
            let result = await Sweeps.driving(clock) { await restarted.sweep() }
            guard case .completed(_, let pages, let published) = result else {
                Issue.record("expected a completed sweep, got \(result)")
                return
            }
            #expect(pages == 3 && published == 25)
            #expect(sink.jobIDs.count == 25, "every order delivered, the failed one included")
            let starts = Set(source.queries.map { Int64($0.query.startTime.timeIntervalSince1970) })
            #expect(starts.count == 2 && (starts.max()! - starts.min()!) <= 125, "the restart began where it began")
            let lease = try await ledger.acquireReconcilerLease(
                name: name, holder: "replica-c", now: Sweeps.wall(clock), duration: .seconds(30))
            #expect(lease?.checkpoint != nil)
        }
    }

    @Test("a checkpoint older than 30 days: the window is clamped to Google's 30 days, never sent older")
    func thirtyDayClamp() async throws {
        try await S.withLedger(.sqlite) { ledger, _ in
            let clock = ManualClock()
            let now = Sweeps.wall(clock)
            let name = "google-play-voided/\(Self.package)"
            _ = try await ledger.acquireReconcilerLease(name: name, holder: "old", now: now, duration: .seconds(1))
            #expect(
                try await ledger.advanceReconcilerCheckpoint(
                    name: name, holder: "old", checkpoint: now.addingTimeInterval(-40 * 86_400), now: now))
            try await ledger.releaseReconcilerLease(name: name, holder: "old", now: now)
            let source = StubVoided(clock: clock)
            _ = await Sweeps.driving(clock) { await Self.sweep(ledger, source, FlakySink(), clock).sweep() }
            let query = try #require(source.queries.first?.query)
            #expect(query.startTime > now.addingTimeInterval(-30 * 86_400))
            #expect(query.endTime <= now)
            let window = GooglePlayVoidedSweep<ManualClock>.window(
                checkpoint: now.addingTimeInterval(-40 * 86_400), now: now, settings: GooglePlayReconcileSettings())
            #expect(window.start == query.startTime)
        }
    }

    @Test("the quota share holds in every wall minute: 7 pages at 2 calls a minute take 4 minutes, never 3 in one")
    func quotaShareHeld() async throws {
        try await S.withLedger(.sqlite) { ledger, _ in
            let clock = ManualClock()
            let now = Sweeps.wall(clock)
            let source = StubVoided(clock: clock, pageSize: 10)
            source.state.withLock { state in
                state.records = (0..<65).map { (now.addingTimeInterval(-Double(600 + $0)), Self.record($0)) }
            }
            let sink = FlakySink()
            let result = await Sweeps.driving(clock) {
                await Self.sweep(ledger, source, sink, clock, callsPerMinute: 2).sweep()
            }
            guard case .completed(_, let pages, _) = result else {
                Issue.record("expected a completed sweep, got \(result)")
                return
            }
            #expect(pages == 7 && source.queries.count == 7)
            let perMinute = Dictionary(grouping: source.queries, by: { $0.at / 60_000 }).mapValues(\.count)
            #expect(perMinute.values.allSatisfy { $0 <= 2 }, "\(perMinute)")
            #expect(perMinute.count == 4)
            #expect(sink.jobIDs.count == 65)
        }
    }

    @Test("a record without an order id or a token makes no job and stops nothing; a partial refund says so")
    func unusableRecords() async throws {
        try await S.withLedger(.sqlite) { ledger, _ in
            let clock = ManualClock()
            let now = Sweeps.wall(clock)
            let source = StubVoided(clock: clock)
            source.state.withLock { state in
                state.records = [
                    (now.addingTimeInterval(-700), GooglePlayVoidedPurchase(orderID: nil, purchaseToken: "token-x")),
                    (now.addingTimeInterval(-700), GooglePlayVoidedPurchase(orderID: "GPA.1", purchaseToken: nil)),
                    (now.addingTimeInterval(-700), Self.record(3, partial: true)),
                ]
            }
            let sink = FlakySink()
            let result = await Sweeps.driving(clock) { await Self.sweep(ledger, source, sink, clock).sweep() }
            guard case .completed(_, _, let published) = result else {
                Issue.record("expected a completed sweep, got \(result)")
                return
            }
            #expect(published == 1 && sink.jobIDs == ["google-play-voided-GPA.0000-0000-0000-00003"])
            // A quantity-based partial refund; a token the ledger does not know: no product type.
            let job = try #require(sink.jobs.withLock { $0.first })
            #expect(
                try Self.voided(job)
                    == .init(
                        purchaseToken: "token-3", orderID: "GPA.0000-0000-0000-00003", productType: nil, refundType: 2))
        }
    }

    static func playClaim(
        _ token: String, package: String = package, expires: Date, grace: Date? = nil
    ) -> TransactionClaim {
        TransactionClaim(
            transactionID: "GPA.\(token)", originalTransactionID: token, accountID: "acct-\(token)",
            productID: "premium_monthly", productType: .autoRenewable, bundleID: package, environment: "Production",
            purchaseDate: expires.addingTimeInterval(-30 * 86_400), expiresDate: expires,
            gracePeriodExpiresDate: grace, grantedJobID: "job-\(token)", verdictID: "verdict-\(token)",
            createdAt: expires, updatedAt: expires)
    }

    @Test(
        "re-reads: a job for each Play subscription about to change (expiry, grace end), once per interval",
        arguments: LedgerBackend.allCases)
    func rereads(_ backend: LedgerBackend) async throws {
        try await S.withLedger(backend) { ledger, _ in
            let clock = ManualClock()
            let now = Sweeps.wall(clock)
            let wrote = try await ledger.perform([
                // Expires in 5 minutes: inside the 10-minute lead.
                .claim(Self.playClaim("soon", expires: now.addingTimeInterval(300))),
                // Expired an hour ago, in a grace period ending in 5 minutes.
                .claim(
                    Self.playClaim(
                        "grace", expires: now.addingTimeInterval(-3_600), grace: now.addingTimeInterval(300))),
                // Expires in two days: not yet.
                .claim(Self.playClaim("later", expires: now.addingTimeInterval(2 * 86_400))),
                // Another app's (an App Store subscription): never a Play re-read.
                .claim(Self.playClaim("apple", package: "com.example.ios", expires: now.addingTimeInterval(300))),
            ])
            #expect(wrote)
            let sink = FlakySink()
            let rereads = GooglePlayRereads(
                packages: [Self.package], settings: GooglePlayReconcileSettings(), store: ledger, sink: sink,
                quota: GooglePlayQuotaShare(callsPerMinute: 100, clock: clock), clock: clock, holder: "replica-a",
                logger: Logger(label: "test.rereads"))
            #expect(await Sweeps.driving(clock) { await rereads.pass() } == .completed(published: 2))
            let jobs = sink.jobs.withLock { $0 }
            let expiry = Int64((now.addingTimeInterval(300).timeIntervalSince1970 * 1000).rounded())
            let graceExpiry = Int64((now.addingTimeInterval(-3_600).timeIntervalSince1970 * 1000).rounded())
            let ids = Set(jobs.map(\.jobID))
            #expect(ids.count == 2)
            let at = Int64((now.timeIntervalSince1970 * 1000).rounded())
            #expect(ids.contains { $0.hasPrefix("google-play-reread-") && $0.hasSuffix("-\(expiry)-expiry-\(at)") })
            #expect(ids.contains { $0.hasSuffix("-\(graceExpiry)-grace_period-\(at)") })
            #expect(
                Set(jobs.map { String(decoding: $0.messageKey, as: UTF8.self) })
                    == ["google-play-notification/soon", "google-play-notification/grace"])
            // Once per interval: the same pass a minute later publishes nothing; after the interval, again.
            clock.advance(by: .seconds(60))
            #expect(await Sweeps.driving(clock) { await rereads.pass() } == .completed(published: 0))
            clock.advance(by: .seconds(3_600))
            #expect(await Sweeps.driving(clock) { await rereads.pass() } == .completed(published: 2))
            // The same ledger states re-read again are new jobs: Google may have moved since the first re-read (a
            // renewal or a hold whose notification was lost), and a job id decided before would be answered from its
            // recorded verdict without reading Google.
            let again = Set(sink.jobs.withLock { $0 }.suffix(2).map(\.jobID))
            #expect(again.count == 2)
            #expect(again.isDisjoint(with: ids))
        }
    }

    @Test("metrics: sweeps, pages, voided found, jobs, re-reads, quota spent and checkpoint age, by store and app")
    func metrics() async throws {
        // A registry of the test's own: the process's is shared with every test running beside this one.
        let registry = PrometheusCollectorRegistry()
        try await S.withLedger(.sqlite) { ledger, _ in
            let clock = ManualClock()
            let now = Sweeps.wall(clock)
            let source = StubVoided(clock: clock, pageSize: 2)
            source.state.withLock { state in
                state.records = (0..<3).map { (now.addingTimeInterval(-Double(600 + $0)), Self.record($0)) }
                state.records.append(
                    (now.addingTimeInterval(-700), GooglePlayVoidedPurchase(orderID: nil, purchaseToken: "t")))
            }
            let sweep = GooglePlayVoidedSweep(
                packageName: Self.package, settings: GooglePlayReconcileSettings(), store: ledger, source: source,
                sink: FlakySink(), quota: GooglePlayQuotaShare(callsPerMinute: 100, clock: clock), clock: clock,
                holder: "replica-a", logger: Logger(label: "test.voided"),
                metricsFactory: PrometheusMetricsFactory(registry: registry))
            _ = await Sweeps.driving(clock) { await sweep.sweep() }
            let wrote = try await ledger.perform([.claim(Self.playClaim("soon", expires: now.addingTimeInterval(300)))])
            #expect(wrote)
            let rereads = GooglePlayRereads(
                packages: [Self.package], settings: GooglePlayReconcileSettings(), store: ledger, sink: FlakySink(),
                quota: GooglePlayQuotaShare(callsPerMinute: 100, clock: clock), clock: clock, holder: "replica-a",
                logger: Logger(label: "test.rereads"), metricsFactory: PrometheusMetricsFactory(registry: registry))
            _ = await Sweeps.driving(clock) { await rereads.pass() }
            let text = registry.emitToString()
            func value(_ name: String, _ extra: String = "") -> String? {
                let labels = #"store="google_play",app="\#(Self.package)""# + extra
                return text.split(separator: "\n").first {
                    $0.hasPrefix(name + "{") && $0.contains(labels)
                }.map { String($0.split(separator: " ").last ?? "") }
            }
            #expect(value(MetricNames.reconcileVoidedSweeps, #",result="completed""#) == "1", "\(text)")
            #expect(value(MetricNames.reconcileVoidedPages) == "2")
            #expect(value(MetricNames.reconcileVoidedFound) == "4")
            #expect(value(MetricNames.reconcileVoidedJobs, #",result="published""#) == "3")
            #expect(value(MetricNames.reconcileVoidedJobs, #",result="unusable""#) == "1")
            #expect(value(MetricNames.reconcileQuotaSpent, #",call="voided_list""#) == "2")
            #expect(value(MetricNames.reconcileQuotaSpent, #",call="reread""#) == "1")
            #expect(value(MetricNames.reconcilePlayRereads) == "1")
            #expect(value(MetricNames.reconcileVoidedCheckpointAge) != nil)
        }
    }
}

/// `verify-worker reconcile` builds its Google Play half from the catalog: one sweep per Play app, the re-reads over
/// every Play package (unless re-reads are off), all on one quota share; nothing without Play apps.
@Suite("Reconciler: the Google Play half from the catalog", .timeLimit(.minutes(2)))
struct GooglePlayReconcileRuntimeTests {
    struct NoTransport: HTTPTransport {
        func execute(_ request: TransportRequest) async throws -> TransportResponse { TransportResponse(status: 503) }
    }

    @Test("one sweep per Play app, re-reads over every package, the share of the minute quota")
    func built() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("reconcile-play-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let keyFile = directory.appendingPathComponent("service-account.json")
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let account: [String: String] = [
            "type": "service_account", "client_email": "r@example.iam.gserviceaccount.com", "private_key_id": "k1",
            "private_key": key.pemRepresentation,
        ]
        try JSONSerialization.data(withJSONObject: account).write(to: keyFile)
        let catalog = Catalog(
            bundleIDs: ["com.example.ios"],
            playApps: ["com.example.one", "com.example.two"].map {
                Catalog.PlayApp(packageName: $0, licensingKeyFile: "/unused", serviceAccountKeyFile: keyFile.path)
            })
        try await LedgerTestSupport.withLedger(.sqlite) { ledger, _ in
            let configuration = try ReconcileConfigurationTests.load(["--google-play-minute-quota", "1000"])
            let runtime = ReconcileRuntime(configuration: configuration, logger: Logger(label: "test.runtime"))
            let sink = GooglePlayVoidedSweepTests.FlakySink()
            let play = try #require(
                try runtime.googlePlay(catalog: catalog, ledger: ledger, transport: NoTransport(), sink: sink))
            #expect(play.sweeps.map(\.packageName) == ["com.example.one", "com.example.two"])
            #expect(play.rereads?.packages == ["com.example.one", "com.example.two"])
            #expect(play.sweeps.allSatisfy { $0.quota === play.sweeps[0].quota && $0.quota.callsPerMinute == 50 })
            #expect(play.rereads?.quota === play.sweeps[0].quota)

            let off = try ReconcileConfigurationTests.load(["--reconcile-reread-interval-s", "0"])
            let withoutRereads = try ReconcileRuntime(configuration: off, logger: Logger(label: "test.runtime"))
                .googlePlay(catalog: catalog, ledger: ledger, transport: NoTransport(), sink: sink)
            #expect(withoutRereads?.rereads == nil && withoutRereads?.sweeps.count == 2)
            #expect(
                try runtime.googlePlay(
                    catalog: Catalog(bundleIDs: ["com.example.ios"]), ledger: ledger, transport: NoTransport(),
                    sink: sink) == nil)
        }
    }
}
