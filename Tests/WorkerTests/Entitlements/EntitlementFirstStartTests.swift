import Entitlements
import Foundation
import Kafka
import Logging
import Messages
import Testing

/// The first start of an entitlement service on an empty store: every part that reads the tables waits for the
/// migration, so nothing reads a table that is not there yet and nothing logs a failure.
@Suite("Entitlement service: the first start on an empty store", .timeLimit(.minutes(3)))
struct EntitlementFirstStartTests {
    enum Store: String, CaseIterable, CustomTestStringConvertible {
        case sqlite
        case postgres
        var testDescription: String { rawValue }
    }

    @Test(
        "a fresh store is migrated before the event publisher and webhooks read it: no failure is logged",
        arguments: Store.allCases)
    func firstStartLogsNoFailure(store: Store) async throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        try cluster.createTopic(Topics.verdicts, partitions: 2)
        try cluster.createTopic("entitlement-events", partitions: 2)
        let directory = try EntitlementServiceTests.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let storeURL: String
        switch store {
        case .sqlite:
            storeURL = "sqlite:" + directory.appendingPathComponent("fresh.sqlite").path
        case .postgres:
            let base = try TestEnvironment.service(
                "VERIFY_TEST_POSTGRES_URL", startWith: LedgerTestSupport.postgresHint)
            let tag = UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(12)
            storeURL = base + (base.contains("?") ? "&" : "?") + "schema=ent_first_\(tag)"
        }
        let capture = SecurityLogCapture()
        let logger = capture.logger("entitlements-first-start")
        let running = try await EntitlementServiceTests.start(
            cluster: cluster, storePath: "", directory: directory, group: KafkaTest.uniqueGroup("first-start"),
            webhooks: NoWebhooks(), webhookURLs: "http://127.0.0.1:1/hook", storeURL: storeURL, logger: logger)
        #expect(await running.service.waitUntilMigrated())
        // A read through the API, then a graceful stop: the publisher's last round reads the events table too.
        let reply = try await running.get("/v1/accounts/acct-first/entitlements")
        // An account with nothing yet: 404 from the store's answer, never a store failure (500, 503).
        #expect(reply.status == 404 || reply.status == 200, "\(reply)")
        await running.stop()
        let failures = capture.lines.filter {
            $0.contains(" error ") || $0.contains(" critical ") || $0.contains("failed") || $0.contains("retrying")
                || $0.contains("no such table") || $0.contains("does not exist")
        }
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
    }

    /// Webhooks that are never sent (no entitlement changes in this test).
    struct NoWebhooks: WebhookTransport {
        func post(
            url: String, body: [UInt8], headers: [(name: String, value: String)], timeout: Duration
        ) async throws -> Int { 200 }
    }
}

/// A store URL the service cannot use stops it at start like any other bad setting: one line naming the key, exit 2.
@Suite("Entitlement service: a store URL it cannot use", .timeLimit(.minutes(2)))
struct EntitlementStoreURLRefusalTests {
    @Test(
        "a bad sslmode, a missing CA file or a sqlite: path in a missing folder: exit 2, one line naming the key",
        arguments: [
            "postgres://verify@127.0.0.1:1/entitlements?sslmode=verify",
            "postgres://verify@127.0.0.1:1/entitlements?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
            "sqlite:/nonexistent/folder/entitlements.sqlite",
        ])
    func refused(url: String) async throws {
        let compose = TestEnvironment.packageRoot.appendingPathComponent("deploy/compose")
        let outcome = try await CommandProcess.run(
            ["entitlements", "--entitlements-port", "0", "--brokers", "127.0.0.1:1"],
            environment: [
                "VERIFY_ENTITLEMENTS_STORE_URL": url,
                "VERIFY_CATALOG_FILE": compose.appendingPathComponent("catalog.json").path,
                "VERIFY_ENTITLEMENTS_TOKENS_FILE": compose.appendingPathComponent("entitlement_tokens.txt").path,
            ])
        #expect(outcome.status == 2, "exit \(outcome.status): \(outcome.stderr)")
        let lines = outcome.stderr.split(separator: "\n")
        #expect(lines.count == 1, "\(outcome.stderr)")
        #expect(
            lines.first?.hasPrefix("verify-worker entitlements: configuration: entitlements_store_url: ") == true,
            "\(outcome.stderr)")
    }
}
