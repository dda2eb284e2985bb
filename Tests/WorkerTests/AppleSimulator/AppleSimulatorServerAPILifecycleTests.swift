import AppleSimulator
import Foundation
import Synchronization
import Testing

extension AppleSimHarness {
    /// A Server API call with a valid bearer token. PUT goes through the curl tool, since the project's transport
    /// only knows GET and POST.
    func serverAPI(_ method: String, _ path: String, json: Any? = nil) async throws -> Reply {
        let token = try Self.bearerToken()
        let body = try json.map { try JSONSerialization.data(withJSONObject: $0) }
        guard method == "PUT" else {
            return try await request(method, path, body: body, headers: ["Authorization": token])
        }
        let result = try await AppleSimProcess.run(
            "curl",
            [
                "-s", "-X", "PUT", "-H", "Authorization: \(token)", "-H", "Content-Type: application/json",
                "--data-binary", String(decoding: body ?? Data(), as: UTF8.self), "-w", "\n%{http_code}",
                base.absoluteString + "/" + path,
            ])
        #expect(result.status == 0, "curl failed: \(result.output)")
        // Every line of the output ends with a newline, the status line too.
        var lines = result.output.split(separator: "\n", omittingEmptySubsequences: false)
        if lines.last == "" { lines.removeLast() }
        let status = Int(lines.popLast() ?? "") ?? 0
        return Reply(status: status, data: Data(lines.joined(separator: "\n").utf8), headers: [:])
    }
}

@Suite("Apple simulator: lifecycle Server API endpoints", .timeLimit(.minutes(2)))
struct AppleSimulatorServerAPILifecycleTests {
    static var consent: [String: Any] {
        [
            "customerConsented": true, "deliveryStatus": "DELIVERED", "sampleContentProvided": false,
            "consumptionPercentage": 25_000, "refundPreference": "GRANT_PRORATED",
        ]
    }

    @Test("Send Consumption Information V2 validates the body, answers 202 and is recorded")
    func consumption() async throws {
        try await AppleSimHarness.with { sim in
            let id = try #require(
                try await sim.mint(format: "signed_transaction", environment: "Production")["transaction_id"]
                    as? String)
            let path = "inApps/v2/transactions/consumption/\(id)"
            let accepted = try await sim.serverAPI("PUT", path, json: Self.consent)
            #expect(accepted.status == 202)
            #expect(accepted.data.isEmpty)

            for (change, code) in [
                (["customerConsented": false], 4_000_035), (["customerConsented": 1], 4_000_035),
                (["deliveryStatus": "DELIVERED_AND_WORKING_PROPERLY"], 4_000_036),
                (["sampleContentProvided": "no"], 4_000_041), (["consumptionPercentage": 100_001], 4_000_000),
                (["refundPreference": "MAYBE"], 4_000_000),
            ] as [([String: Any], Int)] {
                let body = Self.consent.merging(change) { _, new in new }
                let refused = try await sim.serverAPI("PUT", path, json: body)
                #expect(refused.status == 400, "\(change)")
                #expect(refused.json["errorCode"] as? Int == code, "\(change)")
            }
            let unknown = try await sim.serverAPI("PUT", "inApps/v2/transactions/consumption/1999", json: Self.consent)
            #expect(unknown.status == 404)
            #expect(unknown.json["errorCode"] as? Int == 4_040_010)
            let wrongHost = try await sim.serverAPI("PUT", "sandbox/" + path, json: Self.consent)
            #expect(wrongHost.json["errorCode"] as? Int == 4_040_010)

            let truth = try await sim.request("GET", "sim/transactions/\(id)").json
            let answers = try #require(truth["consumption_answers"] as? [[String: Any]])
            #expect(answers.count == 1)
            #expect(answers.first?["deliveryStatus"] as? String == "DELIVERED")
        }
    }

    @Test(
        "Send Consumption Information: no share for an auto-renewable subscription, zero when not delivered, and a prorated refund of anything else needs one strictly between 0 and 100 %"
    )
    func consumptionShareRules() async throws {
        try await AppleSimHarness.with { sim in
            let oneTime = try #require(
                try await sim.mint(format: "signed_transaction", environment: "Production")["transaction_id"]
                    as? String)
            let expires = Int64(Date().timeIntervalSince1970 * 1000) + 86_400_000
            let subscription = try #require(
                try await sim.mint(
                    product: "com.example.app.monthly", format: "signed_transaction", environment: "Production",
                    extra: ["expires_at": expires])["transaction_id"] as? String)
            func put(_ id: String, _ change: [String: Any], without: [String] = []) async throws -> Int {
                var body = Self.consent.merging(change) { _, new in new }
                for key in without { body.removeValue(forKey: key) }
                return try await sim.serverAPI("PUT", "inApps/v2/transactions/consumption/\(id)", json: body).status
            }
            // A one-time purchase: a prorated refund at the edges of the share.
            #expect(try await put(oneTime, ["consumptionPercentage": 1]) == 202)
            #expect(try await put(oneTime, ["consumptionPercentage": 99_999]) == 202)
            #expect(try await put(oneTime, ["consumptionPercentage": 0]) == 400)
            #expect(try await put(oneTime, ["consumptionPercentage": 100_000]) == 400)
            #expect(try await put(oneTime, [:], without: ["consumptionPercentage"]) == 400)
            // Any share for a refund in full or none; not delivered: only zero.
            #expect(
                try await put(oneTime, ["consumptionPercentage": 100_000, "refundPreference": "GRANT_FULL"]) == 202)
            #expect(try await put(oneTime, ["consumptionPercentage": 0, "refundPreference": "DECLINE"]) == 202)
            #expect(
                try await put(
                    oneTime, ["deliveryStatus": "UNDELIVERED_OTHER", "consumptionPercentage": 0],
                    without: ["refundPreference"])
                    == 202)
            #expect(
                try await put(
                    oneTime, ["deliveryStatus": "UNDELIVERED_OTHER", "consumptionPercentage": 1],
                    without: ["refundPreference"])
                    == 400)
            // An auto-renewable subscription: Apple reckons the share itself, a prorated refund needs none.
            #expect(try await put(subscription, ["consumptionPercentage": 25_000]) == 400)
            #expect(try await put(subscription, ["consumptionPercentage": 0], without: ["refundPreference"]) == 400)
            #expect(try await put(subscription, [:], without: ["consumptionPercentage"]) == 202)

            let truth = try await sim.request("GET", "sim/transactions/\(oneTime)").json
            #expect((truth["consumption_answers"] as? [Any])?.count == 5)
        }
    }

    @Test("Finish Transaction is counted; Set App Account Token sets the family's token and the signed transaction's")
    func finishAndAppAccountToken() async throws {
        try await AppleSimHarness.with { sim in
            let id = try #require(
                try await sim.mint(format: "signed_transaction", environment: "Sandbox")["transaction_id"] as? String)
            for _ in 0..<2 {
                #expect(try await sim.serverAPI("POST", "sandbox/inApps/v1/transactions/\(id)/finish").status == 200)
            }
            #expect(try await sim.serverAPI("POST", "inApps/v1/transactions/\(id)/finish").status == 404)

            let token = "7E3F5B4C-1D2A-4B6C-8D9E-0F1A2B3C4D5E"
            let path = "sandbox/inApps/v1/transactions/\(id)/appAccountToken"
            #expect(try await sim.serverAPI("PUT", path, json: ["appAccountToken": token]).status == 200)
            let refused = try await sim.serverAPI("PUT", path, json: ["appAccountToken": "not-a-uuid"])
            #expect(refused.status == 400)
            #expect(refused.json["errorCode"] as? Int == 4_000_183)

            let truth = try await sim.request("GET", "sim/transactions/\(id)").json
            #expect(truth["finish_calls"] as? Int == 2)
            #expect(truth["app_account_token"] as? String == token.lowercased())
            let info = try await sim.serverAPI("GET", "sandbox/inApps/v1/transactions/\(id)")
            let signed = try #require(info.json["signedTransactionInfo"] as? String)
            #expect(AppleSimNotifications.payload(jws: signed)?["appAccountToken"] as? String == token.lowercased())

            // A renewal's id is no original transaction id.
            let expires = Int64(Date().timeIntervalSince1970 * 1000) + 86_400_000
            let first = try await sim.mint(
                product: "com.example.app.monthly", format: "signed_transaction", environment: "Sandbox",
                extra: ["expires_at": expires])
            let originalId = try #require(first["transaction_id"] as? String)
            let renewal = try await sim.mint(
                product: "com.example.app.monthly", format: "signed_transaction", environment: "Sandbox",
                extra: ["expires_at": expires * 2, "original_transaction_id": originalId])
            let renewalId = try #require(renewal["transaction_id"] as? String)
            let notOriginal = try await sim.serverAPI(
                "PUT", "sandbox/inApps/v1/transactions/\(renewalId)/appAccountToken", json: ["appAccountToken": token])
            #expect(notOriginal.json["errorCode"] as? Int == 4_000_185)
        }
    }

    @Test("Get Refund History lists the family's refunded transactions; Get App Transaction Info signs one")
    func refundHistoryAndAppTransaction() async throws {
        try await AppleSimHarness.with { sim in
            let id = try #require(
                try await sim.mint(format: "signed_transaction", environment: "Production")["transaction_id"]
                    as? String)
            var history = try await sim.serverAPI("GET", "inApps/v2/refund/lookup/\(id)")
            #expect(history.status == 200)
            #expect((history.json["signedTransactions"] as? [String])?.isEmpty == true)
            #expect(history.json["hasMore"] as? Bool == false)
            _ = try await sim.post("sim/refund", ["transaction_id": id])
            history = try await sim.serverAPI("GET", "inApps/v2/refund/lookup/\(id)")
            let signed = try #require((history.json["signedTransactions"] as? [String])?.first)
            #expect(AppleSimNotifications.payload(jws: signed)?["revocationDate"] != nil)
            #expect(
                try await sim.serverAPI("GET", "inApps/v2/refund/lookup/1777").json["errorCode"] as? Int == 4_040_010)
            #expect(try await sim.serverAPI("GET", "inApps/v2/refund/lookup/\(id)?revision=x").status == 400)

            let app = try await sim.serverAPI("GET", "inApps/v1/transactions/appTransactions/\(id)")
            #expect(app.status == 200)
            let appJWS = try #require(app.json["signedAppTransactionInfo"] as? String)
            let payload = try #require(AppleSimNotifications.payload(jws: appJWS))
            #expect(payload["bundleId"] as? String == "com.example.app")
            #expect(payload["receiptType"] as? String == "Production")
            #expect(
                try await sim.serverAPI("GET", "inApps/v1/transactions/appTransactions/1888").json["errorCode"] as? Int
                    == 4_040_010)
        }
    }

    @Test("Request Test Notification and Get Test Notification Status, with 4040007 and 4040008")
    func testNotifications() async throws {
        try await AppleSimNotificationReceiver.with(statuses: [200]) { url, box in
            try await AppleSimHarness.with { sim in
                let missing = try await sim.serverAPI("POST", "inApps/v1/notifications/test")
                #expect(missing.status == 404)
                #expect(missing.json["errorCode"] as? Int == 4_040_007)
                _ = try await sim.post("sim/notifications/target", ["url": url])

                let requested = try await sim.serverAPI("POST", "sandbox/inApps/v1/notifications/test")
                #expect(requested.status == 200)
                let token = try #require(requested.json["testNotificationToken"] as? String)
                try await appleSimEventually("the test notification") { box.bodies.withLock { !$0.isEmpty } }
                let body = try #require(box.bodies.withLock { $0.first })
                let payload = try #require(AppleSimNotifications.payload(body: body))
                #expect(payload["notificationType"] as? String == "TEST")
                #expect((payload["data"] as? [String: Any])?["environment"] as? String == "Sandbox")
                #expect((payload["data"] as? [String: Any])?["appAppleId"] == nil, "Apple leaves it out in sandbox")

                var status = try await sim.serverAPI("GET", "sandbox/inApps/v1/notifications/test/\(token)")
                try await appleSimEventually("the attempt on record") {
                    status = try await sim.serverAPI("GET", "sandbox/inApps/v1/notifications/test/\(token)")
                    return (status.json["sendAttempts"] as? [Any])?.isEmpty == false
                }
                #expect(status.status == 200)
                #expect(status.json["signedPayload"] as? String != nil)
                let attempt = try #require((status.json["sendAttempts"] as? [[String: Any]])?.first)
                #expect(attempt["sendAttemptResult"] as? String == "SUCCESS")
                #expect(attempt["attemptDate"] as? Int != nil)
                let unknown = try await sim.serverAPI("GET", "sandbox/inApps/v1/notifications/test/nope")
                #expect(unknown.json["errorCode"] as? Int == 4_040_008)
                #expect(
                    try await sim.serverAPI("GET", "inApps/v1/notifications/test/\(token)").json["errorCode"] as? Int
                        == 4_040_008, "a sandbox token is unknown in production")
            }
        }
    }

    @Test("the new endpoints need a bearer token and obey injected 429s")
    func authAndRateLimit() async throws {
        try await AppleSimHarness.with({ $0.random = AppleSimFixedRandom(0) }) { sim in
            let id = try #require(
                try await sim.mint(format: "signed_transaction", environment: "Production")["transaction_id"]
                    as? String)
            #expect(try await sim.request("POST", "inApps/v1/transactions/\(id)/finish").status == 401)
            #expect(try await sim.request("GET", "inApps/v2/refund/lookup/\(id)").status == 401)
            _ = try await sim.post("sim/faults", ["http_429_ratio": 1])
            let limited = try await sim.serverAPI("POST", "inApps/v1/transactions/\(id)/finish")
            #expect(limited.status == 429)
            #expect(
                limited.headers["Retry-After"] as? String != nil || limited.headers["retry-after"] as? String != nil)
            #expect(limited.json["errorCode"] as? Int == 4_290_000)
        }
    }
}

@Suite("Apple simulator: Get Notification History", .timeLimit(.minutes(2)))
struct AppleSimulatorNotificationHistoryTests {
    @Test("20 per page with a pagination token; onlyFailures, notificationType and transactionId filter")
    func pagesAndFilters() async throws {
        let clock = AppleSimManualClock()
        let scheduler = AppleSimManualScheduler(clock: clock)
        let transport = AppleSimRecordingTransport()
        try await AppleSimHarness.with({
            $0.notificationURL = "http://127.0.0.1:9/hook"
            $0.notificationTransport = transport
            $0.notificationScheduler = scheduler
            $0.random = AppleSimFixedRandom(0)
        }) { sim in
            var ids: [String] = []
            for _ in 0..<25 {
                let minted = try await sim.mint(format: "signed_transaction", environment: "Production")
                ids.append(try #require(minted["transaction_id"] as? String))
            }
            await scheduler.runAll()
            // Three more whose every attempt is dropped (first attempts only: the retries stay pending).
            _ = try await sim.post("sim/faults", ["notification_drop_ratio": 1])
            for _ in 0..<3 {
                let minted = try await sim.mint(format: "signed_transaction", environment: "Production")
                ids.append(try #require(minted["transaction_id"] as? String))
            }
            for _ in 0..<3 { await scheduler.runNext() }
            _ = try await sim.post("sim/faults", [:])
            // A sandbox one is not in production's history.
            _ = try await sim.mint(format: "signed_transaction", environment: "Sandbox")

            let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
            let window: [String: Any] = ["startDate": nowMs - 3_600_000, "endDate": nowMs + 3_600_000]
            let path = "inApps/v1/notifications/history"
            let first = try await sim.serverAPI("POST", path, json: window)
            #expect(first.status == 200)
            #expect((first.json["notificationHistory"] as? [Any])?.count == 20)
            #expect(first.json["hasMore"] as? Bool == true)
            let token = try #require(first.json["paginationToken"] as? String)
            let second = try await sim.serverAPI("POST", path + "?paginationToken=\(token)", json: window)
            let rest = try #require(second.json["notificationHistory"] as? [[String: Any]])
            #expect(rest.count == 8)
            #expect(second.json["hasMore"] as? Bool == false)
            #expect(second.json["paginationToken"] == nil)

            let failures = try await sim.serverAPI(
                "POST", path, json: window.merging(["onlyFailures": true]) { _, new in new })
            let failed = try #require(failures.json["notificationHistory"] as? [[String: Any]])
            #expect(failed.count == 3)
            let failedIds = failed.compactMap { item -> String? in
                let payload = AppleSimNotifications.payload(jws: item["signedPayload"] as? String ?? "")
                let data = payload?["data"] as? [String: Any]
                return AppleSimNotifications.payload(jws: data?["signedTransactionInfo"] as? String ?? "")?[
                    "transactionId"] as? String
            }
            #expect(failedIds == Array(ids.suffix(3)))
            let attempts = failed.first?["sendAttempts"] as? [[String: Any]]
            #expect(attempts?.map { $0["sendAttemptResult"] as? String } == ["NO_RESPONSE"])

            let one = try await sim.serverAPI(
                "POST", path, json: window.merging(["transactionId": ids[3]]) { _, new in new })
            #expect((one.json["notificationHistory"] as? [Any])?.count == 1)
            let typed = try await sim.serverAPI(
                "POST", path, json: window.merging(["notificationType": "REFUND"]) { _, new in new })
            #expect((typed.json["notificationHistory"] as? [Any])?.count == 0)
            let sandbox = try await sim.serverAPI("POST", "sandbox/" + path, json: window)
            #expect((sandbox.json["notificationHistory"] as? [Any])?.count == 1)

            for (body, code) in [
                (["startDate": nowMs, "endDate": nowMs], 4_000_013),
                (["endDate": nowMs], 4_000_015),
                (["startDate": nowMs], 4_000_016),
                (["startDate": nowMs - 181 * 86_400_000, "endDate": nowMs], 4_000_012),
            ] as [([String: Any], Int)] {
                let refused = try await sim.serverAPI("POST", path, json: body)
                #expect(refused.status == 400, "\(body)")
                #expect(refused.json["errorCode"] as? Int == code, "\(body)")
            }
            let badToken = try await sim.serverAPI("POST", path + "?paginationToken=bogus", json: window)
            #expect(badToken.json["errorCode"] as? Int == 4_000_014)
            #expect(
                try await sim.request("POST", path, body: try JSONSerialization.data(withJSONObject: window)).status
                    == 401)
        }
    }
}
