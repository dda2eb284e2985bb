import AppleClients
import Entitlements
import Foundation
import Kafka
import Logging
import Messages
import Operations
import StoreHTTP
import Testing
import Traffic

/// `verify-worker entitlements` as processes: killed with SIGKILL mid-stream, its partitions moved by a rebalance,
/// its database stopped; afterwards every account's entitlements from the API equal what the verdicts imply, and
/// every verdict is in the history exactly once.
@Suite("Entitlement service processes", .serialized, .timeLimit(.minutes(6)))
struct EntitlementProcessTests {
    typealias F = EntitlementFixtures

    /// Verdicts for `accounts` accounts relative to `now`: grants, consumables, refunds, renewals, grace periods,
    /// replays, redeliveries (some published twice) and messages of an unknown schema.
    static func traffic(accounts: Int, now: Date) -> (messages: [(key: String, value: [UInt8])], verdicts: [Verdict]) {
        let day = F.day
        func at(_ offset: Double) -> Date { now.addingTimeInterval(offset) }
        var perAccount: [[Verdict]] = []
        for index in 0..<accounts {
            let account = "acct-\(index)"
            var list: [Verdict] = []
            func verdict(
                _ job: String, _ outcome: Verdict.Outcome, _ reason: Verdict.Reason? = nil, decided: Double,
                _ transactions: [Verdict.Transaction]
            ) {
                list.append(
                    Verdict(
                        verdictID: Verdict.legacyVerdictID(jobID: "\(account)-\(job)"), jobID: "\(account)-\(job)",
                        accountID: account, outcome: outcome, reason: reason,
                        decidedBy: .apple, environment: "Production", transactions: transactions,
                        decidedAt: at(decided + Double(index) / 1000)))
            }
            let first = Verdict.Transaction(
                transactionID: "t\(index)-1", originalTransactionID: "t\(index)-1", productID: "pro.monthly",
                purchaseDate: at(-10 * day), expiresDate: at(20 * day))
            verdict("grant", .granted, decided: -10 * day, [first])
            if index % 3 == 0 {
                verdict(
                    "coins-1", .granted, decided: -9 * day,
                    [.init(transactionID: "c\(index)-1", productID: "coins.100", quantity: 2)])
                verdict(
                    "coins-2", .granted, decided: -8 * day,
                    [.init(transactionID: "c\(index)-2", productID: "coins.100")])
            }
            if index % 4 == 1 {
                var refunded = first
                refunded.revokedAt = at(-2 * day)
                verdict("refund", .rejected, .revoked, decided: -2 * day, [refunded])
            }
            if index % 5 == 2 {
                verdict(
                    "renew", .granted, decided: 19 * day - 30 * day,
                    [
                        .init(
                            transactionID: "t\(index)-2", originalTransactionID: "t\(index)-1",
                            productID: "pro.monthly",
                            purchaseDate: at(-1 * day), expiresDate: at(29 * day))
                    ])
            }
            if index % 6 == 4 {
                var grace = first
                grace.expiresDate = at(36 * day)
                verdict("grace", .alreadyGranted, .alreadyOwned, decided: -1 * day, [grace])
                verdict(
                    "lifetime", .granted, decided: -0.5 * day, [.init(transactionID: "l\(index)", productID: "no.ads")])
            }
            if index % 7 == 3 {
                verdict(
                    "replay", .rejected, .replayed, decided: -0.4 * day,
                    [.init(transactionID: "t0-1", productID: "pro.monthly")])
            }
            perAccount.append(list)
        }
        // Interleave accounts, publish some verdicts twice (a worker's redelivery) and add unknown schemas.
        var messages: [(key: String, value: [UInt8])] = []
        let codec = MessageCodec()
        let longest = perAccount.map(\.count).max() ?? 0
        for step in 0..<longest {
            for (index, list) in perAccount.enumerated() where step < list.count {
                let verdict = list[step]
                messages.append((verdict.accountID, codec.encode(verdict)))
                if (index + step) % 9 == 0 { messages.append((verdict.accountID, codec.encode(verdict))) }
                if step == 0, index % 11 == 5 {
                    messages.append(
                        (
                            verdict.accountID,
                            F.verdictJSON(
                                verdict, replacing: ["schema": "receipt-verdict/v9", "verdict_id": UUID().uuidString])
                        ))
                }
            }
        }
        return (messages, perAccount.flatMap { $0 })
    }

    /// What the verdicts imply, applied in per-account order by the pure projection.
    static func expected(
        _ verdicts: [Verdict], at instant: Date
    ) -> [String: (entitlements: [String: Bool], consumables: [String: Int])] {
        var state = ProjectionState()
        for verdict in verdicts {
            _ = EntitlementProjection.apply(.verdict(verdict), to: &state, catalog: F.catalog, recordedAt: instant)
        }
        var answer: [String: (entitlements: [String: Bool], consumables: [String: Int])] = [:]
        for account in Set(verdicts.map(\.accountID)) {
            let summaries = EntitlementSummary.summarize(
                state.transactions(ofAccount: account), catalog: F.catalog, at: instant)
            var consumables: [String: Int] = [:]
            for (key, delta) in state.consumableDeltas where key.accountID == account && delta > 0 {
                consumables[key.productID] = delta
            }
            answer[account] = (
                Dictionary(uniqueKeysWithValues: summaries.map { ($0.entitlementID, $0.active) }), consumables
            )
        }
        return answer
    }

    /// Files and settings shared by every child of one test.
    struct Setup {
        let directory: URL
        let cluster: MockKafkaCluster
        let storeURL: String
        let group = "entitlements-process-\(UUID().uuidString.prefix(8))"

        init(storeURL: String? = nil) throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "entitlements-process-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            cluster = try MockKafkaCluster(brokers: 1)
            try cluster.createTopic(Topics.verdicts, partitions: 4)
            try cluster.createTopic("entitlement-events", partitions: 4)
            self.storeURL = storeURL ?? "sqlite:" + directory.appendingPathComponent("e.sqlite").path
            try EntitlementAPIHarness.tokensFile.write(
                to: directory.appendingPathComponent("tokens"), atomically: true, encoding: .utf8)
            try Data(
                #"{"products":[{"id":"pro.monthly","type":"auto_renewable","entitlements":["premium"]},{"id":"pro.yearly","type":"auto_renewable","entitlements":["premium"]},{"id":"lifetime","type":"non_consumable","entitlements":["premium"]},{"id":"no.ads","type":"non_consumable"},{"id":"coins.100","type":"consumable"},{"id":"season.pass","type":"non_renewing","entitlements":["season"]}]}"#
                    .utf8
            ).write(to: directory.appendingPathComponent("catalog.json"))
        }

        func start(_ name: String, port: Int) throws -> ProcessTestChild {
            var environment = ProcessInfo.processInfo.environment
            environment.merge([
                "VERIFY_BROKERS": cluster.bootstrapServers, "VERIFY_ENTITLEMENTS_GROUP_ID": group,
                "VERIFY_ENTITLEMENTS_STORE_URL": storeURL,
                "VERIFY_CATALOG_FILE": directory.appendingPathComponent("catalog.json").path,
                "VERIFY_ENTITLEMENTS_TOKENS_FILE": directory.appendingPathComponent("tokens").path,
                "VERIFY_ENTITLEMENTS_PORT": String(port), "VERIFY_ENTITLEMENTS_HOST": "127.0.0.1",
                "VERIFY_ENTITLEMENTS_BATCH_SIZE": "25", "VERIFY_LOG_LEVEL": "notice",
                "VERIFY_KAFKA_PROPERTIES":
                    "fetch.wait.max.ms=10;fetch.error.backoff.ms=10;session.timeout.ms=6000;reconnect.backoff.max.ms=500",
            ]) { _, new in new }
            return try ProcessTestChild(
                name: name, arguments: ["entitlements"], environment: environment,
                stderrFile: directory.appendingPathComponent("\(name).log"))
        }

        func publish(_ messages: ArraySlice<(key: String, value: [UInt8])>) async throws {
            let producer = try KafkaTest.producer(cluster)
            for message in messages {
                _ = try await producer.sendConfirmed(
                    KafkaProducerRecord(topic: Topics.verdicts, key: Array(message.key.utf8), value: message.value))
            }
            await producer.shutdown(timeout: .seconds(5))
        }

        /// Messages of the verdicts topic.
        func stored() async throws -> [Int32: Int64] {
            let producer = try KafkaTest.producer(cluster)
            defer { Task { await producer.shutdown(timeout: .seconds(1)) } }
            var ends: [Int32: Int64] = [:]
            for partition in Int32(0)..<4 {
                ends[partition] = try await producer.watermarks(topic: Topics.verdicts, partition: partition).high
            }
            return ends
        }

        func remove() { try? FileManager.default.removeItem(at: directory) }
    }

    /// Sum of a counter over its labels in a Prometheus text.
    static func counter(_ name: String, in text: String) -> Double {
        text.split(separator: "\n").filter { $0.hasPrefix(name) }.compactMap { line in
            line.split(separator: " ").last.flatMap { Double($0) }
        }.reduce(0, +)
    }

    static func get(_ port: Int, _ path: String) async -> (status: Int, json: [String: Any])? {
        guard
            let response = try? await TestHTTP.execute(
                .init(
                    url: "http://127.0.0.1:\(port)\(path)",
                    headers: [("Authorization", "Bearer \(EntitlementAPIHarness.token)")], timeout: .seconds(10)))
        else { return nil }
        return (
            response.status, (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any] ?? [:]
        )
    }

    /// Waits until the store has read every message of the topic.
    static func waitUntilCaughtUp(_ setup: Setup, store: any EntitlementStore, within limit: Duration) async throws {
        let ends = try await setup.stored()
        try await ProcessTest.eventually(
            "the projection to read every verdict", within: limit, every: .milliseconds(200)
        ) {
            let positions = (try? await store.progress().positions) ?? []
            let reached = Dictionary(positions.map { ($0.partition, $0.nextOffset) }) { max($0, $1) }
            return ends.allSatisfy { reached[$0.key, default: 0] >= $0.value }
        }
    }

    /// Every account's entitlements and consumables from the API equal the expected ones, and its history holds each
    /// of its verdicts once.
    static func compare(_ verdicts: [Verdict], port: Int) async throws {
        let expected = Self.expected(verdicts, at: Date())
        let verdictCounts = Dictionary(grouping: verdicts, by: \.accountID).mapValues { Set($0.map(\.verdictID)).count }
        var mismatches: [String] = []
        for (account, want) in expected.sorted(by: { $0.key < $1.key }) {
            guard let reply = await get(port, "/v1/accounts/\(account)/entitlements"), reply.status == 200 else {
                mismatches.append("\(account): no answer")
                continue
            }
            let got = Dictionary(
                uniqueKeysWithValues: (reply.json["entitlements"] as? [[String: Any]] ?? []).map {
                    ($0["id"] as? String ?? "?", $0["active"] as? Bool ?? false)
                })
            let consumables = Dictionary(
                uniqueKeysWithValues: (reply.json["consumables"] as? [[String: Any]] ?? []).map {
                    ($0["product_id"] as? String ?? "?", $0["count"] as? Int ?? 0)
                })
            if got != want.entitlements || consumables != want.consumables {
                mismatches.append(
                    "\(account): got \(got) \(consumables), want \(want.entitlements) \(want.consumables)")
            }
            let history =
                await get(port, "/v1/accounts/\(account)/history?limit=200")?.json["entries"] as? [[String: Any]] ?? []
            let verdictEntries = history.filter { $0["kind"] as? String == "verdict" }
            if verdictEntries.count != verdictCounts[account] {
                mismatches.append(
                    "\(account): \(verdictEntries.count) verdicts in the history, want \(verdictCounts[account] ?? 0)")
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches.count) accounts differ: \(mismatches.prefix(5))")
    }

    @Test(
        "SIGKILL mid-stream and a rebalance: the next owners re-read what was not committed, nothing twice, nothing lost"
    )
    func killAndRebalance() async throws {
        let setup = try Setup()
        defer { setup.remove() }
        let (messages, verdicts) = Self.traffic(accounts: 120, now: Date())
        let ports = try (0..<3).map { _ in try FreeLocalPort.pick() }
        let first = try setup.start("first", port: ports[0])
        let second = try setup.start("second", port: ports[1])
        var third: ProcessTestChild?
        defer {
            first.signal(SIGKILL)
            second.signal(SIGKILL)
            third?.signal(SIGKILL)
        }
        try await setup.publish(messages[...])
        // Kill the first once it has applied some batches, but not all.
        try await ProcessTest.eventually("the first child to apply a few batches", within: .seconds(90)) {
            guard first.isRunning else { throw ProcessTestFailure("first exited:\n\(first.logTail())") }
            let metrics = await TestHTTP.get("http://127.0.0.1:\(ports[0])/metrics")?.body ?? ""
            return Self.counter("verify_entitlements_verdicts_total", in: metrics) >= 60
        }
        first.signal(SIGKILL)
        #expect(try await first.exitStatus(within: .seconds(20)) == 128 + SIGKILL)
        // A third joins, then the second leaves with SIGTERM (drains, commits, exits 0).
        third = try setup.start("third", port: ports[2])
        // Ready means it holds partitions: the group first waits out the killed member's session (librdkafka's
        // default 45 s) and then rebalances, which on two loaded cores took over a minute in a fresh-clone CI run.
        try await ProcessTest.eventually("the third child to answer", within: .seconds(150)) {
            await TestHTTP.get("http://127.0.0.1:\(ports[2])/readyz")?.status == 200
        }
        second.signal(SIGTERM)
        #expect(try await second.exitStatus(within: .seconds(60)) == 0, "\(second.logTail())")
        var logger = Logger(label: "process-test")
        logger.logLevel = .critical
        let store = try SQLiteEntitlementStore(path: String(setup.storeURL.dropFirst("sqlite:".count)), logger: logger)
        try await Self.waitUntilCaughtUp(setup, store: store, within: .seconds(120))
        await store.close()
        try await Self.compare(verdicts, port: ports[2])
    }

    @Test(
        "PostgreSQL stops mid-stream: not ready while it is down, nothing committed past the last write, then caught up"
    )
    func databaseOutage() async throws {
        try await LedgerTestSupport.withPrivatePostgres { url, control in
            let setup = try Setup(storeURL: url)
            defer { setup.remove() }
            let (messages, verdicts) = Self.traffic(accounts: 60, now: Date())
            let port = try FreeLocalPort.pick()
            let child = try setup.start("pg", port: port)
            defer { child.signal(SIGKILL) }
            let half = messages.count / 2
            try await setup.publish(messages[..<half])
            var logger = Logger(label: "process-test")
            logger.logLevel = .critical
            let store = try PostgresEntitlementStore(url: url, logger: logger)
            let runner = Task { try await store.run() }
            defer { runner.cancel() }
            try await ProcessTest.eventually("the child to be ready", within: .seconds(60)) {
                guard child.isRunning else { throw ProcessTestFailure("exited:\n\(child.logTail())") }
                return await TestHTTP.get("http://127.0.0.1:\(port)/readyz")?.status == 200
            }
            try await Self.waitUntilCaughtUp(setup, store: store, within: .seconds(90))

            try await LedgerTestSupport.shell("\(control) pause")
            do {
                try await setup.publish(messages[half...])
                try await ProcessTest.eventually("readyz to say the store is unreachable", within: .seconds(60)) {
                    let reply = await TestHTTP.get("http://127.0.0.1:\(port)/readyz")
                    return reply?.status == 503 && reply?.body.contains("store_unreachable") == true
                }
                #expect(child.isRunning, "the service must ride out the outage:\n\(child.logTail())")
            } catch {
                _ = try? await LedgerTestSupport.shell("\(control) resume")
                throw error
            }
            try await LedgerTestSupport.shell("\(control) resume")
            try await Self.waitUntilCaughtUp(setup, store: store, within: .seconds(120))
            try await ProcessTest.eventually("readyz 200 again", within: .seconds(30)) {
                await TestHTTP.get("http://127.0.0.1:\(port)/readyz")?.status == 200
            }
            try await Self.compare(verdicts, port: port)
        }
    }
}
