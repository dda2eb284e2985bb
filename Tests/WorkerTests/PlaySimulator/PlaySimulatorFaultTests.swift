import Foundation
import PlaySimulator
import Testing

@Suite("Play simulator: faults and counts", .timeLimit(.minutes(2)))
struct PlaySimulatorFaultTests {
    @Test("429 with Retry-After for the next N requests of a route, then answers again; GET /sim/faults counts them")
    func quota429() async throws {
        try await PlaySimHarness.with { sim in
            let bearer = try await sim.accessToken()
            let token = try #require(try await sim.mint()["purchase_token"] as? String)
            let plan = try await sim.post(
                "sim/faults",
                [
                    "rules": [
                        [
                            "route": "purchases.productsv2.getproductpurchasev2", "fault": "http_429", "count": 2,
                            "retry_after_s": 7,
                        ]
                    ]
                ])
            #expect(plan.status == 200)
            for _ in 0..<2 {
                let limited = try await sim.get(PlaySimHarness.productPath(token), bearer: bearer)
                #expect(limited.status == 429)
                #expect(limited.headers["retry-after"] == "7")
                #expect((limited.json["error"] as? [String: Any])?["status"] as? String == "RESOURCE_EXHAUSTED")
                #expect(limited.reason == "rateLimitExceeded")
            }
            // Other routes are untouched, and the third read answers.
            #expect(try await sim.get(PlaySimHarness.subscriptionPath(token), bearer: bearer).status == 400)
            #expect(try await sim.get(PlaySimHarness.productPath(token), bearer: bearer).status == 200)
            let report = try await sim.get("sim/faults")
            let rule = try #require((report.json["rules"] as? [[String: Any]])?.first)
            #expect(rule["applied"] as? Int == 2)
            #expect(rule["remaining"] as? Int == 0)
        }
    }

    @Test(
        "5xx by ratio on every API route, with Google's error envelope",
        arguments: [("http_500", 500, "INTERNAL"), ("http_503", 503, "UNAVAILABLE")])
    func serverErrors(fault: String, status: Int, googleStatus: String) async throws {
        try await PlaySimHarness.with { sim in
            let bearer = try await sim.accessToken()
            let token = try #require(try await sim.mint()["purchase_token"] as? String)
            #expect(
                try await sim.post("sim/faults", ["rules": [["route": "api", "fault": fault, "ratio": 1]]]).status
                    == 200)
            let read = try await sim.get(PlaySimHarness.productPath(token), bearer: bearer)
            let acknowledge = try await sim.post(
                PlaySimHarness.acknowledgePath(product: "com.example.app.coins", token), [:], bearer: bearer)
            for reply in [read, acknowledge] {
                #expect(reply.status == status)
                #expect((reply.json["error"] as? [String: Any])?["status"] as? String == googleStatus)
            }
            // The faulted acknowledge never reached the purchase; the token endpoint is not an API route.
            #expect(try await sim.truth(token)["acknowledged"] as? Bool == false)
            #expect(try await sim.exchange(try sim.assertion()).status == 200)
            // Clearing the plan heals.
            #expect(try await sim.post("sim/faults", [:]).status == 200)
            #expect(try await sim.get(PlaySimHarness.productPath(token), bearer: bearer).status == 200)
        }
    }

    @Test("a fault plan or a lifecycle flag that cannot be read is a 400 naming it, and changes nothing")
    func unreadablePlansAndFlags() async throws {
        try await PlaySimHarness.with { sim in
            for (path, message, fault) in [
                ("sim/faults", "unreadable fault plan", "http_503"),
                ("sim/push/faults", "unreadable push fault plan", "drop"),
            ] {
                let unreadable = try await sim.post(path, ["rules": "every request"])
                #expect(unreadable.status == 400)
                #expect(unreadable.json["error"] as? String == message)
                let refused = try await sim.post(path, ["rules": [["route": "*", "fault": fault, "count": 0]]])
                #expect(refused.status == 400)
                #expect((refused.json["error"] as? String)?.hasPrefix("rules[0]") == true)
                let report = try await sim.get(path)
                #expect(report.status == 200)
                #expect((report.json["rules"] as? [Any])?.isEmpty == true)
            }
            let token = try #require(try await sim.mint()["purchase_token"] as? String)
            for (extra, message) in [
                (["refund": "yes"], "refund must be a boolean"),
                (["approve": 0.5], "approve must be a boolean"),
                (["push": ["drop": "yes"]], "push.drop must be a boolean"),
                (["push": ["duplicate": [true]]], "push.duplicate must be a boolean"),
            ] as [([String: Any], String)] {
                var object: [String: Any] = ["purchase_token": token, "event": "refund"]
                object.merge(extra) { _, new in new }
                let refused = try await sim.post("sim/lifecycle", object)
                #expect(refused.status == 400)
                #expect(refused.json["error"] as? String == message)
            }
            #expect(try await sim.truth(token)["refunded_quantity"] as? Int == 0)
        }
    }

    @Test("the token endpoint down: 503 until the plan is over on the simulator's clock")
    func tokenEndpointDown() async throws {
        try await PlaySimHarness.with { sim in
            #expect(
                try await sim.post(
                    "sim/faults", ["rules": [["route": "token", "fault": "token_endpoint_down"]], "duration_s": 60]
                ).status == 200)
            let down = try await sim.exchange(try sim.assertion())
            #expect(down.status == 503)
            #expect(down.json["access_token"] == nil)
            sim.clock.advance(by: 61)
            #expect(try await sim.exchange(try sim.assertion()).status == 200)
        }
    }

    @Test("expired_token: the presented access token expires, so its next call is 401 too; a new token works")
    func expiredToken() async throws {
        try await PlaySimHarness.with { sim in
            let bearer = try await sim.accessToken()
            let token = try #require(
                try await sim.mint(product: "premium", type: "auto_renewable")["purchase_token"] as? String)
            let path = PlaySimHarness.subscriptionPath(token)
            #expect(
                try await sim.post(
                    "sim/faults",
                    ["rules": [["route": "purchases.subscriptionsv2.get", "fault": "expired_token", "count": 1]]]
                ).status == 200)
            #expect(try await sim.get(path, bearer: bearer).status == 401)
            #expect(try await sim.get(path, bearer: bearer).status == 401)
            #expect(try await sim.get(path, bearer: try await sim.accessToken()).status == 200)
            // A rule that cannot apply is refused.
            let refused = try await sim.post("sim/faults", ["rules": [["route": "token", "fault": "expired_token"]]])
            #expect(refused.status == 400)
        }
    }

    @Test("latency: answered normally after the hold, and counted as a fault")
    func latency() async throws {
        try await PlaySimHarness.with { sim in
            let bearer = try await sim.accessToken()
            let token = try #require(try await sim.mint()["purchase_token"] as? String)
            #expect(
                try await sim.post(
                    "sim/faults", ["rules": [["route": "*", "fault": "latency", "latency_ms": 5, "count": 1]]]
                )
                .status == 200)
            #expect(try await sim.get(PlaySimHarness.productPath(token), bearer: bearer).status == 200)
            let stats = try await sim.get("sim/stats")
            #expect((stats.json["faults"] as? [String: Any])?["latency"] as? Int == 1)
        }
    }

    @Test("counts add up: every request of a route has one answer counted under its status")
    func countsAddUp() async throws {
        try await PlaySimHarness.with { sim in
            let token = try #require(try await sim.mint()["purchase_token"] as? String)
            #expect(try await sim.post("sim/stats/reset", [:]).status == 200)
            let bearer = try await sim.accessToken()
            _ = try await sim.exchange(try sim.assertion(audience: "https://example.com/token"))
            _ = try await sim.get(PlaySimHarness.productPath(token))
            _ = try await sim.get(PlaySimHarness.productPath(token), bearer: bearer)
            _ = try await sim.post(
                "sim/faults", ["rules": [["route": "purchases.products.consume", "fault": "http_503", "count": 1]]])
            let consume = PlaySimHarness.consumePath(product: "com.example.app.coins", token)
            _ = try await sim.post(consume, [:], bearer: bearer)
            _ = try await sim.post(consume, [:], bearer: bearer)
            _ = try await sim.post(
                PlaySimHarness.acknowledgePath(product: "com.example.app.coins", token), [:], bearer: bearer)

            let stats = sim.simulator.stats.snapshot()
            #expect(stats.requests["token"] == 2)
            #expect(stats.statuses["token"] == ["200": 1, "400": 1])
            #expect(stats.requests["purchases.productsv2.getproductpurchasev2"] == 2)
            #expect(stats.statuses["purchases.productsv2.getproductpurchasev2"] == ["401": 1, "200": 1])
            #expect(stats.statuses["purchases.products.consume"] == ["503": 1, "204": 1])
            #expect(stats.statuses["purchases.products.acknowledge"] == ["204": 1])
            #expect(stats.faults == ["http_503": 1])
            for route in PlayRoute.allCases.map(\.rawValue) {
                #expect(stats.requests[route, default: 0] == stats.statuses[route, default: [:]].values.reduce(0, +))
            }
            // The faulted consume never reached the purchase: one consume call, and the truth agrees.
            let truth = try await sim.truth(token)
            #expect(truth["consume_calls"] as? Int == 1)
            #expect(truth["acknowledge_calls"] as? Int == 1)
            #expect(truth["reads"] as? Int == 1)
            // Over HTTP, the same counts.
            let served = try await sim.get("sim/stats")
            #expect((served.json["requests"] as? [String: Any])?["token"] as? Int == 2)
        }
    }
}
