import Foundation
import Messages
import Operations
import Reconciler
import Testing
import Worker

/// `verify-worker reconcile` reads `run`'s keys plus its own `reconcile_*` keys, through the same table: defaults,
/// each own key set and each wrong in turn (naming the key), the Server API key required, and its section of
/// docs/CONFIGURATION.md generated from the table.
@Suite("Reconciler: configuration")
struct ReconcileConfigurationTests {
    /// What every test needs: a catalog and a Server API key with its ids.
    static let required: [String: String] = [
        "VERIFY_CATALOG_FILE": "/etc/verify/catalog.json", "VERIFY_SERVER_API_KEY": "-----BEGIN PRIVATE KEY-----",
        "VERIFY_SERVER_API_KEY_ID": "KEY123", "VERIFY_SERVER_API_ISSUER_ID": "issuer",
    ]

    static func load(
        _ arguments: [String], environment: [String: String] = required
    ) throws(ConfigurationError)
        -> ReconcileConfiguration
    {
        try ReconcileConfiguration.load(arguments: arguments, environment: environment, readFile: { _ in "" })
    }

    @Test("defaults: a sweep a minute at 20% of 50 requests/s, 7 days back at first, production, the gateway's account")
    func defaults() throws {
        let configuration = try Self.load([])
        #expect(configuration.reconciler.interval == .seconds(60))
        #expect(configuration.reconciler.requestsPerSecond == 10)
        #expect(configuration.reconciler.overlap == .seconds(600))
        #expect(configuration.reconciler.firstLookBack == .seconds(168 * 3_600))
        #expect(configuration.reconciler.leaseDuration == .seconds(30))
        #expect(configuration.reconciler.environments == [.production])
        #expect(configuration.reconciler.notificationAccountID == "apple-notification")
        // Re-reads of unsure subscriptions: on, each at most once an hour.
        #expect(configuration.rereadsEnabled)
        #expect(configuration.reconciler.rereadInterval == .seconds(3_600))
        // The worker's keys are read as `run` reads them.
        #expect(configuration.worker.jobsTopic == "receipt-jobs")
    }

    @Test("every own key set by its flag; the share applies to server_api_rate")
    func flags() throws {
        let configuration = try Self.load([
            "--reconcile-interval-s", "5", "--reconcile-rate-share", "0.5", "--server-api-rate", "8",
            "--reconcile-overlap-s", "0", "--reconcile-first-lookback-h", "24", "--reconcile-lease-s", "12",
            "--reconcile-environments", "production, sandbox", "--reconcile-notification-account", "notes",
        ])
        #expect(configuration.reconciler.interval == .seconds(5))
        #expect(configuration.reconciler.requestsPerSecond == 4)
        #expect(configuration.reconciler.overlap == .zero)
        #expect(configuration.reconciler.firstLookBack == .seconds(86_400))
        #expect(configuration.reconciler.leaseDuration == .seconds(12))
        #expect(configuration.reconciler.environments == [.production, .sandbox])
        #expect(configuration.reconciler.notificationAccountID == "notes")
        let off = try Self.load(["--reconcile-reread-interval-s", "0"])
        #expect(!off.rereadsEnabled)
        #expect(try Self.load(["--reconcile-reread-interval-s", "600"]).reconciler.rereadInterval == .seconds(600))
    }

    @Test(
        "each own key wrong in turn stops the command naming it",
        arguments: [
            ("reconcile_interval_s", "0"), ("reconcile_interval_s", "86401"), ("reconcile_interval_s", "x"),
            ("reconcile_rate_share", "0"), ("reconcile_rate_share", "1.01"), ("reconcile_overlap_s", "-1"),
            ("reconcile_first_lookback_h", "0"), ("reconcile_first_lookback_h", "4321"), ("reconcile_lease_s", "4"),
            ("reconcile_environments", "xcode"), ("reconcile_environments", ","),
            ("reconcile_notification_account", ""), ("reconcile_reread_interval_s", "-1"),
            ("reconcile_reread_interval_s", "x"), ("reconcile_google_play_quota_share", "0"),
            ("reconcile_google_play_quota_share", "1.5"), ("reconcile_google_play_quota_share", "x"),
            ("reconcile_google_play_lookback_h", "721"), ("reconcile_google_play_lookback_h", "0"),
            ("reconcile_google_play_reread_lead_s", "-1"),
        ])
    func wrongValues(key: String, value: String) throws {
        var environment = Self.required
        environment["VERIFY_" + key.uppercased()] = value
        do {
            _ = try Self.load([], environment: environment)
            Issue.record("\(key)=\(value) was accepted")
        } catch {
            #expect(error.key == key, "\(error)")
            #expect(!"\(error)".contains("\n"), "one line")
        }
    }

    @Test("Google Play: 5% of the per-minute quota, 30 days back at first, re-reads 10 minutes ahead; each key set")
    func googlePlay() throws {
        let defaults = try Self.load([])
        #expect(defaults.googlePlayQuotaShare == 0.05 && defaults.googlePlayCallsPerMinute == 150)
        #expect(defaults.googlePlay.firstLookBack == .seconds(30 * 86_400))
        #expect(defaults.googlePlay.rereadLead == .seconds(600))
        #expect(defaults.googlePlay.overlap == .seconds(600) && defaults.googlePlay.rereadInterval == .seconds(3_600))
        let set = try Self.load([
            "--reconcile-google-play-quota-share", "0.5", "--google-play-minute-quota", "100",
            "--reconcile-google-play-lookback-h", "48", "--reconcile-google-play-reread-lead-s", "60",
            "--reconcile-overlap-s", "30",
        ])
        #expect(set.googlePlayCallsPerMinute == 50)
        #expect(set.googlePlay.firstLookBack == .seconds(48 * 3_600) && set.googlePlay.rereadLead == .seconds(60))
        #expect(set.googlePlay.overlap == .seconds(30))
        // A share too small for one call a minute still allows one.
        #expect(try Self.load(["--reconcile-google-play-quota-share", "0.0001"]).googlePlayCallsPerMinute == 1)
    }

    @Test("without a Server API key there is no history to read: refused at start, naming server_api_key")
    func serverAPIKeyRequired() throws {
        var environment = Self.required
        environment["VERIFY_SERVER_API_KEY"] = nil
        #expect(throws: ConfigurationError.self) { try Self.load([], environment: environment) }
        do {
            _ = try Self.load([], environment: environment)
        } catch {
            #expect(error.key == "server_api_key")
        }
    }

    @Test("a catalog of Play apps only needs no Server API key: only Google is swept")
    func playOnlyCatalog() throws {
        let playOnly = #"""
            {"play_apps":[{"package_name":"com.example.play","licensing_key_file":"/k",
              "service_account_key_file":"/s"}]}
            """#
        var environment = Self.required
        environment["VERIFY_SERVER_API_KEY"] = nil
        let configuration = try ReconcileConfiguration.load(
            arguments: [], environment: environment, readFile: { _ in playOnly })
        #expect(configuration.worker.serverAPIKey == nil)
        // With an App Store bundle id beside the Play app, the key is required as before.
        let both =
            #"{"bundle_ids":["com.example.ios"],"play_apps":[{"package_name":"com.example.play","#
            + #""licensing_key_file":"/k","service_account_key_file":"/s"}]}"#
        #expect(throws: ConfigurationError.self) {
            try ReconcileConfiguration.load(arguments: [], environment: environment, readFile: { _ in both })
        }
    }

    @Test("docs/CONFIGURATION.md has the reconciler's section as the table generates it")
    func documented() throws {
        let onDisk = try String(
            contentsOf: TestEnvironment.packageRoot.appendingPathComponent("docs/CONFIGURATION.md"), encoding: .utf8)
        let section = ReconcileConfiguration.ownTable.referenceMarkdown(heading: "## `verify-worker reconcile`")
        #expect(onDisk.contains(section), "regenerate with `verify-worker config-reference --command reconcile`")
        // Every key of `run` is a key of `reconcile` too (one ConfigMap serves both).
        let names = Set(ReconcileConfiguration.keys.map(\.name))
        #expect(WorkerConfiguration.keys.allSatisfy { names.contains($0.name) })
        #expect(names.count == ReconcileConfiguration.keys.count, "no key twice")
    }
}
