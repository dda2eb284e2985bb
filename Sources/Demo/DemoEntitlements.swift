import AppleClients
import Entitlements
import Foundation
import Kafka
import Logging
import Messages
import Operations
import ServiceLifecycle
import StoreHTTP

/// The demo's entitlement service: `verify-worker entitlements`' service, in process, over the demo's cluster and a
/// SQLite store in a temporary directory, one more part of the demo's service group. It reads the run's verdicts as
/// they come; once every job is decided the demo shows a few accounts' entitlements from the API (and, with
/// `--serve`, keeps the console open).
package struct DemoEntitlements: Sendable {
    /// Where the console listens; 0 picks a free port.
    package var port: Int = 0
    package var host: String = "127.0.0.1"
    /// The store; nil: SQLite in a temporary directory.
    package var storeURL: String?

    /// The demo app's products with the entitlements they grant.
    package static let catalog = Catalog(products: [
        .init(id: "com.example.verifyworker.coins100", type: .consumable),
        .init(id: "com.example.verifyworker.premium", type: .nonConsumable, entitlements: ["premium"]),
        .init(id: "com.example.verifyworker.seasonpass", type: .nonRenewing, entitlements: ["season_pass"]),
        .init(id: "com.example.verifyworker.monthly", type: .autoRenewable, entitlements: ["premium"]),
    ])

    /// The service made for a run, not yet started: its parts join the demo's service group (``services``).
    package struct Prepared: Sendable {
        package let service: EntitlementsService
        package let token: String
        package let directory: URL

        /// The entitlement service's parts, for the demo's group.
        package var services: [any Service] { service.services }

        /// Waits until the API listens and the projection has read every verdict of the topic.
        package func ready(bootstrap: String) async throws -> Running {
            guard let port = await service.waitUntilListening() else {
                throw DemoStall("the entitlement service did not start listening")
            }
            try await DemoEntitlements.waitUntilCaughtUp(service: service, bootstrap: bootstrap)
            return Running(service: service, port: port, token: token, http: try CurlHTTPEngine())
        }

        /// Removes the store's files, once the group has stopped the service.
        package func remove() { try? FileManager.default.removeItem(at: directory) }
    }

    /// The service listening and caught up with the run's verdicts.
    package struct Running: Sendable {
        package let service: EntitlementsService
        package let port: Int
        package let token: String
        package let http: CurlHTTPEngine

        package var consoleURL: String { "http://127.0.0.1:\(port)/console" }

        package func get(_ path: String) async throws -> [String: Any] {
            let response = try await http.execute(
                TransportRequest(
                    url: "http://127.0.0.1:\(port)\(path)", headers: [("Authorization", "Bearer \(token)")],
                    timeout: .seconds(30)))
            return (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any] ?? [:]
        }
    }

    /// Makes the service on the run's cluster, with a SQLite store in a temporary directory unless `storeURL` names
    /// one. The demo's group runs it.
    package func prepare(bootstrap: String, logger: Logger) throws -> Prepared {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "verify-demo-entitlements-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let token = (0..<4).map { _ in String(UInt64.random(in: .min ... .max), radix: 16) }.joined()
        let tokensFile = directory.appendingPathComponent("tokens")
        // Whoever runs the demo is its support staff: the console names the owner of a replayed purchase.
        try "demo:\(token) support\n".write(to: tokensFile, atomically: true, encoding: .utf8)
        var sources = ConfigurationSources(table: EntitlementsConfiguration.table)
        try sources.addFlags([
            "brokers": bootstrap, "entitlements_group_id": "verify-demo-entitlements",
            "entitlements_store_url": storeURL ?? "sqlite:" + directory.appendingPathComponent("e.sqlite").path,
            "catalog_file": "(built in)", "entitlements_tokens_file": tokensFile.path,
            "entitlements_port": String(port), "entitlements_host": host,
            "kafka_properties": DemoRun.mockFetchProperties, "entitlements_events_topic": "",
        ])
        let configuration = try EntitlementsConfiguration(sources)
        let service = try EntitlementsService(
            configuration: configuration, catalog: Self.catalog,
            tokens: try AccessTokens(contents: "demo:\(token) support"),
            logger: logger)
        return Prepared(service: service, token: token, directory: directory)
    }

    /// Waits until the projection's positions reach the verdicts topic's high watermarks (at most two minutes).
    fileprivate static func waitUntilCaughtUp(service: EntitlementsService, bootstrap: String) async throws {
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(bootstrapServers: bootstrap))
        defer { Task { await producer.shutdown(timeout: .seconds(1)) } }
        var ends: [Int32: Int64] = [:]
        for partition in Int32(0)..<Int32(64) {
            guard let marks = try? await producer.watermarks(topic: Topics.verdicts, partition: partition) else {
                break
            }
            if marks.high > 0 { ends[partition] = marks.high }
        }
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(120)
        while clock.now < deadline {
            let positions = (try? await service.store.progress().positions) ?? []
            let reached = Dictionary(positions.map { ($0.partition, $0.nextOffset) }) { max($0, $1) }
            if ends.allSatisfy({ reached[$0.key, default: 0] >= $0.value }) { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw DemoStall("the entitlement service did not read every verdict within two minutes")
    }

    /// A few accounts worth showing: some with a grant, one with a replay, one with a consumable.
    package static func showcase(_ report: DemoReport, limit: Int = 5) -> [String] {
        var picked: [String] = []
        func take(_ predicate: (Verdict) -> Bool, count: Int) {
            var taken = 0
            for entry in report.entries {
                guard taken < count, let verdict = entry.verdicts.first, predicate(verdict),
                    !picked.contains(verdict.accountID)
                else { continue }
                picked.append(verdict.accountID)
                taken += 1
            }
        }
        take({ $0.outcome == .granted && $0.transactions.contains { $0.productID.hasSuffix("premium") } }, count: 2)
        take({ $0.outcome == .granted && $0.transactions.contains { $0.productID.hasSuffix("coins100") } }, count: 1)
        take({ $0.outcome == .granted }, count: 1)
        take({ $0.reason == .replayed }, count: 1)
        return Array(picked.prefix(limit))
    }

    /// The accounts' entitlements as the API returns them, one block of lines each.
    package static func table(_ running: Running, accounts: [String]) async throws -> String {
        var lines = ["entitlements from the API (GET /v1/accounts/{id}/entitlements):"]
        for account in accounts {
            let encoded =
                account.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(["/"])) ?? account
            let json = try await running.get("/v1/accounts/\(encoded)/entitlements")
            let entitlements = (json["entitlements"] as? [[String: Any]] ?? []).map { entitlement -> String in
                let id = entitlement["id"] as? String ?? "?"
                let active = entitlement["active"] as? Bool == true ? "active" : "inactive"
                let expiry = (entitlement["expires_at"] as? String).map { " until \($0.prefix(10))" } ?? ""
                return "\(id) \(active)\(expiry)"
            }
            let consumables = (json["consumables"] as? [[String: Any]] ?? []).map {
                "\($0["product_id"] as? String ?? "?") ×\($0["count"] as? Int ?? 0)"
            }
            var text = entitlements.isEmpty ? "no entitlement" : entitlements.joined(separator: ", ")
            if !consumables.isEmpty { text += "; consumables: " + consumables.joined(separator: ", ") }
            if json["error"] as? String == "unknown_account" { text = "no verdict granting anything" }
            lines.append("  \(account.padding(toLength: 22, withPad: " ", startingAt: 0)) \(text)")
        }
        return lines.joined(separator: "\n")
    }
}
