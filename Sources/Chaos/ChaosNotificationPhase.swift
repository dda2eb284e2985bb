import Crypto
import Decision
import Foundation
import Gateway
import Kafka
import Ledger
import Logging
import Messages
import Observability
import RateLimiter
import Synchronization
import Traffic

#if canImport(Glibc)
    import Glibc
#endif

/// The notification family's processes: `verify-worker gateway` (the simulator's notification URL) and
/// `verify-worker reconcile`, each killed and restarted by the family's faults.
/// What the notification family found: its figures, its violations, the accounts whose entitlements the lifecycle
/// changed, and the owner of every transaction granted before it or renewed during it (the account a reconciler's
/// correction must name).
typealias ChaosNotificationOutcome = (
    report: ChaosNotificationReport, violations: [ChaosViolation], touchedAccounts: Set<String>,
    owners: [String: String]
)

/// A family member the notification family shared a purchase with: the member's own transaction and account (also
/// the id of the member's verification job).
struct ChaosFamilyMember: Sendable, Hashable {
    var transactionID: String
    var account: String
    var jobID: String { account }
}

final class ChaosNotificationServices: Sendable {
    struct State {
        var gateway: ChildProcess?
        var gatewayEnvironment: [String: String] = [:]
        var gatewayMetricsPort = 0
        var reconciler: ChildProcess?
        var reconcilerEnvironment: [String: String] = [:]
        var reconcilerMetricsPort = 0
        /// When each reconciler process started and, once killed or stopped, ended.
        var reconcilerLives: [(started: ContinuousClock.Instant, ended: ContinuousClock.Instant?)] = []
        /// `verify_reconcile_notifications_recovered_total` of the processes already gone.
        var recoveredByGone = 0.0
        /// The Google Play counters (``ChaosEnvironment/playReconcileFigures()``) of the processes the Play lifecycle
        /// killed.
        var playReconcileByGone: [String: Double] = [:]
    }

    let state = Mutex(State())
}

extension ChaosEnvironment {
    /// Share of `server_api_rate` (50) the run's reconciler may spend: 5 Get Notification History requests per second.
    static let reconcileRateShare = 0.1
    /// Apple's retry schedule (1, 12, 24, 48 and 72 hours) divided by this: 0.125 s to 9 s, all five retries within
    /// 20 s, so the run sees the schedule end ("the reconciler's window has passed").
    static let notificationTimeScale = 28_800.0
    /// Apple's attempts per notification in production: the first and five retries.
    static let notificationAttempts = 6

    /// The Server API key of the run's workers and reconciler (`.p8` PEM; the simulator accepts any P-256 key).
    var serverAPIKeyFile: URL { directory.appendingPathComponent("server-api-key.p8") }

    func writeServerAPIKey() throws {
        try Data(P256.Signing.PrivateKey().pemRepresentation.utf8).write(to: serverAPIKeyFile)
    }

    /// The refund policy of the run's workers (``ChaosNotificationChecker/refundPolicy``).
    var refundPolicyFile: URL { directory.appendingPathComponent("refund-policy.json") }

    func writeRefundPolicy() throws {
        try Data(ChaosNotificationChecker.refundPolicy.utf8).write(to: refundPolicyFile)
    }

    // MARK: The phase

    /// After the receipt traffic settled: lifecycle events for a share of the granted purchases while the simulator
    /// drops 30 %, duplicates 10 % and delays its notifications, and the gateway, the reconciler and a worker are
    /// killed and restarted; then, once Apple's retries are over and the reconciler swept again, the ledger is
    /// compared with the simulator's truth. Returns the figures, the violations and the accounts whose entitlements
    /// the lifecycle changed (the entitlement comparison, whose truth knows no lifecycle, leaves them out).
    ///
    /// A purchase shared with a family member (`family_revoke`) is sent, as the member's own transaction, as a
    /// verification job of an account of the member's own (through `producer`; job ids ``familyMemberJobIDPrefix``),
    /// and the member's access is revoked only once that job was decided.
    func runNotificationPhase(
        verdicts: [Verdict], ledgerURL: String, stateDirectory: URL, producer: KafkaProducer
    ) async -> ChaosNotificationOutcome {
        var report = ChaosNotificationReport()
        var violations: [ChaosViolation] = []
        guard let simulator = simulatorBase else {
            return (report, [.runFailed("notification family: no simulator URL")], [], [:])
        }
        // What the receipt traffic granted, and what it decided without granting.
        var granted = Set<String>()
        var decided = Set<String>()
        for verdict in verdicts where !verdict.jobID.hasPrefix(NotificationJob.jobIDPrefix) {
            let ids = verdict.transactions.map(\.transactionID)
            if verdict.outcome == .granted { granted.formUnion(ids) } else { decided.formUnion(ids) }
        }
        let before: [String: TransactionClaim]
        do {
            before = try await ledgerClaims(url: ledgerURL, transactionIDs: granted)
        } catch {
            return (report, [.runFailed("notification family: the ledger could not be read: \(error)")], [], [:])
        }
        let candidates = before.values.filter { $0.revokedAt == nil && $0.environment != "Sandbox" }
            .map { (id: $0.transactionID, type: $0.productType) }
        let plan = ChaosLifecyclePlan(
            transactions: candidates, count: configuration.notificationTransactions, seed: configuration.seed)
        for name in plan.scenarios.values { report.scenarios[name, default: 0] += 1 }
        report.consumptionRequests = plan.consumptionRequested.count
        var owners: [String: String] = [:]
        for id in plan.scenarios.keys { owners[id] = before[id]?.accountID }
        var touchedAccounts = Set(owners.values)

        do {
            try await startGateway(stateDirectory: stateDirectory)
            try await startReconciler()
        } catch {
            return (
                report, [.runFailed("notification family: \(error)")], touchedAccounts, before.mapValues(\.accountID)
            )
        }
        let gatewayPort = notificationServices.state.withLock { $0.gatewayEnvironment["VERIFY_GATEWAY_PORT"] } ?? ""
        await ChaosHTTP.post(
            "\(simulator)/sim/notifications/target",
            json: "{\"url\": \"http://127.0.0.1:\(gatewayPort)/apple/notifications\"}")
        await ChaosHTTP.post(
            "\(simulator)/sim/faults",
            json: """
                {"notification_drop_ratio": 0.3, "notification_duplicate_ratio": 0.1, "notification_delay_ms": 200}
                """)

        // Events in four slices; the gateway, the reconciler and a worker are killed between them, while the
        // notifications of the slice before are still being delivered (each is delayed 200 ms).
        let started = clock.now
        let slices = 4
        let size = max(1, (plan.events.count + slices - 1) / slices)
        let faults: [String] = configuration.faults ? ["kill_gateway", "kill_reconciler", "kill_worker"] : []
        var records: [ChaosFaultRecord] = []
        // The newest renewal the run made of each chosen subscription (the target of a refund of its latest period).
        var latest: [String: String] = [:]
        // The family member each shared purchase was given, and the verdicts of the members' own jobs.
        var members: [String: ChaosFamilyMember] = [:]
        var memberVerdicts: [String: Verdict] = [:]
        for (index, start) in stride(from: 0, to: max(1, plan.events.count), by: size).enumerated() {
            for event in plan.events[start..<min(plan.events.count, start + size)] {
                var named = event.latestOfSubscription ? latest[event.transactionID] ?? event.transactionID : nil
                if event.familyMember {
                    guard let member = members[event.transactionID] else {
                        report.eventsRefused += 1
                        continue
                    }
                    // Apple revokes what the member was given: the member's grant comes first.
                    if memberVerdicts[member.jobID] == nil {
                        let undecided = Set(members.values.map(\.jobID)).subtracting(memberVerdicts.keys)
                        memberVerdicts.merge(
                            await recordedVerdicts(
                                ofJobs: undecided, ledgerURL: ledgerURL, within: configuration.settleTimeout)
                        ) { known, _ in known }
                    }
                    if let wrong = ChaosNotificationChecker.memberGrant(
                        transactionID: member.transactionID, account: member.account,
                        verdict: memberVerdicts[member.jobID])
                    {
                        violations.append(wrong)
                    }
                    named = member.transactionID
                }
                let answer = await ChaosHTTP.postForAnswer(
                    "\(simulator)/\(event.route)", json: named.map(event.body(naming:)) ?? event.body)
                guard let answer, answer.status == 200 else {
                    report.eventsRefused += 1
                    continue
                }
                report.eventsTriggered += 1
                if event.route == ChaosLifecycleEvent.familyShareRoute {
                    // The member's own transaction, sent by the member's own account.
                    guard let id = answer.object["transaction_id"] as? String else { continue }
                    let member = ChaosFamilyMember(
                        transactionID: id, account: "\(familyMemberJobIDPrefix)\(members.count)")
                    members[event.transactionID] = member
                    owners[id] = member.account
                    touchedAccounts.insert(member.account)
                    if let failed = await sendMemberJob(member, producer: producer) { violations.append(failed) }
                    continue
                }
                // A renewal answers the new transaction: it belongs to the original's owner.
                if let id = answer.object["transaction_id"] as? String, owners[id] == nil {
                    owners[id] = owners[event.transactionID]
                    latest[event.transactionID] = id
                }
            }
            if index < faults.count { records.append(await injectNotificationFault(faults[index], index: index)) }
        }
        record(faults: records)

        // Converged: the ledger agrees with the truth. Then Apple's retries end and the reconciler sweeps once more;
        // only then are the invariants checked (a late duplicate may still bring a second consumption answer).
        let checker = ChaosNotificationChecker(
            owners: owners, consumptionRequested: plan.consumptionRequested, granted: granted, notGranted: decided,
            expectedAnswers: plan.consumptionRequestedTypes.mapValues(ChaosNotificationChecker.expectedAnswer(for:)))
        report.transactionsCompared = owners.count
        let deadline = clock.now.advanced(by: configuration.settleTimeout)
        report.convergenceSeconds = await secondsToConverge(from: started, until: deadline) {
            await notificationViolations(checker, ledgerURL: ledgerURL, simulator: simulator)
        }
        let retriesOver = await waitForRetriesOver(simulator: simulator, until: deadline)
        let swept = await waitForAnotherSweep(within: .seconds(30))
        violations += ChaosViolation.unsettled(
            "notification family", retriesOver: retriesOver, swept: swept,
            retrying: "Apple's retries did not end within the settle timeout",
            unswept: "no reconciler sweep after Apple's retries ended")
        violations += await notificationViolations(checker, ledgerURL: ledgerURL, simulator: simulator)

        // Finish Transaction of every transaction the receipt traffic decided: a killed worker's claimed calls are
        // made by another worker's sweep once their claim lapses (15 s here), so the check waits for that.
        let finishIDs = granted.union(decided)
        report.finishChecked = finishIDs.count
        let finishDeadline = clock.now.advanced(by: .seconds(60))
        var finishFound = checker.finishCalls(truth: await truths(of: finishIDs, simulator: simulator))
        while !finishFound.isEmpty, clock.now < finishDeadline {
            try? await Task.sleep(for: .seconds(1))
            finishFound = checker.finishCalls(truth: await truths(of: finishIDs, simulator: simulator))
        }
        violations += finishFound

        // Figures, the budget, and the processes stopped.
        await ChaosHTTP.post("\(simulator)/sim/faults", json: "{}")
        await ChaosHTTP.post("\(simulator)/sim/notifications/target", json: "{\"url\": null}")
        let recoveredLive = await reconcilerMetric(MetricNames.reconcileNotificationsRecovered) ?? 0
        await stopNotificationServices()
        let (lives, recoveredGone) = notificationServices.state.withLock { ($0.reconcilerLives, $0.recoveredByGone) }
        report.reconcilerRecovered = Int(recoveredGone + recoveredLive)
        if let data = await ChaosHTTP.get("\(simulator)/sim/stats"),
            let stats = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
        {
            let counts = stats["notifications"] as? [String: Any] ?? [:]
            report.notificationsSent = (counts["sent"] as? NSNumber)?.intValue ?? 0
            report.notificationsFailed = (counts["failed"] as? NSNumber)?.intValue ?? 0
            report.notificationsRetried = (counts["retried"] as? NSNumber)?.intValue ?? 0
            report.notificationsDuplicated = (counts["duplicated"] as? NSNumber)?.intValue ?? 0
            let requests = stats["requests"] as? [String: Any] ?? [:]
            report.historyRequests = (requests["inApps/v1/notifications/history"] as? NSNumber)?.intValue ?? 0
        }
        report.undeliveredByApple = (await simulatorNotifications(simulator)).filter { !$0.delivered }.count
        let lived = lives.reduce(0.0) { $0 + Self.seconds($1.started.duration(to: $1.ended ?? clock.now)) }
        let rate = Self.reconcileRateShare * 50
        report.reconcileBudgetPerSecond = rate
        if let over = ChaosNotificationChecker.reconcileBudget(
            historyRequests: report.historyRequests, ratePerSecond: rate, seconds: lived, starts: lives.count)
        {
            violations.append(over)
        }
        logger.info(
            "chaos: notification family checked",
            metadata: [
                LogKeys.chaosMessages: "\(report.notificationsSent)",
                LogKeys.chaosExpected: "\(report.transactionsCompared)",
            ])
        return (
            report, violations, touchedAccounts,
            before.mapValues(\.accountID).merging(owners) { _, lifecycle in lifecycle }
        )
    }

    /// Job ids (and accounts) of the family members' verification jobs: `<prefix><n>`.
    var familyMemberJobIDPrefix: String { "\(runID)-family-member-" }

    /// Sends a family member's transaction as a verification job of the member's account, as the member's app does
    /// with the transaction StoreKit gives it (a `transaction_id` the worker looks up with the Server API). Nil when
    /// the job was delivered.
    private func sendMemberJob(_ member: ChaosFamilyMember, producer: KafkaProducer) async -> ChaosViolation? {
        let job = ReceiptJob(
            jobID: member.jobID, accountID: member.account, proof: .transactionID(member.transactionID),
            bundleID: ChaosApp.bundleID, submittedAt: Date())
        let submitter = JobSubmitter(producer: producer, attempts: ChaosSubmitter.attempts)
        guard (try? await submitter.send(key: job.messageKey, value: MessageCodec().encode(job))) != nil else {
            return .runFailed("notification family: the family member's job \(job.jobID) could not be submitted")
        }
        return nil
    }

    /// The verdicts the ledger recorded for `jobIDs`, polled until each has one or `limit` has passed.
    private func recordedVerdicts(
        ofJobs jobIDs: Set<String>, ledgerURL: String, within limit: Duration
    ) async -> [String: Verdict] {
        let deadline = clock.now.advanced(by: limit)
        var found: [String: Verdict] = [:]
        repeat {
            let waiting = jobIDs.subtracting(found.keys)
            let read: [String: Verdict] =
                (try? await withRunLedger(url: ledgerURL) {
                    ledger -> [String: Verdict] in
                    var read: [String: Verdict] = [:]
                    for jobID in waiting {
                        let snapshot = try await ledger.snapshot(
                            jobID: jobID, transactionIDs: [], originalTransactionIDs: [])
                        if let verdict = snapshot.priorVerdict { read[jobID] = verdict }
                    }
                    return read
                }) ?? [:]
            found.merge(read) { known, _ in known }
            if found.count < jobIDs.count { try? await Task.sleep(for: .milliseconds(250)) }
        } while found.count < jobIDs.count && clock.now < deadline
        return found
    }

    /// Drift and consumption answers now (finish calls are checked once, at the end).
    private func notificationViolations(
        _ checker: ChaosNotificationChecker, ledgerURL: String, simulator: String
    ) async -> [ChaosViolation] {
        let ids = Set(checker.owners.keys).union(checker.consumptionRequested)
        let truth = await truths(of: ids, simulator: simulator)
        let claims: [String: TransactionClaim]
        do {
            claims = try await ledgerClaims(url: ledgerURL, transactionIDs: ids)
        } catch {
            return [.runFailed("the ledger could not be read: \(error)")]
        }
        let families: [String: [TransactionClaim]]
        do {
            let originals = Set(claims.values.filter { $0.productType == .autoRenewable }.map(\.originalTransactionID))
            families = Dictionary(
                grouping: try await ledgerClaims(url: ledgerURL, originalTransactionIDs: originals).values,
                by: Self.subscriptionKey)
        } catch {
            return [.runFailed("the ledger could not be read: \(error)")]
        }
        let records: [String: (state: String, detail: String?)]
        do {
            records = try await consumptionRecords(
                of: checker.consumptionRequested, ledgerURL: ledgerURL, simulator: simulator)
        } catch {
            return [.runFailed("the ledger could not be read: \(error)")]
        }
        let now = Date()
        let ledger = claims.mapValues { claim in
            let family = families[Self.subscriptionKey(claim)] ?? [claim]
            return ChaosLedgerTransaction(
                accountID: claim.accountID, state: LedgerShow.state(of: claim, at: now),
                expiresMs: claim.expiresDate.map(\.epochMilliseconds),
                subscriptionState: LedgerShow.subscriptionState(of: family, at: now),
                subscriptionLatestID: TransactionClaim.latest(of: family)?.transactionID,
                revocationType: claim.revocation?.type?.rawValue, revocationPercentage: claim.revocation?.percentage,
                ownershipType: claim.ownershipType?.rawValue)
        }
        return checker.drift(truth: truth, ledger: ledger) + checker.consumptionAnswers(truth: truth, records: records)
    }

    /// The subscription a claim belongs to: its original transaction id, a family member's claims apart from the
    /// purchaser's (docs/LEDGER.md: two subscriptions even under one original transaction id).
    static func subscriptionKey(_ claim: TransactionClaim) -> String {
        claim.isFamilyShared ? "family:" + claim.originalTransactionID : claim.originalTransactionID
    }

    /// The ledger's follow-up record of the answer to each transaction's CONSUMPTION_REQUEST (keyed by the job id the
    /// gateway derives from the notification's id, which the simulator lists), as state and detail; a transaction
    /// without a record is absent.
    private func consumptionRecords(
        of ids: Set<String>, ledgerURL: String, simulator: String
    ) async throws -> [String: (state: String, detail: String?)] {
        guard !ids.isEmpty else { return [:] }
        let requests = await simulatorNotifications(simulator).filter {
            $0.type == "CONSUMPTION_REQUEST" && ids.contains($0.transactionID ?? "")
        }
        return try await withRunLedger(url: ledgerURL) { ledger in
            var records: [String: (state: String, detail: String?)] = [:]
            for request in requests {
                guard let id = request.transactionID,
                    let record = try await ledger.followUpRecord(
                        kind: .consumptionInformation, key: NotificationJob.jobIDPrefix + request.uuid.lowercased())
                else { continue }
                records[id] = (record.state.rawValue, record.detail)
            }
            return records
        }
    }

    /// The simulator's truth about each transaction it knows, eight requests at a time.
    func truths(of ids: Set<String>, simulator: String) async -> [String: ChaosTransactionTruth] {
        await withTaskGroup(of: ChaosTransactionTruth?.self) { group in
            var pending = ids.sorted().makeIterator()
            func addNext(_ group: inout TaskGroup<ChaosTransactionTruth?>) {
                guard let id = pending.next() else { return }
                group.addTask {
                    let encoded = id.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? id
                    guard let data = await ChaosHTTP.get("\(simulator)/sim/transactions/\(encoded)"),
                        let json = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
                    else { return nil }
                    return ChaosTransactionTruth(json: json)
                }
            }
            for _ in 0..<8 { addNext(&group) }
            var truths: [String: ChaosTransactionTruth] = [:]
            while let next = await group.next() {
                if let next { truths[next.transactionID] = next }
                addNext(&group)
            }
            return truths
        }
    }

    /// Every claim of the subscriptions with these original transaction ids, by transaction id.
    func ledgerClaims(url: String, originalTransactionIDs: Set<String>) async throws -> [String: TransactionClaim] {
        guard !originalTransactionIDs.isEmpty else { return [:] }
        let batches = Self.ledgerBatches(originalTransactionIDs)
        return try await withRunLedger(url: url) { ledger in
            var claims: [String: TransactionClaim] = [:]
            for batch in batches {
                let snapshot = try await ledger.snapshot(jobID: "", transactionIDs: [], originalTransactionIDs: batch)
                for claim in snapshot.claims { claims[claim.transactionID] = claim }
            }
            return claims
        }
    }

    /// The ledger's claims on `transactionIDs`, read in batches.
    func ledgerClaims(url: String, transactionIDs: Set<String>) async throws -> [String: TransactionClaim] {
        let batches = Self.ledgerBatches(transactionIDs)
        return try await withRunLedger(url: url) { ledger in
            var claims: [String: TransactionClaim] = [:]
            for batch in batches {
                let snapshot = try await ledger.snapshot(jobID: "", transactionIDs: batch, originalTransactionIDs: [])
                for claim in snapshot.claims where batch.contains(claim.transactionID) {
                    claims[claim.transactionID] = claim
                }
            }
            return claims
        }
    }

    /// `ids` in order, in batches of 200 (one ledger snapshot each).
    static func ledgerBatches(_ ids: Set<String>) -> [[String]] {
        let sorted = ids.sorted()
        return stride(from: 0, to: sorted.count, by: 200).map { Array(sorted[$0..<min(sorted.count, $0 + 200)]) }
    }

    struct SimulatorNotification {
        var delivered: Bool
        var attempts: Int
        var uuid = ""
        var type = ""
        var transactionID: String?
    }

    func simulatorNotifications(_ simulator: String) async -> [SimulatorNotification] {
        guard let data = await ChaosHTTP.get("\(simulator)/sim/notifications"),
            let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
        else { return [] }
        return (object["notifications"] as? [[String: Any]] ?? []).map {
            SimulatorNotification(
                delivered: $0["delivered"] as? Bool ?? false, attempts: ($0["attempts"] as? [Any])?.count ?? 0,
                uuid: $0["notification_uuid"] as? String ?? "", type: $0["notification_type"] as? String ?? "",
                transactionID: $0["transaction_id"] as? String)
        }
    }

    /// Waits until every notification was delivered or had all of Apple's attempts (polled; false at `deadline`).
    private func waitForRetriesOver(simulator: String, until deadline: ContinuousClock.Instant) async -> Bool {
        await poll(until: deadline) {
            await simulatorNotifications(simulator).allSatisfy {
                $0.delivered || $0.attempts >= Self.notificationAttempts
            }
        }
    }

    /// Waits until the reconciler finished one more sweep than it had now.
    private func waitForAnotherSweep(within limit: Duration) async -> Bool {
        await waitForIncrease(within: limit) { await reconcilerMetric(MetricNames.reconcileSweeps) }
    }

    /// Checks every 500 ms, until `deadline`, whether a phase's ledger agrees with the truth: the seconds from
    /// `started` to the first check that finds no violation, nil when none did.
    func secondsToConverge(
        from started: ContinuousClock.Instant, until deadline: ContinuousClock.Instant,
        _ violations: () async -> [ChaosViolation]
    ) async -> Double? {
        guard await poll(until: deadline, { await violations().isEmpty }) else { return nil }
        return Self.seconds(started.duration(to: clock.now))
    }

    /// Asks `done` every 500 ms until it says yes (true) or `deadline` passes (false).
    func poll(until deadline: ContinuousClock.Instant, _ done: () async -> Bool) async -> Bool {
        repeat {
            if await done() { return true }
            try? await Task.sleep(for: .milliseconds(500))
        } while clock.now < deadline
        return false
    }

    /// Waits, at most `limit`, until a counter reads more than it reads now (every 250 ms; a counter not there yet
    /// is below any reading).
    func waitForIncrease(within limit: Duration, of counter: () async -> Double?) async -> Bool {
        let deadline = clock.now.advanced(by: limit)
        let now = await counter()
        repeat {
            try? await Task.sleep(for: .milliseconds(250))
            if let value = await counter(), value > (now ?? -1) { return true }
        } while clock.now < deadline
        return false
    }

    private func reconcilerMetric(_ name: String) async -> Double? {
        let port = notificationServices.state.withLock { $0.reconcilerMetricsPort }
        guard let data = await ChaosHTTP.get("http://127.0.0.1:\(port)/metrics") else { return nil }
        let values = PrometheusTextSample(String(decoding: data, as: UTF8.self)).values(of: name)
        return values.isEmpty ? nil : values.reduce(0, +)
    }

    // MARK: Processes

    func startGateway(stateDirectory: URL) async throws {
        let bootstrap = workerEnvironment.withLock { $0["VERIFY_BROKERS"] } ?? ""
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("VERIFY_") }
        let metricsPort = chaosFreePort()
        environment.merge([
            "VERIFY_BROKERS": bootstrap, "VERIFY_GATEWAY_HOST": "127.0.0.1",
            "VERIFY_GATEWAY_PORT": "\(chaosFreePort())", "VERIFY_METRICS_HOST": "127.0.0.1",
            "VERIFY_METRICS_PORT": "\(metricsPort)",
            // Only Apple's notifications reach this gateway; its job route is not used.
            "VERIFY_GATEWAY_AUTH": "disabled",
            "VERIFY_TRUST_ANCHORS": stateDirectory.appendingPathComponent("pki-ec-root.pem").path,
            "VERIFY_LOG_FORMAT": "json", "VERIFY_LOG_LEVEL": configuration.workerLogLevel,
        ]) { _, new in new }
        if let play = playSimulator {
            // Google Play's pushes, authenticated by the Play simulator's OIDC tokens (its JWK set).
            environment.merge([
                "VERIFY_GATEWAY_PUBSUB_AUDIENCE": ChaosPlayApp.pushAudience,
                "VERIFY_GATEWAY_PUBSUB_SERVICE_ACCOUNT": ChaosPlayApp.pushServiceAccount,
                "VERIFY_GATEWAY_PUBSUB_JWKS_URL": "\(play.base)/oauth2/v3/certs",
                "VERIFY_GATEWAY_PUBSUB_SUBSCRIPTION": ChaosPlayApp.pushSubscription,
                "VERIFY_GATEWAY_GOOGLE_PLAY_PACKAGES": ChaosPlayApp.packageName,
            ]) { _, new in new }
        }
        try await startNotificationService(gateway: true, environment: environment, metricsPort: metricsPort)
    }

    func restartGateway() throws {
        let environment = notificationServices.state.withLock { $0.gatewayEnvironment }
        let process = try ChildProcess(
            name: "gateway", executable: configuration.binary.path, arguments: ["gateway"],
            environment: environment, logFile: log("gateway"), exitsWithParent: true)
        notificationServices.state.withLock { $0.gateway = process }
    }

    func startReconciler() async throws {
        var environment = workerEnvironment.withLock { $0 }
        let metricsPort = chaosFreePort()
        environment.merge([
            "VERIFY_WORKER_ID": "\(runID)-reconciler", "VERIFY_METRICS_PORT": "\(metricsPort)",
            "VERIFY_RECONCILE_INTERVAL_S": "1", "VERIFY_RECONCILE_LEASE_S": "5",
            "VERIFY_RECONCILE_RATE_SHARE": "\(Self.reconcileRateShare)", "VERIFY_RECONCILE_FIRST_LOOKBACK_H": "1",
        ]) { _, new in new }
        if playSimulator != nil {
            // Google Play: voided purchases of the last hour, and a re-read of every Play subscription (the run's
            // periods are shorter than the largest lead) at most every 10 s, within the Play quota share.
            environment.merge([
                "VERIFY_RECONCILE_GOOGLE_PLAY_QUOTA_SHARE": "\(Self.playReconcileQuotaShare)",
                "VERIFY_GOOGLE_PLAY_MINUTE_QUOTA": "\(Self.playMinuteQuota)",
                "VERIFY_RECONCILE_GOOGLE_PLAY_LOOKBACK_H": "1", "VERIFY_RECONCILE_GOOGLE_PLAY_REREAD_LEAD_S": "86400",
                "VERIFY_RECONCILE_REREAD_INTERVAL_S": "10",
            ]) { _, new in new }
        }
        try await startNotificationService(gateway: false, environment: environment, metricsPort: metricsPort)
    }

    /// Starts the gateway (or the reconciler) with the environment its restarts reuse, and waits until it is ready.
    private func startNotificationService(gateway: Bool, environment: [String: String], metricsPort: Int) async throws {
        notificationServices.state.withLock {
            if gateway {
                $0.gatewayEnvironment = environment
                $0.gatewayMetricsPort = metricsPort
            } else {
                $0.reconcilerEnvironment = environment
                $0.reconcilerMetricsPort = metricsPort
            }
        }
        if gateway { try restartGateway() } else { try restartReconciler() }
        guard await waitForNotificationService(gateway: gateway, within: .seconds(90)) else {
            let name = gateway ? "gateway" : "reconciler"
            throw ChaosError("the \(name) was not ready within 90 s (log: \(log(name).path))")
        }
    }

    func restartReconciler() throws {
        let environment = notificationServices.state.withLock { $0.reconcilerEnvironment }
        let process = try ChildProcess(
            name: "reconciler", executable: configuration.binary.path, arguments: ["reconcile"],
            environment: environment, logFile: log("reconciler"), exitsWithParent: true)
        let now = clock.now
        notificationServices.state.withLock {
            $0.reconciler = process
            $0.reconcilerLives.append((now, nil))
        }
    }

    /// Polls the service's `/readyz` until it answers 200; false when the time runs out or the process exits.
    func waitForNotificationService(gateway: Bool, within limit: Duration) async -> Bool {
        let (port, process) = notificationServices.state.withLock {
            gateway ? ($0.gatewayMetricsPort, $0.gateway) : ($0.reconcilerMetricsPort, $0.reconciler)
        }
        let deadline = clock.now.advanced(by: limit)
        while clock.now < deadline {
            if await ChaosHTTP.status("http://127.0.0.1:\(port)/readyz") == 200 { return true }
            if process?.exit != nil { return false }
            try? await Task.sleep(for: .milliseconds(100))
        }
        return false
    }

    /// SIGKILL to the gateway, the reconciler or a worker, held for the fault hold, then a restart; recovery is the
    /// time until the restarted process was ready.
    func injectNotificationFault(_ kind: String, index: Int) async -> ChaosFaultRecord {
        let at = secondsSinceStart
        let injected = clock.now
        var target = kind.replacingOccurrences(of: "kill_", with: "")
        var detail: String?
        logger.info("chaos: injecting", metadata: [LogKeys.chaosFault: "\(kind)"])
        switch kind {
        case "kill_gateway":
            let process = notificationServices.state.withLock { $0.gateway }
            process?.signal(SIGKILL)
            _ = await process?.waitForExit(timeout: .seconds(10))
        case "kill_reconciler":
            // Its metrics die with it: the recovered count so far is kept first.
            let recovered = await reconcilerMetric(MetricNames.reconcileNotificationsRecovered) ?? 0
            let process = notificationServices.state.withLock { $0.reconciler }
            process?.signal(SIGKILL)
            _ = await process?.waitForExit(timeout: .seconds(10))
            let now = clock.now
            notificationServices.state.withLock {
                $0.recoveredByGone += recovered
                if let last = $0.reconcilerLives.indices.last { $0.reconcilerLives[last].ended = now }
            }
        default:
            var random = SplitMix64(seed: configuration.seed &+ UInt64(index) &* 0x4E07)
            let victim = Int(random.next() % UInt64(max(1, configuration.workers)))
            target = "worker-\(victim)"
            worker(victim)?.signal(SIGKILL)
            _ = await worker(victim)?.waitForExit(timeout: .seconds(10))
        }
        try? await Task.sleep(for: configuration.faultHold)
        let restarted = clock.now
        var ready = false
        do {
            switch kind {
            case "kill_gateway":
                try restartGateway()
                ready = await waitForNotificationService(gateway: true, within: .seconds(60))
            case "kill_reconciler":
                try restartReconciler()
                ready = await waitForNotificationService(gateway: false, within: .seconds(60))
            default:
                let victim = Int(target.dropFirst("worker-".count)) ?? 0
                try restartWorker(victim)
                ready = await waitForReady(victim, within: .seconds(60))
            }
            if !ready { detail = "restarted \(target) not ready in 60 s" }
        } catch {
            detail = "restart failed: \(error)"
        }
        return ChaosFaultRecord(
            kind: kind, target: target, atSeconds: at, heldSeconds: Self.seconds(injected.duration(to: restarted)),
            recoverySeconds: ready ? Self.seconds(restarted.duration(to: clock.now)) : nil, detail: detail)
    }

    /// SIGTERM to the gateway and the reconciler (SIGKILL after 40 s).
    func stopNotificationServices() async {
        let (gateway, reconciler) = notificationServices.state.withLock { ($0.gateway, $0.reconciler) }
        for process in [gateway, reconciler].compactMap({ $0 }) where process.exit == nil {
            process.signal(SIGTERM)
            if await process.waitForExit(timeout: .seconds(40)) == nil { process.signal(SIGKILL) }
        }
        let now = clock.now
        notificationServices.state.withLock {
            if let last = $0.reconcilerLives.indices.last, $0.reconcilerLives[last].ended == nil {
                $0.reconcilerLives[last].ended = now
            }
        }
    }

    /// Kills what is left of the family (tear-down after a failure).
    func killNotificationServices() {
        let (gateway, reconciler) = notificationServices.state.withLock { ($0.gateway, $0.reconciler) }
        for process in [gateway, reconciler].compactMap({ $0 }) where process.exit == nil { process.signal(SIGKILL) }
    }
}
