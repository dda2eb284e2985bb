import AppleClients
import Demo
import Entitlements
import Foundation
import Kafka
import Logging
import Messages
import Operations
import StoreHTTP
import Synchronization
import Traffic

#if canImport(Glibc)
    import Glibc
#endif

/// The entitlement service's three figures (`verify-worker bench entitlements`): projection
/// throughput, API latency under an open-loop load, publication-to-visibility delay.
package enum EntitlementsBenchmark {
    /// A part of the benchmark could not run.
    package struct Failure: Error, CustomStringConvertible {
        package var code: String
        package var description: String
    }

    package struct Report: Encodable {
        package init() {}

        package var benchmark = "entitlements"
        package var projection: [Projection] = []
        package var api: Latency?
        package var visibility: Latency?
    }

    package struct Projection: Encodable {
        package var backend: String
        package var verdicts: Int
        package var batch: Int
        package var seconds: Double
        package var cpuSeconds: Double
        package var verdictsPerSecond: Double
        package var verdictsPerCPUSecond: Double

        package enum CodingKeys: String, CodingKey {
            case backend, verdicts, batch, seconds
            case cpuSeconds = "cpu_seconds"
            case verdictsPerSecond = "verdicts_per_second"
            case verdictsPerCPUSecond = "verdicts_per_cpu_second"
        }
    }

    package struct Latency: Encodable {
        package var what: String
        package var count: Int
        package var ratePerSecond: Double
        package var p50Milliseconds: Double
        package var p99Milliseconds: Double
        package var maximumMilliseconds: Double
        package var errors: Int

        package enum CodingKeys: String, CodingKey {
            case what, count, errors
            case ratePerSecond = "rate_per_second"
            case p50Milliseconds = "p50_ms"
            case p99Milliseconds = "p99_ms"
            case maximumMilliseconds = "max_ms"
        }

        package init(what: String, samples: [Double], rate: Double, errors: Int) {
            let sorted = samples.sorted()
            func percentile(_ p: Double) -> Double {
                guard !sorted.isEmpty else { return 0 }
                return sorted[min(sorted.count - 1, Int((p * Double(sorted.count)).rounded(.up)) - 1)]
            }
            self.what = what
            count = samples.count
            ratePerSecond = rate
            p50Milliseconds = percentile(0.50)
            p99Milliseconds = percentile(0.99)
            maximumMilliseconds = sorted.last ?? 0
            self.errors = errors
        }
    }

    package static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
            + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }

    /// Decodes and projects every verdict, one batch (one database transaction) after another.
    package static func project(
        _ traffic: BenchEntitlementTraffic, store: any EntitlementStore, backend: String, batch: Int
    ) async throws -> Projection {
        let reader = VerdictReader()
        let clock = ContinuousClock()
        let cpuStart = cpuSeconds()
        let started = clock.now
        var offset = 0
        while offset < traffic.messages.count {
            let slice = traffic.messages[offset..<min(offset + batch, traffic.messages.count)]
            let inputs = slice.enumerated().map { index, bytes in
                reader.read(bytes, position: "bench/0/\(offset + index)")
            }
            offset += slice.count
            _ = try await store.project(
                ProjectionBatch(
                    inputs: inputs,
                    positions: [
                        TopicPosition(topic: "bench", partition: 0, nextOffset: Int64(offset), recordTime: Date())
                    ]),
                catalog: BenchEntitlementTraffic.catalog, recordedAt: Date())
        }
        let elapsed = started.duration(to: clock.now)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let cpu = cpuSeconds() - cpuStart
        return Projection(
            backend: backend, verdicts: traffic.messages.count, batch: batch, seconds: seconds, cpuSeconds: cpu,
            verdictsPerSecond: Double(traffic.messages.count) / seconds,
            verdictsPerCPUSecond: Double(traffic.messages.count) / max(cpu, 0.001))
    }

    /// GET entitlements of random accounts at `rate` requests/s for `seconds`, open loop.
    package static func apiLatency(
        store: any EntitlementStore, accounts: [String], rate: Int, seconds: Int, logger: Logger
    ) async throws -> Latency {
        let token = "bench-token-0123456789abcdef0123"
        let api = EntitlementAPI(
            configuration: .init(
                host: "127.0.0.1", port: 0, limits: .init(perCaller: Double(rate) * 10, callerBurst: rate * 10)),
            store: store, catalog: BenchEntitlementTraffic.catalog,
            tokens: try AccessTokens(contents: "bench:\(token)"), logger: logger, readiness: { .ready })
        return try await HarnessServices.run([TaskService { try await api.run() }], logger: logger) {
            guard let port = await api.waitUntilListening() else {
                throw Failure(code: "api_not_listening", description: "the API did not listen")
            }
            let engine = try CurlHTTPEngine(
                configuration: HTTPEngineConfiguration(
                    maximumHostConnections: 256, maximumTotalConnections: 256, connectTimeout: .seconds(5),
                    requestTimeout: .seconds(10), maximumResponseBytes: 1 << 20, easyHandlePoolSize: 256,
                    userAgent: "verify-worker-bench"))
            defer { engine.shutdown() }
            let samples = BenchSamples()
            let clock = ContinuousClock()
            let total = rate * seconds
            let interval = Duration.seconds(1) / rate
            let start = clock.now + .milliseconds(200)
            await withTaskGroup(of: Void.self) { group in
                for index in 0..<total {
                    let due = start + interval * index
                    try? await Task.sleep(until: due, clock: clock)
                    let account = accounts[index % accounts.count]
                    group.addTask {
                        let request = TransportRequest(
                            url: "http://127.0.0.1:\(port)/v1/accounts/\(account)/entitlements",
                            headers: [("Authorization", "Bearer \(token)")], timeout: .seconds(10))
                        let status = (try? await engine.execute(request))?.status
                        let latency = due.duration(to: clock.now)
                        let ms =
                            Double(latency.components.seconds) * 1000 + Double(latency.components.attoseconds) / 1e15
                        samples.add(ms, failed: status != 200)
                    }
                }
            }
            return Latency(
                what: "GET /v1/accounts/{id}/entitlements, open loop", samples: samples.values,
                rate: Double(rate), errors: samples.failures)
        }
    }

    /// Produces verdicts at `rate`/s to a mock cluster for `seconds` while the service projects them.
    package static func visibility(rate: Int, seconds: Int, directory: URL, logger: Logger) async throws -> Latency {
        let cluster = try MockKafkaCluster(brokers: 1)
        try cluster.createTopic(Topics.verdicts, partitions: 8)
        let tokens = directory.appendingPathComponent("tokens")
        try "bench:bench-token-0123456789abcdef0123\n".write(to: tokens, atomically: true, encoding: .utf8)
        var sources = ConfigurationSources(table: EntitlementsConfiguration.table)
        try sources.addFlags([
            "brokers": cluster.bootstrapServers,
            "entitlements_store_url": "sqlite:"
                + directory.appendingPathComponent("visibility.sqlite").path,
            "catalog_file": "(built in)", "entitlements_tokens_file": tokens.path, "entitlements_port": "0",
            "entitlements_host": "127.0.0.1", "entitlements_events_topic": "",
            "kafka_properties": DemoRun.mockFetchProperties,
        ])
        let samples = BenchSamples()
        // Records produced before this (ms since 1970) are warm-up: the group's first fetch after its assignment
        // takes about a second on the mock cluster, a start-up cost, not a steady-state delay.
        let measureFrom = BenchThreshold()
        let service = try EntitlementsService(
            configuration: try EntitlementsConfiguration(sources), catalog: BenchEntitlementTraffic.catalog,
            tokens: try AccessTokens(contents: "bench:bench-token-0123456789abcdef0123"), logger: logger,
            onBatchWritten: { records, writtenAt in
                let written = writtenAt.timeIntervalSince1970 * 1000
                for record in records where Double(record) >= measureFrom.value {
                    samples.add(written - Double(record), failed: false)
                }
            })
        return try await HarnessServices.run(
            [TaskService { try await service.run(handlingSignals: false) }], logger: logger
        ) {
            guard await service.waitUntilListening() != nil, await service.waitUntilMigrated() else {
                throw Failure(code: "service_not_started", description: "the entitlement service did not start")
            }
            let producer = try KafkaProducer(
                configuration: KafkaProducerConfiguration(
                    bootstrapServers: cluster.bootstrapServers, lingerMilliseconds: 1)
            )
            let warmUp = 3
            let traffic = BenchEntitlementTraffic.make(count: rate * (seconds + warmUp))
            // The group's first assignment before any record, then three seconds of warm-up (the backlog of the first
            // fetch drains), then the measured run.
            let joined = ContinuousClock.now + .seconds(60)
            while service.projector.assignment.isEmpty, ContinuousClock.now < joined {
                try await Task.sleep(for: .milliseconds(20))
            }
            let clock = ContinuousClock()
            let tick = Duration.milliseconds(10)
            let perTick = max(1, rate / 100)
            var sent = 0
            let start = clock.now
            await withTaskGroup(of: Void.self) { group in
                var step = 0
                while sent < traffic.messages.count {
                    if sent >= rate * warmUp, measureFrom.value == .greatestFiniteMagnitude {
                        measureFrom.set(Date().timeIntervalSince1970 * 1000)
                    }
                    try? await Task.sleep(until: start + tick * step, clock: clock)
                    step += 1
                    for _ in 0..<perTick where sent < traffic.messages.count {
                        let value = traffic.messages[sent]
                        let key = traffic.keys[sent]
                        sent += 1
                        group.addTask {
                            do {
                                _ = try await producer.send(
                                    KafkaProducerRecord(topic: Topics.verdicts, key: key, value: value))
                            } catch {
                                samples.recordFailure()
                            }
                        }
                    }
                }
            }
            // Let the last records be applied.
            let deadline = clock.now + .seconds(30)
            while samples.values.count < traffic.messages.count - rate * warmUp, clock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
            await producer.shutdown(timeout: .seconds(5))
            await service.shutdown()
            return Latency(
                what: "Kafka timestamp of a verdict to the commit that made it visible",
                samples: samples.values, rate: Double(rate), errors: samples.failures)
        }
    }
}

/// Synthetic verdicts shaped like a busy app's: mostly first purchases, then renewals, consumables, refunds,
/// `already_granted` repeats and rejections that change nothing.
package struct BenchEntitlementTraffic: Sendable {
    package var messages: [[UInt8]]
    package var keys: [[UInt8]]
    package var accounts: [String]

    package static let catalog = Catalog(products: [
        .init(id: "pro.monthly", type: .autoRenewable, entitlements: ["premium"]),
        .init(id: "lifetime", type: .nonConsumable, entitlements: ["premium"]),
        .init(id: "coins.100", type: .consumable),
    ])

    package static func make(count: Int) -> BenchEntitlementTraffic {
        let codec = MessageCodec()
        let now = Date()
        let accounts = (0..<max(1, count / 5)).map { "acct-\($0)" }
        var messages: [[UInt8]] = []
        var keys: [[UInt8]] = []
        messages.reserveCapacity(count)
        let run = UUID().uuidString.prefix(8)
        for index in 0..<count {
            let account = accounts[index % accounts.count]
            let round = index / accounts.count
            let id = "\(run)-\(index)"
            let subscription = "\(run)-s-\(index % accounts.count)"
            let decidedAt = now.addingTimeInterval(Double(index) / 1000)
            /// A period of the account's monthly subscription.
            func monthly(_ transactionID: String, revokedAt: Date? = nil) -> Verdict.Transaction {
                .init(
                    transactionID: transactionID, originalTransactionID: subscription, productID: "pro.monthly",
                    purchaseDate: now, expiresDate: now.addingTimeInterval(2_592_000), revokedAt: revokedAt)
            }
            let verdict: Verdict
            switch index % 20 {
            case 0..<9:
                verdict = Verdict(
                    verdictID: Verdict.legacyVerdictID(jobID: id),
                    jobID: id, accountID: account, outcome: .granted, decidedBy: .apple, environment: "Production",
                    transactions: [monthly(round == 0 ? subscription : id)], decidedAt: decidedAt)
            case 9..<11:
                verdict = Verdict(
                    verdictID: Verdict.legacyVerdictID(jobID: id),
                    jobID: id, accountID: account, outcome: .granted, decidedBy: .signature,
                    transactions: [.init(transactionID: id, productID: "coins.100", purchaseDate: now, quantity: 1)],
                    decidedAt: decidedAt)
            case 11..<13:
                verdict = Verdict(
                    verdictID: Verdict.legacyVerdictID(jobID: id),
                    jobID: id, accountID: account, outcome: .alreadyGranted, reason: .alreadyOwned, decidedBy: .ledger,
                    transactions: [monthly(subscription)], decidedAt: decidedAt)
            case 13:
                verdict = Verdict(
                    verdictID: Verdict.legacyVerdictID(jobID: id),
                    jobID: id, accountID: account, outcome: .rejected, reason: .revoked, decidedBy: .apple,
                    transactions: [monthly(subscription, revokedAt: now)], decidedAt: decidedAt)
            default:
                verdict = Verdict(
                    verdictID: Verdict.legacyVerdictID(jobID: id),
                    jobID: id, accountID: account, outcome: .rejected,
                    reason: [.wrongBundle, .malformed, .replayed, .notAuthenticated][index % 4], decidedBy: .prefilter,
                    decidedAt: decidedAt)
            }
            messages.append(codec.encode(verdict))
            keys.append(Array(account.utf8))
        }
        return BenchEntitlementTraffic(messages: messages, keys: keys, accounts: accounts)
    }
}

/// Latency samples collected by many tasks, and failures (counted, not sampled).
package final class BenchSamples: Sendable {
    private struct State {
        package var values: [Double] = []
        package var failures = 0
    }
    private let state = Mutex(State())

    package func add(_ value: Double, failed: Bool) {
        state.withLock { state in
            state.values.append(value)
            if failed { state.failures += 1 }
        }
    }

    package func recordFailure() { state.withLock { $0.failures += 1 } }

    package var values: [Double] { state.withLock { $0.values } }
    package var failures: Int { state.withLock { $0.failures } }
}

/// A threshold set once by the load loop and read by the projection's callback.
package final class BenchThreshold: Sendable {
    private let state = Mutex<Double>(.greatestFiniteMagnitude)
    package func set(_ value: Double) { state.withLock { $0 = value } }
    package var value: Double { state.withLock { $0 } }
}
