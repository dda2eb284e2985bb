import CodedErrors
import Foundation
import Messages
import SQLiteStorage
import Synchronization
import Testing

@testable import Decision
@testable import Ledger

/// One suite, run against both backends: a real SQLite file in a temp directory and a real PostgreSQL
/// (`VERIFY_TEST_POSTGRES_URL`, see scripts/test-postgres.sh). Serialized because the outage tests stop the
/// shared PostgreSQL server.
@Suite("Ledger backends", .serialized, .timeLimit(.minutes(2)))
struct LedgerBackendTests {
    typealias F = LedgerFixtures
    typealias S = LedgerTestSupport

    @Test("grant, redelivery, repeat and replay", arguments: LedgerBackend.allCases)
    func grantRedeliveryRepeatReplay(backend: LedgerBackend) async throws {
        try await S.withLedger(backend) { ledger, _ in
            let t = F.purchase("t1", expires: nil)
            let granted = try await S.settle(ledger, F.job("job-1"), F.apple([t]))
            #expect(granted.outcome == .granted)
            // Redelivered later: the very same verdict, read back from the ledger.
            let again = try await S.settle(ledger, F.job("job-1"), F.apple([t]), policy: F.policy(now: F.days(2)))
            #expect(again == granted)
            let repeated = try await S.settle(ledger, F.job("job-2"), F.local([t]))
            #expect(repeated.outcome == .alreadyGranted && repeated.decidedBy == .ledger)
            let replayed = try await S.settle(ledger, F.job("job-3", account: "acct-B"), F.local([t]))
            #expect(replayed.outcome == .rejected && replayed.reason == .replayed)

            let snapshot = try await ledger.snapshot(jobID: "job-1", transactionIDs: ["t1"], originalTransactionIDs: [])
            #expect(snapshot.priorVerdict == granted)
            let claim = try #require(snapshot.claims.first)
            #expect(snapshot.claims.count == 1)
            #expect(claim.accountID == "acct-A" && claim.grantedJobID == "job-1")
            #expect(claim.verdictID == granted.verdictID && claim.productType == .nonConsumable)
            #expect(
                claim.originalTransactionID == "t1" && claim.bundleID == F.bundle && claim.environment == "Production")
            let purchased = try #require(claim.purchaseDate)
            #expect(abs(purchased.timeIntervalSince(F.days(-10))) < 0.001)
        }
    }

    @Test(
        "hundreds of concurrent claims of one transaction end with exactly one owner", arguments: LedgerBackend.allCases
    )
    func concurrentClaimsHaveOneOwner(backend: LedgerBackend) async throws {
        try await S.withLedger(backend) { ledger, _ in
            let t = F.purchase("contested")
            let verdicts = try await withThrowingTaskGroup(of: Verdict.self) { group in
                for i in 0..<300 {
                    group.addTask {
                        // As the worker does: a retryable failure (a timeout on a loaded machine) is tried again.
                        try await S.settleRetrying(ledger, F.job("job-\(i)", account: "acct-\(i)"), F.apple([t]))
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let winners = verdicts.filter { $0.outcome == .granted }
            #expect(winners.count == 1)
            #expect(verdicts.filter { $0.reason == .replayed }.count == 299)
            let snapshot = try await ledger.snapshot(
                jobID: "none", transactionIDs: ["contested"], originalTransactionIDs: [])
            #expect(snapshot.claims.map(\.accountID) == winners.map(\.accountID))
        }
    }

    @Test("concurrent deliveries of one job all get the same verdict", arguments: LedgerBackend.allCases)
    func concurrentDeliveriesOfOneJob(backend: LedgerBackend) async throws {
        try await S.withLedger(backend) { ledger, _ in
            let t = F.purchase("t1")
            let verdicts = try await withThrowingTaskGroup(of: Verdict.self) { group in
                for i in 0..<50 {
                    group.addTask {
                        // Each delivery decides at its own instant; only the first decision may stand.
                        try await S.settle(
                            ledger, F.job("job-1"), F.apple([t]), policy: F.policy(now: F.days(Double(i) / 1000)))
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(Set(verdicts).count == 1)
            #expect(verdicts.first?.outcome == .granted)
        }
    }

    @Test(
        "a decision from a stale snapshot loses the race, writes nothing, and is decided again",
        arguments: LedgerBackend.allCases)
    func staleDecisionLosesTheRace(backend: LedgerBackend) async throws {
        try await S.withLedger(backend) { ledger, _ in
            let t = F.purchase("t1")
            let jobA = F.job("job-A", account: "acct-A")
            let stale = try await ledger.snapshot(for: jobA, evidence: F.apple([t]))
            let decision = try #require(
                F.decision(
                    DecisionRules.decide(
                        DecisionInput(job: jobA, evidence: F.apple([t]), snapshot: stale, policy: F.policy()))))
            // Meanwhile another account claims it.
            let other = try await S.settle(ledger, F.job("job-B", account: "acct-B"), F.apple([t]))
            #expect(other.outcome == .granted)
            #expect(try await ledger.apply(decision) == .raceLost)
            #expect(
                try await ledger.snapshot(jobID: "job-A", transactionIDs: [], originalTransactionIDs: []).priorVerdict
                    == nil)
            let settled = try await S.settle(ledger, jobA, F.apple([t]))
            #expect(settled.reason == .replayed)
        }
    }

    @Test(
        "applying is all or nothing: a second claim that conflicts undoes the first and the verdict",
        arguments: LedgerBackend.allCases)
    func applyIsAllOrNothing(backend: LedgerBackend) async throws {
        try await S.withLedger(backend) { ledger, _ in
            let taken = F.purchase("taken", purchased: F.days(-1))
            let fresh = F.purchase("fresh", purchased: F.days(-2))
            _ = try await S.settle(ledger, F.job("job-0", account: "acct-B"), F.apple([taken]))
            // Decided as if "taken" were free: claims fresh, then taken.
            let decision = try #require(F.decision(F.decide(F.job("job-1"), F.apple([fresh, taken]))))
            #expect(decision.writes.count == 2)
            #expect(try await ledger.apply(decision) == .raceLost)
            let snapshot = try await ledger.snapshot(
                jobID: "job-1", transactionIDs: ["fresh", "taken"], originalTransactionIDs: [])
            #expect(snapshot.priorVerdict == nil)
            #expect(snapshot.claims.map(\.transactionID) == ["taken"])
            // Settling re-decides: the fresh one is granted, the taken one left to its owner.
            let verdict = try await S.settle(ledger, F.job("job-1"), F.apple([fresh, taken]))
            #expect(verdict.outcome == .granted)
        }
    }

    @Test("double account move, then notifications reach the new owner", arguments: LedgerBackend.allCases)
    func subscriptionMoveAndNotifications(backend: LedgerBackend) async throws {
        try await S.withLedger(backend) { ledger, _ in
            let old = F.renewal("s1", purchased: F.days(-60), expires: F.days(-30))
            _ = try await S.settle(ledger, F.job("job-A", account: "acct-A"), F.apple([old]))
            let renewed = F.renewal("s9", purchased: F.days(-1), expires: F.days(29))
            let jobB = F.job("job-B", account: "acct-B")
            let before = try await ledger.snapshot(for: jobB, evidence: F.local([old, renewed]))
            #expect(
                DecisionRules.decideFromLedger(
                    job: jobB, localEvidence: F.local([old, renewed]), snapshot: before, policy: F.policy()) == nil)
            let moved = try await S.settle(ledger, jobB, F.apple([old, renewed]))
            #expect(moved.outcome == .granted && moved.accountID == "acct-B")
            let after = try await ledger.snapshot(jobID: "x", transactionIDs: [], originalTransactionIDs: ["sub-1"])
            #expect(Set(after.claims.map(\.accountID)) == ["acct-B"])
            #expect(Set(after.claims.map(\.transactionID)) == ["s1", "s9"])
            // The first account now sees a replay.
            let back = try await S.settle(ledger, F.job("job-A2", account: "acct-A"), F.apple([old, renewed]))
            #expect(back.reason == .replayed)

            var refund = renewed
            refund.revokedAt = F.days(-0.5)
            var evidence = F.apple([refund])
            evidence.source = .signature
            evidence.notification = SubscriptionNotification(kind: .refunded, appleType: "REFUND")
            let revoked = try await S.settle(ledger, F.notificationJob("n-1"), evidence)
            #expect(revoked.accountID == "acct-B" && revoked.reason == .revoked)
            #expect(try await S.settle(ledger, F.notificationJob("n-1"), evidence) == revoked)
            let stored = try await ledger.snapshot(jobID: "x", transactionIDs: ["s9"], originalTransactionIDs: [])
            let revokedAt = try #require(stored.claims.first?.revokedAt)
            #expect(abs(revokedAt.timeIntervalSince(F.days(-0.5))) < 0.001)
        }
    }

    @Test("revoke and extend are idempotent and never move dates backwards", arguments: LedgerBackend.allCases)
    func writesAreIdempotent(backend: LedgerBackend) async throws {
        try await S.withLedger(backend) { ledger, _ in
            let sub = F.renewal("s1", purchased: F.days(-5), expires: F.days(25))
            _ = try await S.settle(ledger, F.job(), F.apple([sub]))
            #expect(
                try await ledger.perform([
                    .extendSubscription(transactionID: "s1", expiresDate: F.days(40), gracePeriodExpiresDate: nil)
                ]))
            #expect(
                try await ledger.perform([
                    .extendSubscription(
                        transactionID: "s1", expiresDate: F.days(30), gracePeriodExpiresDate: F.days(45))
                ]))
            try await ledger.revoke(transactionID: "s1", at: F.days(1))
            try await ledger.revoke(transactionID: "s1", at: F.days(2))
            let claim = try #require(
                try await ledger.snapshot(jobID: "x", transactionIDs: ["s1"], originalTransactionIDs: []).claims.first)
            #expect(abs(try #require(claim.expiresDate).timeIntervalSince(F.days(40))) < 0.001)
            #expect(abs(try #require(claim.gracePeriodExpiresDate).timeIntervalSince(F.days(45))) < 0.001)
            #expect(abs(try #require(claim.revokedAt).timeIntervalSince(F.days(1))) < 0.001)
            // A move that expects other rows than the ledger holds is refused, writing nothing.
            #expect(
                try await ledger.perform([
                    .moveSubscription(
                        originalTransactionID: "sub-1", from: "acct-A", to: "acct-B", transactionIDs: ["s0"])
                ]) == false)
        }
    }

    @Test("migrations run twice and from two independent connections at once", arguments: LedgerBackend.allCases)
    func migrationsAreSafeToRepeatAndRace(backend: LedgerBackend) async throws {
        let url = try S.freshURL(backend)
        defer { S.removeFiles(of: url) }
        let one = try LedgerFactory.make(url: url, configuration: S.patient)
        let two = try LedgerFactory.make(url: url, configuration: S.patient)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await one.run() }
            group.addTask { try await two.run() }
            defer { group.cancelAll() }
            async let a: Void = one.migrate()
            async let b: Void = two.migrate()
            _ = try await (a, b)
            try await one.migrate()
            try await two.migrate()
            let versions = (backend == .sqlite ? LedgerSchema.sqlite : LedgerSchema.postgres).map(\.version)
            #expect(try await one.schemaVersions() == versions)
            #expect(try await two.schemaVersions() == versions)
            _ = try await S.settle(one, F.job(), F.apple([F.purchase("t1")]))
            #expect(try await S.settle(two, F.job("job-2"), F.local([F.purchase("t1")])).outcome == .alreadyGranted)
        }
    }

    // MARK: Outages

    @Test("PostgreSQL down from the start: unavailable within the connect timeout, and the pool stops cleanly")
    func postgresDown() async throws {
        // Port 1 on loopback: nothing listens there, every connection attempt is refused.
        let configuration = LedgerConfiguration(
            operationTimeout: .seconds(20), connectTimeout: .seconds(1), maximumConnections: 4)
        let ledger = try LedgerFactory.make(
            url: "postgres://verify@127.0.0.1:1/verify?sslmode=disable", configuration: configuration)
        let clock = ContinuousClock()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await ledger.run() }
            defer { group.cancelAll() }
            for operation in ["migrate", "snapshot"] {
                let started = clock.now
                do {
                    if operation == "migrate" {
                        try await ledger.migrate()
                    } else {
                        _ = try await ledger.snapshot(jobID: "j", transactionIDs: ["t"], originalTransactionIDs: [])
                    }
                    Issue.record("\(operation) succeeded against a server that is down")
                } catch let error as LedgerError {
                    #expect(error.code == .unavailable && error.isRetryable, "\(error)")
                    #expect(error.message.contains("127.0.0.1:1/verify"), "\(error)")
                }
                // Well before the 20 s operation timeout: the connect timeout (1 s) decides.
                #expect(started.duration(to: clock.now) < .seconds(8), "\(operation)")
            }
        }
    }

    @Test("PostgreSQL going away mid-transaction and stopping: retryable errors, nothing half-written, then recovery")
    func postgresOutage() async throws {
        // A server of its own: pausing the shared one would fail the ledger tests of other suites running meanwhile.
        try await S.withPrivatePostgres { url, control in
            try await Self.postgresOutage(url: url, control: control)
        }
    }

    private static func postgresOutage(url: String, control: String) async throws {
        try await LedgerFactory.withLedger(url: url, configuration: S.fastFailing) { ledger in
            let postgres = try #require(ledger as? PostgresLedger)
            _ = try await S.settle(ledger, F.job("job-0"), F.apple([F.purchase("t0")]))

            // 1. The server kills our backend between the job's verdict and its claim.
            postgres.injectFault { $0 == "claim" ? "SELECT pg_terminate_backend(pg_backend_pid())" : nil }
            var killedError: (any Error)?
            do {
                _ = try await S.settle(ledger, F.job("job-1"), F.apple([F.purchase("t1")]))
            } catch {
                killedError = error
            }
            postgres.injectFault(nil)
            let killed = try #require(
                killedError as? LedgerError, "expected a LedgerError, got \(String(describing: killedError))")
            #expect(killed.isRetryable, "\(killed)")
            // The pool reconnects after the kill; on a loaded machine that can outlast one operation timeout, so
            // the read retries retryable failures as the worker does. What it reads is the point.
            let afterKill = try await Self.retryingRetryable {
                try await ledger.snapshot(jobID: "job-1", transactionIDs: ["t1"], originalTransactionIDs: [])
            }
            #expect(afterKill.priorVerdict == nil && afterKill.claims.isEmpty)

            // 2. The server stops: a clear retryable error within the timeouts, not a hang.
            try await S.shell("\(control) pause")
            let clock = ContinuousClock()
            let started = clock.now
            var stoppedError: (any Error)?
            do {
                _ = try await S.settle(ledger, F.job("job-2"), F.apple([F.purchase("t2")]))
            } catch {
                stoppedError = error
            }
            let elapsed = started.duration(to: clock.now)
            // Nothing between pause and here throws: the server always comes back.
            try await S.shell("\(control) resume")
            let stopped = try #require(
                stoppedError as? LedgerError, "expected a LedgerError, got \(String(describing: stoppedError))")
            #expect(stopped.isRetryable, "\(stopped)")
            #expect(stopped.code == .unavailable, "no connection at all: the connect timeout decides, \(stopped)")
            // Bounded by the timeouts (connect 1 s, operation 3 s) plus scheduling on a loaded machine; a hang would
            // last until the pool's default 20 s or forever.
            #expect(elapsed < .seconds(10), "within the timeouts, not a hang")

            // 3. Recovery: `resume` returns once the server accepts connections; the pool reconnects after its
            // backoff (under a second after a few seconds of failures). Each attempt is bounded by the timeouts,
            // and so is the whole loop.
            var recovered: Verdict?
            var lastError: (any Error)?
            let recoveryStarted = clock.now
            while recovered == nil, recoveryStarted.duration(to: clock.now) < .seconds(20) {
                do {
                    recovered = try await S.settle(ledger, F.job("job-1"), F.apple([F.purchase("t1")]))
                } catch let error as LedgerError where error.isRetryable {
                    lastError = error
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
            #expect(recovered?.outcome == .granted, "not recovered: \(String(describing: lastError))")
            let stored = try await Self.retryingRetryable {
                try await ledger.snapshot(jobID: "job-2", transactionIDs: ["t2"], originalTransactionIDs: [])
            }
            #expect(stored.priorVerdict == nil && stored.claims.isEmpty)
        }
    }

    /// Runs `operation` again after a retryable `LedgerError`, for at most 20 s, as the worker's retry loop does.
    private static func retryingRetryable<T>(_ operation: () async throws -> T) async throws -> T {
        let clock = ContinuousClock()
        let started = clock.now
        while true {
            do {
                return try await operation()
            } catch let error as LedgerError where error.isRetryable && started.duration(to: clock.now) < .seconds(20) {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    @Test("SQLite failing between statements of a transaction: retryable error, nothing half-written")
    func sqliteInjectedFailure() async throws {
        try await S.withLedger(.sqlite) { ledger, _ in
            let sqlite = try #require(ledger as? SQLiteLedger)
            let a = F.purchase("a", purchased: F.days(-2))
            let b = F.purchase("b", purchased: F.days(-1))
            let calls = Counter()
            // Fail at the second claim, after the verdict and the first claim were written in the transaction.
            await sqlite.injectFault { label in
                label == "claim" && calls.increment() == 2 ? LedgerError(.database, "injected I/O error") : nil
            }
            await #expect(throws: LedgerError.self) {
                _ = try await S.settle(ledger, F.job(), F.apple([a, b]))
            }
            await sqlite.injectFault(nil)
            let snapshot = try await ledger.snapshot(
                jobID: "job-1", transactionIDs: ["a", "b"], originalTransactionIDs: [])
            #expect(snapshot.priorVerdict == nil && snapshot.claims.isEmpty)
            #expect(try await S.settle(ledger, F.job(), F.apple([a, b])).outcome == .granted)
        }
    }

    @Test("SQLite locked by another process: busy (retryable) after the busy timeout, then works")
    func sqliteLockedIsBusy() async throws {
        try await S.withLedger(.sqlite, configuration: S.fastFailing) { ledger, url in
            let other = try LedgerSQLiteConnection(
                path: String(url.dropFirst("sqlite:".count)), busyTimeout: .zero, setup: LedgerSQLiteConnection.setup)
            try other.execute("BEGIN EXCLUSIVE")
            do {
                _ = try await S.settle(ledger, F.job(), F.apple([F.purchase("t1")]))
                Issue.record("settle succeeded while another connection held the write lock")
            } catch let error as LedgerError {
                #expect(error.code == .busy && error.isRetryable, "\(error)")
            }
            try other.execute("ROLLBACK")
            other.close()
            #expect(try await S.settle(ledger, F.job(), F.apple([F.purchase("t1")])).outcome == .granted)
        }
    }
}

/// A thread-safe counter for fault hooks.
final class Counter: Sendable {
    private let value = Mutex(0)
    func increment() -> Int {
        value.withLock {
            $0 += 1; return $0
        }
    }
}

/// The writes of notification types on both backends: reinstate, auto-renew, notification order.
@Suite("Ledger backends: notification writes", .serialized, .timeLimit(.minutes(2)))
struct LedgerNotificationWriteTests {
    typealias F = LedgerFixtures
    typealias S = LedgerTestSupport

    static func notification(
        _ type: String, _ kind: SubscriptionNotification.Kind, _ transaction: PurchaseTransaction, signed: Date,
        autoRenew: Bool? = nil
    ) -> PurchaseEvidence {
        var evidence = F.apple([transaction])
        evidence.source = .signature
        evidence.appleStatus = nil
        evidence.notification = SubscriptionNotification(
            kind: kind, appleType: type, signedDate: signed, autoRenew: autoRenew)
        return evidence
    }

    @Test(
        "REFUND then REFUND_REVERSED reinstates; auto-renew is recorded; a late REFUND changes nothing",
        arguments: LedgerBackend.allCases)
    func refundReversedAndOrder(backend: LedgerBackend) async throws {
        try await S.withLedger(backend) { ledger, _ in
            let sub = F.renewal("s1", purchased: F.days(-5), expires: F.days(25))
            let renewal = F.renewal("s2", purchased: F.days(-4), expires: F.days(26))
            _ = try await S.settle(ledger, F.job(), F.apple([sub]))
            _ = try await S.settle(ledger, F.job("job-2"), F.apple([renewal]))
            var refund = sub
            refund.revokedAt = F.days(-1)
            let refunded = try await S.settle(
                ledger, F.notificationJob("n-1"), Self.notification("REFUND", .refunded, refund, signed: F.days(-1)))
            #expect(refunded.reason == .revoked)
            let reversed = try await S.settle(
                ledger, F.notificationJob("n-2"),
                Self.notification("REFUND_REVERSED", .refundReversed, sub, signed: F.days(-0.5)))
            #expect(reversed.outcome == .alreadyGranted && reversed.accountID == "acct-A")
            let off = try await S.settle(
                ledger, F.notificationJob("n-3"),
                Self.notification(
                    "DID_CHANGE_RENEWAL_STATUS", .renewalStatusChanged, sub, signed: F.days(-0.4),
                    autoRenew: false))
            #expect(off.outcome == .alreadyGranted)
            // The REFUND delivered again, late (Apple's retry), under a new job id: answered from the ledger.
            let late = try await S.settle(
                ledger, F.notificationJob("n-1-retry"),
                Self.notification("REFUND", .refunded, refund, signed: F.days(-1)))
            #expect(late.outcome == .alreadyGranted && late.decidedBy == .ledger)

            let snapshot = try await ledger.snapshot(jobID: "x", transactionIDs: [], originalTransactionIDs: ["sub-1"])
            #expect(snapshot.claims.count == 2)
            for claim in snapshot.claims {
                #expect(claim.autoRenew == false, "auto-renew is the subscription's, on every claim")
                let signedAt = try #require(claim.notificationSignedAt)
                #expect(abs(signedAt.timeIntervalSince(F.days(-0.4))) < 0.001)
            }
            #expect(snapshot.claim("s1")?.revokedAt == nil, "the reversal stands")
            #expect(snapshot.claim("s2")?.revokedAt == nil)
        }
    }

    @Test(
        "a notification write finding a newer one applied loses the race and writes nothing",
        arguments: LedgerBackend.allCases)
    func recordNotificationRace(backend: LedgerBackend) async throws {
        try await S.withLedger(backend) { ledger, _ in
            let sub = F.renewal("s1", purchased: F.days(-5), expires: F.days(25))
            _ = try await S.settle(ledger, F.job(), F.apple([sub]))
            #expect(
                try await ledger.perform([
                    .recordNotification(originalTransactionID: "sub-1", signedAt: F.days(-1), autoRenew: true)
                ]))
            // Decided from a snapshot that did not hold the newer one: a revoke and an older date, refused together.
            #expect(
                try await ledger.perform([
                    .revoke(transactionID: "s1", revokedAt: F.days(-2)),
                    .recordNotification(originalTransactionID: "sub-1", signedAt: F.days(-2), autoRenew: false),
                ]) == false)
            let claim = try #require(
                try await ledger.snapshot(jobID: "x", transactionIDs: ["s1"], originalTransactionIDs: []).claims.first)
            #expect(claim.revokedAt == nil && claim.autoRenew == true)
            #expect(abs(try #require(claim.notificationSignedAt).timeIntervalSince(F.days(-1))) < 0.001)
            // Reinstate clears a revocation; an unsigned record only sets auto-renew.
            try await ledger.revoke(transactionID: "s1", at: F.days(-1))
            #expect(try await ledger.perform([.reinstate(transactionID: "s1")]))
            #expect(
                try await ledger.perform([
                    .recordNotification(originalTransactionID: "sub-1", signedAt: nil, autoRenew: false)
                ]))
            let after = try #require(
                try await ledger.snapshot(jobID: "x", transactionIDs: ["s1"], originalTransactionIDs: []).claims.first)
            #expect(after.revokedAt == nil && after.autoRenew == false)
        }
    }
}
