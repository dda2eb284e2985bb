import CodedErrors
import Foundation
import Messages
import Receipts
import Synchronization
import Testing

@testable import AppleSimulator

@Suite("Apple simulator: notification delivery", .timeLimit(.minutes(2)))
struct AppleSimulatorNotificationDeliveryTests {
    static func subscription(_ environment: AppleEnvironment, now: Date) -> MintRequest {
        MintRequest(
            bundleId: "com.example.app", productId: "com.example.app.monthly", format: .signedTransaction,
            environment: environment, expiresDateMs: Int64(now.timeIntervalSince1970 * 1000) + 30 * 86_400_000)
    }

    @Test("production: a dropped notification is retried five times, 1, 12, 24, 48 and 72 scaled hours apart")
    func productionRetrySchedule() async throws {
        let clock = AppleSimManualClock()
        let scheduler = AppleSimManualScheduler(clock: clock)
        let transport = AppleSimRecordingTransport()
        // random 0 with a drop ratio of 1: every attempt is dropped.
        let simulator = try AppleSimNotifications.simulator(
            transport: transport, scheduler: scheduler, timeScale: 3600, random: 0)
        var plan = FaultPlan()
        plan.notificationDropRatio = 1
        simulator.setFaults(plan)
        let start = clock.now
        _ = try simulator.mint(Self.subscription(.production, now: start))
        await scheduler.runAll()

        // 3600 turns Apple's hours into seconds.
        #expect(scheduler.delays == [0, 1, 12, 24, 48, 72])
        #expect(transport.bodies.isEmpty, "a dropped attempt reaches nobody")
        let stats = simulator.stats.snapshot().notifications
        #expect(stats.failed == 6)
        #expect(stats.retried == 5)
        #expect(stats.sent == 0)
    }

    @Test("production: a retry that gets through is the last attempt")
    func retryStopsAtSuccess() async throws {
        let clock = AppleSimManualClock()
        let scheduler = AppleSimManualScheduler(clock: clock)
        let transport = AppleSimRecordingTransport([.unsuccessfulHTTPResponseCode, .socketIssue, .success])
        let simulator = try AppleSimNotifications.simulator(transport: transport, scheduler: scheduler, timeScale: 60)
        _ = try simulator.mint(Self.subscription(.production, now: clock.now))
        await scheduler.runAll()
        #expect(scheduler.delays == [0, 60, 720])
        #expect(transport.bodies.count == 3)
        // Apple resends the same notification: one signed payload, three deliveries.
        #expect(Set(transport.bodies).count == 1)
        #expect(simulator.stats.snapshot().notifications == .init(sent: 1, failed: 2, retried: 2, duplicated: 0))
    }

    @Test("sandbox: a failed notification is never retried")
    func sandboxNoRetry() async throws {
        let clock = AppleSimManualClock()
        let scheduler = AppleSimManualScheduler(clock: clock)
        let transport = AppleSimRecordingTransport([.unsuccessfulHTTPResponseCode])
        let simulator = try AppleSimNotifications.simulator(transport: transport, scheduler: scheduler)
        _ = try simulator.mint(Self.subscription(.sandbox, now: clock.now))
        await scheduler.runAll()
        #expect(scheduler.delays == [0])
        #expect(transport.bodies.count == 1)
        #expect(simulator.stats.snapshot().notifications.failed == 1)
        #expect(simulator.stats.snapshot().notifications.retried == 0)
    }

    @Test("notification_duplicate_ratio sends a delivered notification twice; notification_delay_ms delays it")
    func duplicateAndDelay() async throws {
        let clock = AppleSimManualClock()
        let scheduler = AppleSimManualScheduler(clock: clock)
        let transport = AppleSimRecordingTransport()
        let simulator = try AppleSimNotifications.simulator(transport: transport, scheduler: scheduler, random: 0)
        var plan = FaultPlan()
        plan.notificationDuplicateRatio = 1
        plan.notificationDelayMs = 2500
        simulator.setFaults(plan)
        _ = try simulator.mint(
            MintRequest(
                bundleId: "com.example.app", productId: "com.example.app.coins", format: .signedTransaction,
                environment: .production))
        await scheduler.runAll()
        #expect(scheduler.delays == [2.5, 0])
        #expect(transport.bodies.count == 2)
        #expect(transport.bodies.first == transport.bodies.last)
        #expect(transport.payloads.map(AppleSimNotifications.kind) == ["ONE_TIME_CHARGE", "ONE_TIME_CHARGE"])
        #expect(simulator.stats.snapshot().notifications == .init(sent: 2, failed: 0, retried: 0, duplicated: 1))
    }

    @Test("without a notification URL nothing is sent or recorded")
    func noTarget() async throws {
        let clock = AppleSimManualClock()
        let scheduler = AppleSimManualScheduler(clock: clock)
        let transport = AppleSimRecordingTransport()
        let simulator = try AppleSimNotifications.simulator(transport: transport, scheduler: scheduler)
        try simulator.setNotificationTarget(nil)
        _ = try simulator.mint(Self.subscription(.production, now: clock.now))
        #expect(scheduler.pendingCount == 0)
        #expect(throws: AppleSimulatorError.self) { try simulator.setNotificationTarget("ftp://example.com/x") }
    }

    @Test("over HTTP: a target answering 400 counts as failed, the retry is delivered and verifies as Apple's")
    func realTargetAndVerification() async throws {
        try await AppleSimNotificationReceiver.with(statuses: [400, 200]) { url, box in
            // 3.6e6 turns Apple's first retry (1 hour) into 1 ms.
            try await AppleSimHarness.with({ $0.notificationTimeScale = 3_600_000 }) { sim in
                let set = try await sim.post("sim/notifications/target", ["url": url])
                #expect(set.status == 200)
                let minted = try sim.simulator.mint(Self.subscription(.production, now: Date()))
                // The simulator records an attempt once the answer is in, after the receiver has the body.
                var attempts: [String?] = []
                try await appleSimEventually("two attempts on record") {
                    let listed = try await sim.request("GET", "sim/notifications").json
                    let record = (listed["notifications"] as? [[String: Any]])?.first
                    attempts = (record?["attempts"] as? [[String: Any]] ?? []).map { $0["result"] as? String }
                    return attempts.count >= 2
                }
                #expect(attempts == ["UNSUCCESSFUL_HTTP_RESPONSE_CODE", "SUCCESS"])
                #expect(sim.simulator.stats.snapshot().notifications.failed == 1)

                // The project's own verification accepts it with the simulator's root, and nothing else.
                let body = try #require(box.bodies.withLock { $0.last })
                let object = try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
                let signed = try #require(object["signedPayload"] as? String)
                let trust = try TrustStore(derEncodedAnchors: [sim.simulator.pki.jwsRootDER])
                let analysis = ReceiptAnalyzer(trust: trust).analyze(Array(signed.utf8))
                #expect(analysis.format == .notification)
                #expect(analysis.signature == .valid)
                #expect(analysis.notification?.notificationType == "SUBSCRIBED")
                #expect(analysis.transactions.first?.transactionID == minted.transaction.transactionId)
                #expect(analysis.renewalInfo != nil)
                let foreign = ReceiptAnalyzer(trust: .apple).analyze(Array(signed.utf8))
                #expect(foreign.signature != .valid)

                let payload = try #require(AppleSimNotifications.payload(jws: signed))
                #expect(payload["version"] as? String == "2.0")
                #expect((payload["notificationUUID"] as? String)?.isEmpty == false)
                let data = try #require(payload["data"] as? [String: Any])
                #expect(data["appAppleId"] as? Int == 1_234_567_890)
                #expect(data["bundleId"] as? String == "com.example.app")
                #expect(data["environment"] as? String == "Production")
                #expect(data["status"] as? Int == 1)
            }
        }
    }

    @Test("the curl transport makes its engine at the first send; a refused connection is a socket issue, every time")
    func curlTransportRefused() async {
        let transport = CurlNotificationTransport()
        for _ in 0..<2 {
            let result = await transport.post(url: "http://127.0.0.1:9/apple-notifications", body: Array("{}".utf8))
            #expect(result == .socketIssue)
        }
    }
}

@Suite("Apple simulator: lifecycle events", .timeLimit(.minutes(2)))
struct AppleSimulatorLifecycleTests {
    /// A served simulator whose notifications go to a recording transport through a manual scheduler.
    static func with(
        _ body: (AppleSimHarness, AppleSimRecordingTransport, AppleSimManualScheduler) async throws -> Void
    ) async throws {
        let clock = AppleSimManualClock()
        let scheduler = AppleSimManualScheduler(clock: clock)
        let transport = AppleSimRecordingTransport()
        try await AppleSimHarness.with({
            $0.notificationURL = "http://127.0.0.1:9/hook"
            $0.notificationTransport = transport
            $0.notificationScheduler = scheduler
            $0.now = clock.function
        }) { sim in
            try await body(sim, transport, scheduler)
        }
    }

    /// The kinds of the notifications posted since the last call.
    static func drain(
        _ scheduler: AppleSimManualScheduler, _ transport: AppleSimRecordingTransport, from: inout Int
    )
        async -> [String]
    {
        await scheduler.runAll()
        let payloads = transport.payloads
        defer { from = payloads.count }
        return payloads[from...].map(AppleSimNotifications.kind)
    }

    @Test(
        "a subscription's life: billing retry with grace, recovery, extension, price increase, expiry, each at the period's end"
    )
    func subscriptionLife() async throws {
        try await Self.with { sim, transport, scheduler in
            var seen = 0
            let now = { Int(scheduler.clock.now.epochMilliseconds) }
            let expires = Int64(now()) + 30 * 86_400_000
            let minted = try await sim.mint(
                product: "com.example.app.monthly", format: "signed_transaction", environment: "Production",
                extra: ["expires_at": expires])
            let original = try #require(minted["transaction_id"] as? String)
            #expect(await Self.drain(scheduler, transport, from: &seen) == ["SUBSCRIBED/INITIAL_BUY"])

            // The renewal charge fails at the period's end, not before: active until then, the expiry unchanged.
            var truth = try await sim.post("sim/billing-retry", ["original_transaction_id": original, "grace_days": 3])
            #expect(truth.status == 200)
            #expect(truth.json["state"] as? String == "active")
            #expect(truth.json["expires_date_ms"] as? Int == Int(expires))
            #expect(await Self.drain(scheduler, transport, from: &seen) == ["DID_FAIL_TO_RENEW/GRACE_PERIOD"])
            #expect(now() >= Int(expires), "sent once the period has ended on the simulator's clock")
            let retryPayload = try #require(transport.payloads.last?["data"] as? [String: Any])
            #expect(retryPayload["status"] as? Int == 4)
            truth = try await sim.request("GET", "sim/transactions/\(original)")
            #expect(truth.json["state"] as? String == "grace_period")
            #expect(truth.json["expires_date_ms"] as? Int == Int(expires))

            truth = try await sim.post("sim/renew", ["original_transaction_id": original])
            #expect(truth.status == 200)
            let renewal = try #require(truth.json["transaction_id"] as? String)
            #expect(renewal != original)
            #expect(truth.json["original_transaction_id"] as? String == original)
            #expect(truth.json["state"] as? String == "active")
            #expect(await Self.drain(scheduler, transport, from: &seen) == ["DID_RENEW/BILLING_RECOVERY"])
            let old = try await sim.request("GET", "sim/transactions/\(original)").json
            #expect(old["state"] as? String == "expired")
            #expect(old["subscription_state"] as? String == "active", "the subscription is its latest period")

            let before = try #require(truth.json["expires_date_ms"] as? Int)
            truth = try await sim.post("sim/extend", ["original_transaction_id": original, "days": 5])
            #expect(truth.json["expires_date_ms"] as? Int == before + 5 * 86_400_000)
            #expect(await Self.drain(scheduler, transport, from: &seen) == ["RENEWAL_EXTENDED"])
            #expect(try await sim.post("sim/extend", ["original_transaction_id": original, "days": 91]).status == 400)

            truth = try await sim.post("sim/price-increase", ["original_transaction_id": original, "accepted": true])
            #expect(truth.status == 200)
            #expect(await Self.drain(scheduler, transport, from: &seen) == ["PRICE_INCREASE/ACCEPTED"])

            // Expiring a running period turns auto-renew off now; EXPIRED comes at the period's end.
            truth = try await sim.post("sim/expire", ["original_transaction_id": original])
            #expect(truth.json["state"] as? String == "active")
            #expect(truth.json["transaction_id"] as? String == renewal)
            #expect(truth.json["expires_date_ms"] as? Int == before + 5 * 86_400_000)
            #expect(
                await Self.drain(scheduler, transport, from: &seen) == [
                    "DID_CHANGE_RENEWAL_STATUS/AUTO_RENEW_DISABLED", "EXPIRED/VOLUNTARY",
                ])
            truth = try await sim.request("GET", "sim/transactions/\(renewal)")
            #expect(truth.json["state"] as? String == "expired")
            #expect(truth.json["expires_date_ms"] as? Int == before + 5 * 86_400_000)

            // Back after expiry, then a billing retry that runs out: DID_FAIL_TO_RENEW without grace at the period's
            // end, then EXPIRED/BILLING_RETRY.
            _ = try await sim.post("sim/renew", ["original_transaction_id": original])
            truth = try await sim.post("sim/billing-retry", ["original_transaction_id": original])
            let third = try #require(truth.json["transaction_id"] as? String)
            #expect(truth.json["state"] as? String == "active")
            #expect(
                await Self.drain(scheduler, transport, from: &seen) == ["SUBSCRIBED/RESUBSCRIBE", "DID_FAIL_TO_RENEW"])
            truth = try await sim.request("GET", "sim/transactions/\(third)")
            #expect(truth.json["state"] as? String == "billing_retry")
            truth = try await sim.post("sim/expire", ["original_transaction_id": original])
            #expect(truth.json["state"] as? String == "expired")
            #expect(await Self.drain(scheduler, transport, from: &seen) == ["EXPIRED/BILLING_RETRY"])
            #expect(try await sim.post("sim/renew", ["original_transaction_id": "999"]).status == 404)
        }
    }

    @Test("a renewal or refund before the period's end cancels the expiry or billing retry due then")
    func periodEndCancelled() async throws {
        try await Self.with { sim, transport, scheduler in
            var seen = 0
            let expires = scheduler.clock.now.epochMilliseconds + 30 * 86_400_000
            let minted = try await sim.mint(
                product: "com.example.app.monthly", format: "signed_transaction", environment: "Production",
                extra: ["expires_at": expires])
            let original = try #require(minted["transaction_id"] as? String)
            _ = await Self.drain(scheduler, transport, from: &seen)
            _ = try await sim.post("sim/billing-retry", ["original_transaction_id": original])
            let renewed = try await sim.post("sim/renew", ["original_transaction_id": original])
            let renewal = try #require(renewed.json["transaction_id"] as? String)
            _ = try await sim.post("sim/refund", ["transaction_id": renewal])
            // The failure due at the first period's end is not sent: the subscription renewed before it.
            #expect(await Self.drain(scheduler, transport, from: &seen) == ["DID_RENEW", "REFUND"])
            let first = try await sim.request("GET", "sim/transactions/\(original)").json
            #expect(first["state"] as? String == "expired")
            #expect(first["subscription_state"] as? String == "revoked", "its latest period was refunded")
            #expect(first["subscription_latest_transaction_id"] as? String == renewal)
        }
    }

    @Test("a one-time purchase's life: consumption request, refund, decline, reversal, family revoke")
    func oneTimeLife() async throws {
        try await Self.with { sim, transport, scheduler in
            var seen = 0
            let minted = try await sim.mint(format: "signed_transaction", environment: "Production")
            let id = try #require(minted["transaction_id"] as? String)
            #expect(await Self.drain(scheduler, transport, from: &seen) == ["ONE_TIME_CHARGE"])

            var reply = try await sim.post("sim/consumption-request", ["transaction_id": id, "reason": "LEGAL"])
            #expect(reply.status == 200)
            #expect(await Self.drain(scheduler, transport, from: &seen) == ["CONSUMPTION_REQUEST"])
            let data = try #require(transport.payloads.last?["data"] as? [String: Any])
            #expect(data["consumptionRequestReason"] as? String == "LEGAL")
            #expect(try await sim.post("sim/consumption-request", ["transaction_id": id, "reason": "X"]).status == 400)

            reply = try await sim.post("sim/refund/decline", ["transaction_id": id])
            #expect(reply.json["state"] as? String == "active")
            #expect(try await sim.post("sim/refund/reverse", ["transaction_id": id]).status == 409)

            reply = try await sim.post("sim/refund", ["transaction_id": id])
            #expect(reply.status == 200)
            let truth = try await sim.request("GET", "sim/transactions/\(id)").json
            #expect(truth["state"] as? String == "revoked")
            #expect(truth["revocation_date_ms"] as? Int != nil)

            reply = try await sim.post("sim/refund/reverse", ["transaction_id": id])
            #expect(reply.json["state"] as? String == "active")
            #expect(reply.json["revocation_date_ms"] is NSNull)

            reply = try await sim.post("sim/revoke", ["transaction_id": id])
            #expect(reply.json["state"] as? String == "revoked")
            #expect(
                await Self.drain(scheduler, transport, from: &seen) == [
                    "REFUND_DECLINED", "REFUND", "REFUND_REVERSED", "REVOKE",
                ])
            #expect(try await sim.post("sim/revoke", ["transaction_id": "123"]).status == 404)
            #expect(try await sim.post("sim/revoke", [:]).status == 400)
            #expect(try await sim.post("sim/renew", ["original_transaction_id": id]).status == 409)
            #expect(try await sim.request("GET", "sim/transactions/nope").status == 404)
        }
    }

    @Test("POST /sim/notifications/test sends TEST; the target can be read and cleared")
    func testNotificationAndTarget() async throws {
        try await Self.with { sim, transport, scheduler in
            var seen = 0
            let reply = try await sim.post("sim/notifications/test", ["bundle_id": "com.example.app"])
            #expect(reply.status == 200)
            #expect((reply.json["test_notification_token"] as? String)?.isEmpty == false)
            #expect(await Self.drain(scheduler, transport, from: &seen) == ["TEST"])
            #expect(
                try await sim.request("GET", "sim/notifications/target").json["url"] as? String
                    == "http://127.0.0.1:9/hook")
            #expect(try await sim.post("sim/notifications/target", ["url": NSNull()]).status == 200)
            #expect(try await sim.post("sim/notifications/test", [:]).status == 409)
            #expect(try await sim.post("sim/notifications/target", ["url": "not a url"]).status == 400)
        }
    }
}
