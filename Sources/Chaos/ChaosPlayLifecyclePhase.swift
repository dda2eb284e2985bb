import Decision
import Foundation
import Gateway
import Kafka
import Ledger
import Logging
import Messages
import Observability
import Reconciler
import Synchronization
import Traffic

extension ChaosEnvironment {
    /// Share of `google_play_minute_quota` (3000, the default) the run's reconciler may spend on Google Play: 150
    /// calls a minute.
    static let playReconcileQuotaShare = 0.05
    static let playMinuteQuota = 3_000
    /// The reconciler's Play calls per wall-clock minute (`GooglePlayQuotaShare`'s rounding).
    static var playReconcileCallsPerMinute: Int {
        max(1, Int((playReconcileQuotaShare * Double(playMinuteQuota)).rounded(.down)))
    }

    /// The push faults of the Play lifecycle: 30 % dropped, 10 % duplicated, half delayed a second; without drops for
    /// the events only their notification announces (``ChaosPlayLifecycleEvent/isAnnouncedOnlyByItsNotification``).
    static func playPushFaults(dropping: Bool) -> String {
        let drop = dropping ? #"{"fault": "drop", "ratio": 0.3}, "# : ""
        return
            #"{"rules": [\#(drop){"fault": "duplicate", "ratio": 0.1}, {"fault": "delay", "delay_s": 1, "ratio": 0.5}]}"#
    }

    /// Google Play's lifecycle, after the App Store's: a restarted gateway takes the Play simulator's pushes on its
    /// Play route and a restarted reconciler sweeps voided purchases and re-reads Play subscriptions, while lifecycle
    /// events for a share of the granted Play purchases are pushed 30 % dropped, 10 % duplicated and delayed, and the
    /// gateway, the reconciler and a worker are killed and restarted. Once the pushes' retries are over and the
    /// reconciler swept again, the ledger is compared with the simulator's truth, the refund reviews' answers are
    /// counted and the reconciler's Play calls weighed against its share.
    ///
    /// Pending purchases take part too: a few are minted pending, sent by accounts of their own as verification jobs
    /// (through `producer`; their verdicts are `purchase_pending`, job ids ``playPendingJobIDPrefix``), and completed
    /// as lifecycle events once the ledger recorded them pending: the completion's notification grants each to its
    /// sender.
    func runPlayLifecyclePhase(
        purchases: [ChaosPlayPurchase], grantedTokens: Set<String>, ledgerURL: String, stateDirectory: URL,
        producer: KafkaProducer
    ) async -> (report: ChaosPlayLifecycleReport, violations: [ChaosViolation], owners: [String: String]) {
        var report = ChaosPlayLifecycleReport()
        report.quotaPerMinute = Self.playReconcileCallsPerMinute
        guard let play = playSimulator else {
            return (report, [.runFailed("Play lifecycle: no Play simulator")], [:])
        }
        let types = Dictionary(purchases.map { ($0.token, $0.type) }, uniquingKeysWith: { first, _ in first })
        let before: [String: [TransactionClaim]]
        do {
            before = try await playLedgerClaims(url: ledgerURL, tokens: grantedTokens)
        } catch {
            return (report, [.runFailed("Play lifecycle: the ledger could not be read: \(error)")], [:])
        }
        var owners: [String: String] = [:]
        let candidates = before.compactMap { token, claims -> (token: String, type: ProductType)? in
            guard let type = types[token], let latest = TransactionClaim.latest(of: claims), latest.revokedAt == nil,
                latest.environment != "Sandbox"
            else { return nil }
            return (token, type)
        }
        let pending = await sendPendingPurchases(
            count: max(2, configuration.playLifecyclePurchases / 10), play: play, ledgerURL: ledgerURL,
            producer: producer)
        let plan = ChaosPlayLifecyclePlan(
            purchases: candidates, count: configuration.playLifecyclePurchases, seed: configuration.seed,
            pending: pending.keys.sorted())
        for name in plan.scenarios.values { report.scenarios[name, default: 0] += 1 }
        for token in plan.scenarios.keys {
            owners[token] = before[token].flatMap { TransactionClaim.latest(of: $0) }?.accountID ?? pending[token]
        }

        // A gateway and a reconciler of their own (the App Store's stopped), with the Play simulator pushing to the
        // gateway's Play route.
        let firstLife = notificationServices.state.withLock { $0.reconcilerLives.count }
        let goneBefore = notificationServices.state.withLock { $0.playReconcileByGone }
        do {
            try await startGateway(stateDirectory: stateDirectory)
            try await startReconciler()
        } catch {
            return (report, [.runFailed("Play lifecycle: \(error)")], owners)
        }
        let gatewayPort = notificationServices.state.withLock { $0.gatewayEnvironment["VERIFY_GATEWAY_PORT"] } ?? ""
        let pushConfig: [String: Any] = [
            "endpoint": "http://127.0.0.1:\(gatewayPort)/google-play/notifications",
            "audience": ChaosPlayApp.pushAudience, "min_backoff_s": 1, "max_backoff_s": 4,
        ]
        let configured = await ChaosHTTP.post(
            "\(play.base)/sim/push/config",
            json: String(decoding: (try? JSONSerialization.data(withJSONObject: pushConfig)) ?? Data(), as: UTF8.self))
        guard configured,
            await ChaosHTTP.post("\(play.base)/sim/push/faults", json: Self.playPushFaults(dropping: true))
        else {
            await stopNotificationServices()
            return (
                report, [.runFailed("Play lifecycle: the Play simulator refused its push configuration")], owners
            )
        }

        // Events in four slices; the gateway, the reconciler and a worker are killed between them, while the pushes
        // of the slice before are still being delivered (half are delayed a second).
        let started = clock.now
        let slices = 4
        let size = max(1, (plan.events.count + slices - 1) / slices)
        let faults: [String] = configuration.faults ? ["kill_gateway", "kill_reconciler", "kill_worker"] : []
        var records: [ChaosFaultRecord] = []
        var reviewedOrders = Set<String>()
        for (index, start) in stride(from: 0, to: max(1, plan.events.count), by: size).enumerated() {
            for event in plan.events[start..<min(plan.events.count, start + size)] {
                let undropped = event.isAnnouncedOnlyByItsNotification
                if undropped {
                    await ChaosHTTP.post("\(play.base)/sim/push/faults", json: Self.playPushFaults(dropping: false))
                }
                let answer = await ChaosHTTP.postForAnswer("\(play.base)/sim/lifecycle", json: event.body)
                if undropped {
                    await ChaosHTTP.post("\(play.base)/sim/push/faults", json: Self.playPushFaults(dropping: true))
                }
                guard let answer, answer.status == 200 else {
                    report.eventsRefused += 1
                    continue
                }
                report.eventsTriggered += 1
                // A replacement is a new token: it belongs to the owner of the subscription it replaced.
                if let replacement = answer.object["replacement"] as? [String: Any],
                    let token = replacement["purchase_token"] as? String
                {
                    owners[token] = owners[event.token]
                }
                if let review = answer.object["review"] as? [String: Any], let order = review["order_id"] as? String {
                    reviewedOrders.insert(order)
                }
            }
            if index < faults.count {
                if faults[index] == "kill_reconciler" { await keepPlayReconcileFigures() }
                records.append(await injectNotificationFault(faults[index], index: index + 3))
            }
        }
        record(faults: records)

        // Converged: the ledger agrees with the truth and every review is answered. Then the pushes' retries end and
        // the reconciler sweeps once more; only then are the invariants checked (a late duplicate may still bring a
        // second answer).
        let checker = ChaosPlayLifecycleChecker(owners: owners, reviewedOrders: reviewedOrders)
        report.purchasesCompared = owners.count
        report.refundReviews = reviewedOrders.count
        // A subscription whose push was lost is brought right by its re-read, which may come only after a pass over
        // every subscription in the re-read window (the never re-read first) at the reconciler's share.
        report.rereadBacklog = await playRereadBacklog(ledgerURL: ledgerURL)
        let rereadPass = Duration.seconds(60 * Double(report.rereadBacklog) / Double(report.quotaPerMinute))
        let deadline = clock.now.advanced(by: configuration.settleTimeout + rereadPass)
        report.convergenceSeconds = await secondsToConverge(from: started, until: deadline) {
            await playLifecycleViolations(checker, ledgerURL: ledgerURL, play: play)
        }
        var violations: [ChaosViolation] = []
        let pushesOver = await waitForPlayPushesOver(play, until: deadline)
        // The reconciler sweeps between passes of re-reads, and a pass (at most a batch) waits for its share.
        let batch = min(report.rereadBacklog, GooglePlayReconcileSettings().rereadBatch)
        let swept = await waitForAnotherPlaySweep(
            within: .seconds(30) + .seconds(60 * Double(batch) / Double(report.quotaPerMinute)))
        violations += ChaosViolation.unsettled(
            "Play lifecycle", retriesOver: pushesOver, swept: swept,
            retrying: "the Play simulator's pushes were still being retried at the settle timeout",
            unswept: "no voided-purchases sweep after the pushes' retries ended")
        let found = await playLifecycleViolations(checker, ledgerURL: ledgerURL, play: play)
        violations += found
        report.refundReviewsAnswered =
            reviewedOrders.count
            - Set(
                found.compactMap { violation -> String? in
                    if case .playRefundReviewAnswers(let order, _) = violation { return order }
                    return nil
                }
            ).count

        // Figures, the quota share, and the processes stopped.
        await ChaosHTTP.post("\(play.base)/sim/push/faults", json: "{}")
        await ChaosHTTP.post("\(play.base)/sim/push/config", json: "{\"endpoint\": null}")
        let live = await playReconcileFigures()
        await stopNotificationServices()
        let (lives, goneAfter) = notificationServices.state.withLock {
            (Array($0.reconcilerLives.dropFirst(firstLife)), $0.playReconcileByGone)
        }
        func total(_ name: String) -> Int {
            Int((goneAfter[name] ?? 0) - (goneBefore[name] ?? 0) + (live[name] ?? 0))
        }
        report.voidedPages = total(MetricNames.reconcileVoidedPages)
        report.voidedFound = total(MetricNames.reconcileVoidedFound)
        report.rereads = total(MetricNames.reconcilePlayRereads)
        report.quotaSpent = total(MetricNames.reconcileQuotaSpent)
        if let data = await ChaosHTTP.get("\(play.base)/sim/pushes"),
            let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any],
            let summary = object["summary"] as? [String: Any]
        {
            func count(_ key: String) -> Int { (summary[key] as? NSNumber)?.intValue ?? 0 }
            report.pushesPublished = count("published")
            report.pushesAcknowledged = count("acknowledged")
            report.pushesDropped = count("dropped")
            report.pushesDuplicated = count("duplicated")
            report.pushAttempts = count("attempts")
        }
        // Wall-clock times of the reconciler's lives (the quota share counts wall-clock minutes).
        let (wallNow, instantNow) = (Date(), clock.now)
        func wallMs(_ instant: ContinuousClock.Instant) -> Int64 {
            Int64(wallNow.timeIntervalSince1970 * 1000) - Int64(Self.seconds(instant.duration(to: instantNow)) * 1000)
        }
        if let over = ChaosPlayLifecycleChecker.reconcileBudget(
            spent: report.quotaSpent, callsPerMinute: report.quotaPerMinute,
            lives: lives.map { (wallMs($0.started), wallMs($0.ended ?? instantNow)) })
        {
            violations.append(over)
        }
        logger.info(
            "chaos: Google Play lifecycle checked",
            metadata: [
                LogKeys.chaosMessages: "\(report.pushesPublished)",
                LogKeys.chaosExpected: "\(report.purchasesCompared)",
            ])
        return (report, violations, owners)
    }

    /// Job ids (and accounts) of the pending purchases' verification jobs: `<prefix><n>`.
    var playPendingJobIDPrefix: String { "\(runID)-play-pending-" }

    /// Mints `count` pending purchases (one-time products and subscriptions in turn), sends each as a verification job
    /// of an account of its own, and waits (at most 60 s) until the ledger recorded each pending; returns the tokens
    /// it recorded, with their senders.
    private func sendPendingPurchases(
        count: Int, play: ChaosPlaySimulator, ledgerURL: String, producer: KafkaProducer
    ) async -> [String: String] {
        var senders: [String: String] = [:]
        for index in 0..<count {
            let type: ProductType = index % 2 == 0 ? .nonConsumable : .autoRenewable
            let product = type == .autoRenewable ? ChaosApp.subscription : ChaosApp.nonConsumable
            guard
                let purchase = try? await play.mint(
                    packageName: ChaosPlayApp.packageName, productID: product, type: type, pending: true)
            else { continue }
            let account = "\(playPendingJobIDPrefix)\(index)"
            let job = ReceiptJob(
                jobID: account, accountID: account, proof: .googlePlay(purchase.proof()), submittedAt: Date())
            let submitter = JobSubmitter(producer: producer, attempts: ChaosSubmitter.attempts)
            guard (try? await submitter.send(key: job.messageKey, value: MessageCodec().encode(job))) != nil else {
                continue
            }
            senders[purchase.token] = account
        }
        let deadline = clock.now.advanced(by: .seconds(60))
        var recorded: [String: String] = [:]
        while recorded.count < senders.count, clock.now < deadline {
            let waiting = senders.filter { recorded[$0.key] == nil }
            let found: [String: String] =
                (try? await withRunLedger(url: ledgerURL) {
                    ledger -> [String: String] in
                    var found: [String: String] = [:]
                    for (token, account) in waiting {
                        if try await ledger.pendingPlayPurchase(purchaseToken: token)?.accountID == account {
                            found[token] = account
                        }
                    }
                    return found
                }) ?? [:]
            recorded.merge(found) { known, _ in known }
            if recorded.count < senders.count { try? await Task.sleep(for: .milliseconds(500)) }
        }
        return recorded
    }

    /// The ledger's claims of these Google Play purchases, by purchase token (a purchase's original transaction id).
    private func playLedgerClaims(url: String, tokens: Set<String>) async throws -> [String: [TransactionClaim]] {
        Dictionary(
            grouping: try await ledgerClaims(url: url, originalTransactionIDs: tokens).values,
            by: \.originalTransactionID)
    }

    /// Drift and refund-review answers now.
    private func playLifecycleViolations(
        _ checker: ChaosPlayLifecycleChecker, ledgerURL: String, play: ChaosPlaySimulator
    ) async -> [ChaosViolation] {
        let tokens = Set(checker.owners.keys)
        let claims: [String: [TransactionClaim]]
        do {
            claims = try await playLedgerClaims(url: ledgerURL, tokens: tokens)
        } catch {
            return [.runFailed("the ledger could not be read: \(error)")]
        }
        let now = Date()
        let ledger = claims.compactMapValues { claims -> ChaosPlayLedgerPurchase? in
            guard let latest = TransactionClaim.latest(of: claims) else { return nil }
            let state = latest.revokedAt != nil ? "revoked" : latest.isActive(at: now) ? "active" : "expired"
            return ChaosPlayLedgerPurchase(
                accountID: latest.accountID, state: state, expiresMs: latest.expiresDate.map(\.epochMilliseconds))
        }
        let truth = await playLifecycleTruths(play, tokens: tokens)
        var reviews: [ChaosPlayRefundReview] = []
        if let data = await ChaosHTTP.get("\(play.base)/sim/reviews"),
            let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
        {
            reviews = (object["reviews"] as? [[String: Any]] ?? []).compactMap(ChaosPlayRefundReview.init(json:))
        }
        return checker.drift(truth: truth, ledger: ledger) + checker.refundReviewAnswers(reviews)
    }

    /// The simulator's truth about each token, eight requests at a time.
    private func playLifecycleTruths(
        _ play: ChaosPlaySimulator, tokens: Set<String>
    ) async -> [String: ChaosPlayLifecycleTruth] {
        await withTaskGroup(of: (String, ChaosPlayLifecycleTruth?).self) { group in
            var pending = tokens.sorted().makeIterator()
            func addNext(_ group: inout TaskGroup<(String, ChaosPlayLifecycleTruth?)>) {
                guard let token = pending.next() else { return }
                group.addTask {
                    guard let data = await ChaosHTTP.get("\(play.base)/sim/purchases/\(token)"),
                        let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
                    else { return (token, nil) }
                    return (token, ChaosPlayLifecycleTruth(json: object))
                }
            }
            for _ in 0..<8 { addNext(&group) }
            var truths: [String: ChaosPlayLifecycleTruth] = [:]
            while let (token, truth) = await group.next() {
                if let truth { truths[token] = truth }
                addNext(&group)
            }
            return truths
        }
    }

    /// Waits until no push is still to be delivered (each acknowledged, dropped or expired); false at `deadline`.
    private func waitForPlayPushesOver(
        _ play: ChaosPlaySimulator, until deadline: ContinuousClock.Instant
    ) async -> Bool {
        await poll(until: deadline) {
            guard let data = await ChaosHTTP.get("\(play.base)/sim/pushes"),
                let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any],
                let summary = object["summary"] as? [String: Any]
            else { return false }
            return (summary["pending"] as? NSNumber)?.intValue == 0
        }
    }

    /// How many Play subscriptions the reconciler's re-reads cover now (its window: a day ahead, as the run
    /// configures it, and the default three days back), whether or not they were re-read lately.
    private func playRereadBacklog(ledgerURL: String) async -> Int {
        let now = Date()
        return
            (try? await withRunLedger(url: ledgerURL) { ledger in
                try await ledger.unsurePlaySubscriptions(
                    packages: [ChaosPlayApp.packageName], from: now.addingTimeInterval(-3 * 86_400),
                    to: now.addingTimeInterval(86_400), rereadBefore: now.addingTimeInterval(86_400), limit: 1_000_000
                ).count
            }) ?? 0
    }

    /// Waits until the reconciler completed one more voided-purchases sweep than it had now.
    private func waitForAnotherPlaySweep(within limit: Duration) async -> Bool {
        await waitForIncrease(within: limit) { await playReconcileFigures()[MetricNames.reconcileVoidedSweeps] }
    }

    /// The live reconciler's Google Play counters (each summed over its series).
    func playReconcileFigures() async -> [String: Double] {
        let port = notificationServices.state.withLock { $0.reconcilerMetricsPort }
        guard let data = await ChaosHTTP.get("http://127.0.0.1:\(port)/metrics") else { return [:] }
        let sample = PrometheusTextSample(String(decoding: data, as: UTF8.self))
        var figures: [String: Double] = [:]
        // Sweeps that completed only: a failed one, or one that lost its lease, read nothing to the end.
        let completed = sample.samples.filter {
            $0.series.hasPrefix(MetricNames.reconcileVoidedSweeps + "{") && $0.series.contains(#"result="completed""#)
        }
        if !completed.isEmpty { figures[MetricNames.reconcileVoidedSweeps] = completed.reduce(0) { $0 + $1.value } }
        for name in [
            MetricNames.reconcileVoidedPages, MetricNames.reconcileVoidedFound, MetricNames.reconcilePlayRereads,
            MetricNames.reconcileQuotaSpent,
        ] {
            let values = sample.values(of: name)
            if !values.isEmpty { figures[name] = values.reduce(0, +) }
        }
        return figures
    }

    /// Keeps the live reconciler's Google Play counters before it is killed (its metrics die with it).
    func keepPlayReconcileFigures() async {
        let figures = await playReconcileFigures()
        notificationServices.state.withLock { $0.playReconcileByGone.merge(figures, uniquingKeysWith: +) }
    }
}
