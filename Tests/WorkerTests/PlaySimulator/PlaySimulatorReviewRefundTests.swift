import Foundation
import PlaySimulator
import Testing

@Suite("Play simulator: orders.reviewrefund", .timeLimit(.minutes(2)))
struct PlaySimulatorReviewRefundTests {
    static func path(_ orderId: String) -> String {
        "androidpublisher/v3/applications/\(PlaySimHarness.package)/orders/\(orderId):reviewrefund"
    }

    /// A purchase with an open refund review: its order id and pending refund token.
    func review(_ sim: PlaySimHarness, type: String = "consumable") async throws -> (orderId: String, token: String) {
        let minted =
            type == "auto_renewable" ? try await sim.subscribe() : try await sim.mint(type: type)
        let answer = try await sim.lifecycle(try #require(minted["purchase_token"] as? String), "chargeback")
        let review = try #require(answer["review"] as? [String: Any])
        return (try #require(review["order_id"] as? String), try #require(review["pending_refund_token"] as? String))
    }

    @Test("the body is checked as the reference says; each refused call is recorded and answers 400")
    func validation() async throws {
        try await PlaySimHarness.with({ $0.accessTokenLifetime = 31_536_000 }) { sim in
            let bearer = try await sim.accessToken()
            let (orderId, token) = try await review(sim)
            let bad: [[String: Any]] = [
                ["refundPreference": "DECLINE"],
                ["pendingRefundToken": token],
                ["pendingRefundToken": token, "refundPreference": "MAYBE"],
                ["pendingRefundToken": token, "refundPreference": "REFUND_PREFERENCE_UNSPECIFIED"],
                [
                    "pendingRefundToken": token, "refundPreference": "APPROVE",
                    "consumptionPercentageMilliunits": 100_001,
                ],
                ["pendingRefundToken": token, "refundPreference": "APPROVE", "consumptionPercentageMilliunits": -1],
                ["pendingRefundToken": token, "refundPreference": "APPROVE", "sampleContentProvided": "yes"],
                [
                    "pendingRefundToken": token, "refundPreference": "APPROVE",
                    "consumptionUsageEvents": Array(
                        repeating: ["consumptionTime": "2027-01-01T00:00:00Z"], count: 1001),
                ],
                ["pendingRefundToken": "prt.someone-else", "refundPreference": "APPROVE"],
            ]
            for body in bad {
                let reply = try await sim.post(Self.path(orderId), body, bearer: bearer)
                #expect(reply.status == 400, "\(body.keys.sorted())")
                #expect((reply.json["error"] as? [String: Any])?["status"] as? String == "INVALID_ARGUMENT")
            }
            let edge = try await sim.post(
                Self.path(orderId),
                [
                    "pendingRefundToken": token, "refundPreference": "NEUTRAL", "sampleContentProvided": false,
                    "consumptionPercentageMilliunits": 100_000,
                    "consumptionUsageEvents": Array(
                        repeating: ["consumptionTime": "2027-01-01T00:00:00Z"], count: 1000),
                ], bearer: bearer)
            #expect(edge.status == 200)
            #expect(edge.json.isEmpty)
            let unknownOrder = try await sim.post(
                Self.path("GPA.0000-0000-0000-00000"), ["pendingRefundToken": token, "refundPreference": "APPROVE"],
                bearer: bearer)
            #expect(unknownOrder.status == 404)
            let reviews = try #require(try await sim.get("sim/reviews").json["reviews"] as? [[String: Any]])
            let answers = try #require(reviews.first?["answers"] as? [[String: Any]])
            #expect(answers.count == bad.count + 1)
            #expect(answers.last?["status"] as? Int == 200)
            #expect(reviews.first?["accepted_answers"] as? Int == 1)
        }
    }

    @Test("answered once: a second answer is 400 FAILED_PRECONDITION; times are recorded relative to the review")
    func onceOnly() async throws {
        try await PlaySimHarness.with({ $0.accessTokenLifetime = 31_536_000 }) { sim in
            let bearer = try await sim.accessToken()
            let (orderId, token) = try await review(sim, type: "auto_renewable")
            sim.clock.advance(by: 3600)
            let body: [String: Any] = [
                "pendingRefundToken": token, "refundPreference": "DECLINE", "sampleContentProvided": true,
                "consumptionPercentageMilliunits": 45_200,
            ]
            let first = try await sim.post(Self.path(orderId), body, bearer: bearer)
            #expect(first.status == 200)
            sim.clock.advance(by: 60)
            let second = try await sim.post(Self.path(orderId), body, bearer: bearer)
            #expect(second.status == 400)
            #expect((second.json["error"] as? [String: Any])?["status"] as? String == "FAILED_PRECONDITION")
            #expect(second.reason == "refundReviewAlreadyAnswered")
            let reviews = try #require(try await sim.get("sim/reviews").json["reviews"] as? [[String: Any]])
            let answers = try #require(reviews.first?["answers"] as? [[String: Any]])
            #expect(answers.map { $0["seconds_after_creation"] as? Double } == [3600, 3660])
            #expect(answers.map { $0["status"] as? Int } == [200, 400])
            #expect((answers.first?["body"] as? [String: Any])?["refundPreference"] as? String == "DECLINE")
            #expect(reviews.first?["accepted_answers"] as? Int == 1)
            let stats = try await sim.get("sim/stats").json
            #expect((stats["requests"] as? [String: Any])?["orders.reviewrefund"] as? Int == 2)
        }
    }

    @Test("at the 24-hour deadline an answer is accepted; a millisecond later it is 400 FAILED_PRECONDITION")
    func deadline() async throws {
        try await PlaySimHarness.with({ $0.accessTokenLifetime = 31_536_000 }) { sim in
            let bearer = try await sim.accessToken()
            let late = try await review(sim)
            let onTime = try await review(sim)
            sim.clock.advance(by: 86_400)
            let atDeadline = try await sim.post(
                Self.path(onTime.orderId), ["pendingRefundToken": onTime.token, "refundPreference": "APPROVE"],
                bearer: bearer)
            #expect(atDeadline.status == 200)
            sim.clock.advance(by: 0.001)
            let after = try await sim.post(
                Self.path(late.orderId), ["pendingRefundToken": late.token, "refundPreference": "APPROVE"],
                bearer: bearer)
            #expect(after.status == 400)
            #expect(after.reason == "refundReviewDeadlineExceeded")
            // An order without a review, and an unauthenticated call.
            let plain = try await sim.mint()
            let noReview = try await sim.post(
                Self.path(try #require(plain["order_id"] as? String)),
                ["pendingRefundToken": late.token, "refundPreference": "APPROVE"], bearer: bearer)
            #expect(noReview.status == 400)
            #expect(noReview.reason == "noPendingRefundReview")
            #expect(
                (try await sim.post(Self.path(onTime.orderId), ["pendingRefundToken": onTime.token])).status == 401)
        }
    }
}
