import CodedErrors
import Foundation
import Messages
import Operations
import Testing
import Traffic
import Worker

@testable import Decision
@testable import Ledger

/// The two ledger backends every shared test runs against.
enum LedgerBackend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    var testDescription: String { rawValue }
}

enum LedgerTestSupport {
    static let postgresHint =
        "start one with `scripts/test-postgres.sh start && eval \"$(scripts/test-postgres.sh env)\"` (as root)"

    /// A URL for a fresh, empty ledger: a new SQLite file in a temp directory, or a new schema in the test
    /// PostgreSQL (`VERIFY_TEST_POSTGRES_URL`).
    static func freshURL(_ backend: LedgerBackend) throws -> String {
        let tag = UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(12)
        switch backend {
        case .sqlite:
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("verify-ledger-\(tag)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            return "sqlite:" + dir.appendingPathComponent("ledger.sqlite").path
        case .postgres:
            let base = try TestEnvironment.service("VERIFY_TEST_POSTGRES_URL", startWith: postgresHint)
            return base + (base.contains("?") ? "&" : "?") + "schema=t_\(tag)"
        }
    }

    static func removeFiles(of url: String) {
        guard url.hasPrefix("sqlite:") else { return }
        let dir = URL(fileURLWithPath: String(url.dropFirst("sqlite:".count))).deletingLastPathComponent()
        try? FileManager.default.removeItem(at: dir)
    }

    /// For tests that are not about timeouts: the production defaults (connect 3 s, operation 5 s) are for a worker
    /// that retries, and a test run shares two cores with hundreds of other tests, where a local connection has
    /// taken longer than 3 s, and a fresh schema's migration, queued behind twenty others in the run's first minute,
    /// longer than 30 s (on a slower machine: a hang guard, like the tests' two-minute limits). Tests of
    /// the timeouts themselves use ``fastFailing``.
    static let patient = LedgerConfiguration(operationTimeout: .seconds(100), connectTimeout: .seconds(20))

    static let fastFailing = LedgerConfiguration(
        operationTimeout: .seconds(3), connectTimeout: .seconds(1), maximumConnections: 16,
        busyTimeout: .milliseconds(300))

    /// Runs `body` with a running, migrated ledger on a fresh URL.
    static func withLedger<T: Sendable>(
        _ backend: LedgerBackend, configuration: LedgerConfiguration = patient,
        _ body: @Sendable (any Ledger, String) async throws -> T
    ) async throws -> T {
        let url = try freshURL(backend)
        defer { removeFiles(of: url) }
        return try await LedgerFactory.withLedger(url: url, configuration: configuration) { ledger in
            try await body(ledger, url)
        }
    }

    /// Settles a job that must reach a verdict (the evidence is authenticated).
    static func settle(
        _ ledger: some Ledger, _ job: ReceiptJob, _ evidence: PurchaseEvidence,
        policy: DecisionPolicy = LedgerFixtures.policy()
    ) async throws -> Verdict {
        switch try await ledger.settle(job: job, evidence: evidence, policy: policy) {
        case .verdict(let verdict): return verdict
        case .needsApple: throw LedgerTestFailure("settle needed Apple for \(job.jobID)")
        }
    }

    /// ``settle(_:_:_:policy:)``, trying again after retryable ledger failures (timeouts, busy, contention), as the
    /// pipeline does; gives up after 20 attempts.
    static func settleRetrying(
        _ ledger: some Ledger, _ job: ReceiptJob, _ evidence: PurchaseEvidence,
        policy: DecisionPolicy = LedgerFixtures.policy()
    ) async throws -> Verdict {
        var attempt = 1
        while true {
            do {
                return try await settle(ledger, job, evidence, policy: policy)
            } catch let error as LedgerError where error.isRetryable && attempt < 20 {
                attempt += 1
            }
        }
    }

    /// Runs a shell command (the test PostgreSQL's pause/resume), failing with its output. Awaits the exit without
    /// blocking a thread of the concurrency pool (the time limit of the test still applies); the output goes to a
    /// file, not a pipe, so a daemon the command leaves running cannot hold it open.
    /// A PostgreSQL of the test's own, started by `scripts/test-postgres.sh` (`VERIFY_TEST_PG_CTL`) under a state
    /// file of its own, for tests that stop the server: stopping the shared one would fail the other ledger tests
    /// running at the same time. `body` gets the server's URL and the control command (`"<control> pause"`); the
    /// server is stopped and its directory deleted afterwards, whatever `body` did.
    /// With `tls`, the server speaks TLS too (`VERIFY_PG_TLS=1`; `"<control> tls-dir"` names its CA files).
    static func withPrivatePostgres<T>(
        tls: Bool = false, _ body: (_ url: String, _ control: String) async throws -> T
    ) async throws -> T {
        let script = try TestEnvironment.service("VERIFY_TEST_PG_CTL", startWith: postgresHint)
        let state = FileManager.default.temporaryDirectory.appendingPathComponent(
            "verify-pg-\(UUID().uuidString).state")
        let control = "VERIFY_PG_STATE='\(state.path)' \(tls ? "VERIFY_PG_TLS=1 " : "")'\(script)'"
        let url = try await shell("\(control) start").trimmingCharacters(in: .whitespacesAndNewlines)
        let result: Result<T, any Error>
        do {
            result = .success(try await body(url, control))
        } catch {
            result = .failure(error)
        }
        // Launched even when the test was cancelled (`shell` then returns at once, the command runs on).
        _ = try? await shell("\(control) stop")
        return try result.get()
    }

    /// Runs `command` with bash; returns what it printed (stdout and stderr), throws if it failed. The wait ends when
    /// bash does, even if a daemon the command started holds a descriptor it inherited.
    @discardableResult
    static func shell(_ command: String) async throws -> String {
        let done = try await TestCommand.shell(command)
        guard done.succeeded else { throw LedgerTestFailure("`\(command)` failed (\(done.exit)): \(done.errors)") }
        return done.errors
    }
}

struct LedgerTestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
