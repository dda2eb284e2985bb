import Foundation
import Testing

@testable import PlaySimulator

@Suite("Play simulator: RTDN pushes", .timeLimit(.minutes(2)))
struct PlaySimulatorPushTests {
    @Test(
        "a push is Pub/Sub's envelope around the DeveloperNotification, with an OIDC token the published JWKS verifies")
    func envelopeAndToken() async throws {
        try await PlaySimHarness.withPushes({ $0.push.audience = "https://verifier.example.com/rtdn" }) {
            sim, receiver in
            let minted = try await sim.mint(product: "com.example.app.gold", type: "auto_renewable")
            let token = try #require(minted["purchase_token"] as? String)
            sim.clock.advance(by: 3600)
            let renewed = try await sim.lifecycle(token, "renew")
            #expect((renewed["message_ids"] as? [String])?.count == 1)
            #expect(await sim.simulator.deliverDue() == 2)

            // Pub/Sub does not keep order: the two pushes are told apart by type.
            let pushes = receiver.received
            try #require(pushes.count == 2)
            func type(_ push: PlayPushReceiver.Received) -> Int? {
                (push.notification["subscriptionNotification"] as? [String: Any])?["notificationType"] as? Int
            }
            let push = try #require(pushes.first { type($0) == 2 })
            #expect(pushes.contains { type($0) == 4 })
            #expect(push.envelope["subscription"] as? String == "projects/play-simulator/subscriptions/play-rtdn")
            let message = push.message
            let messageId = try #require(message["messageId"] as? String)
            #expect(message["message_id"] as? String == messageId)
            #expect(message["publishTime"] as? String != nil)
            #expect(message["publish_time"] as? String == message["publishTime"] as? String)
            let notification = push.notification
            #expect(notification["version"] as? String == "1.0")
            #expect(notification["packageName"] as? String == PlaySimHarness.package)
            #expect(
                notification["eventTimeMillis"] as? String
                    == String(Int64(sim.clock.now().timeIntervalSince1970 * 1000)))
            let subscription = try #require(notification["subscriptionNotification"] as? [String: Any])
            #expect(subscription["notificationType"] as? Int == 2)
            #expect(subscription["purchaseToken"] as? String == token)
            #expect(subscription["version"] as? String == "1.0")

            let certs = try await sim.get("oauth2/v3/certs")
            #expect(certs.headers["cache-control"] == "public, max-age=3600")
            let jwk = try #require((certs.json["keys"] as? [[String: Any]])?.first)
            #expect(
                jwk["kty"] as? String == "RSA" && jwk["alg"] as? String == "RS256" && jwk["use"] as? String == "sig")
            let bearer = try #require(push.bearer)
            let claims = try #require(try await sim.verifiedClaims(bearer))
            #expect(claims["iss"] as? String == "https://accounts.google.com")
            #expect(claims["aud"] as? String == "https://verifier.example.com/rtdn")
            #expect(claims["email"] as? String == "rtdn-push@play-simulator.iam.gserviceaccount.com")
            #expect(claims["email_verified"] as? Bool == true)
            let iat = try #require(claims["iat"] as? Int)
            #expect(claims["exp"] as? Int == iat + 3600)
            #expect(iat == Int(sim.clock.now().timeIntervalSince1970))
            #expect(Set(claims.keys) == ["iss", "aud", "email", "email_verified", "iat", "exp"])

            let report = try await sim.get("sim/pushes")
            let summary = try #require(report.json["summary"] as? [String: Any])
            #expect(summary["published"] as? Int == 2)
            #expect(summary["acknowledged"] as? Int == 2)
        }
    }

    @Test("503, 503, then 204: three attempts, 10 s then 20 s apart on the simulator's clock, then acknowledged")
    func retriesWithBackoff() async throws {
        try await PlaySimHarness.withPushes(statuses: [503, 503, 204]) { sim, receiver in
            let start = sim.clock.now()
            let messageId = try #require(try sim.simulator.sendTestNotification(packageName: PlaySimHarness.package))
            #expect(await sim.simulator.deliverDue() == 1)
            // Nothing is due until the backoff has passed.
            sim.clock.advance(by: 9)
            #expect(await sim.simulator.deliverDue() == 0)
            sim.clock.advance(by: 1)
            #expect(await sim.simulator.deliverDue() == 1)
            sim.clock.advance(by: 19)
            #expect(await sim.simulator.deliverDue() == 0)
            sim.clock.advance(by: 1)
            #expect(await sim.simulator.deliverDue() == 1)
            sim.clock.advance(by: 3600)
            #expect(await sim.simulator.deliverDue() == 0)

            #expect(receiver.received.count == 3)
            #expect(Set(receiver.received.map { $0.message["messageId"] as? String }) == [messageId])
            #expect(
                (receiver.received.first?.notification["testNotification"] as? [String: Any])?["version"] as? String
                    == "1.0")
            let record = try #require(sim.simulator.pushRecords().first)
            #expect(record.attempts.map(\.status) == [503, 503, 204])
            #expect(record.attempts.map { $0.at.timeIntervalSince(start) } == [0, 10, 30])
            #expect(record.acknowledged)
        }
    }

    @Test("backoff doubles up to the maximum, and an unacknowledged message stops at the end of retention")
    func backoffCapAndRetention() async throws {
        try await PlaySimHarness.withPushes(statuses: [500], { $0.push.retention = 3600 }) { sim, receiver in
            let start = sim.clock.now()
            try sim.simulator.sendTestNotification(packageName: PlaySimHarness.package)
            for _ in 0..<400 {
                await sim.simulator.deliverDue()
                sim.clock.advance(by: 10)
            }
            let record = try #require(sim.simulator.pushRecords().first)
            let offsets = record.attempts.map { $0.at.timeIntervalSince(start) }
            #expect(Array(offsets.prefix(8)) == [0, 10, 30, 70, 150, 310, 630, 1230])
            #expect(offsets.allSatisfy { $0 < 3600 })
            #expect(record.expired && !record.acknowledged)
            #expect(receiver.received.count == record.attempts.count)
        }
    }

    @Test("no answer (nothing listens at the endpoint) is a failed attempt, retried after the backoff")
    func noAnswer() async throws {
        // Port 9 (discard) has no listener here: the connection is refused at once.
        try await PlaySimHarness.with({ $0.push.endpoint = "http://127.0.0.1:9/push" }) { sim in
            try sim.simulator.sendTestNotification(packageName: PlaySimHarness.package)
            #expect(await sim.simulator.deliverDue() == 1)
            sim.clock.advance(by: 10)
            #expect(await sim.simulator.deliverDue() == 1)
            let record = try #require(sim.simulator.pushRecords().first)
            #expect(record.attempts.map(\.status) == [nil, nil])
            #expect(!record.acknowledged)
        }
    }

    @Test("drop: never sent, counted dropped, and the purchase still changes")
    func drop() async throws {
        try await PlaySimHarness.withPushes { sim, receiver in
            let token = try #require(
                try await sim.mint(product: "gold", type: "auto_renewable")["purchase_token"] as? String)
            try await sim.lifecycle(token, "cancel", ["push": ["drop": true]])
            #expect(await sim.simulator.deliverDue() == 1)
            #expect(receiver.received.count == 1)
            #expect(try await sim.truth(token)["state"] as? String == "canceled")
            let pushes = try #require(try await sim.get("sim/pushes").json["pushes"] as? [[String: Any]])
            #expect(pushes.last?["type"] as? String == "SUBSCRIPTION_CANCELED")
            #expect(pushes.last?["dropped"] as? Bool == true)
            #expect(pushes.last?["attempts"] as? Int == 0)
        }
    }

    @Test("a fault plan drops and duplicates the next pushes; a duplicate is sent twice with the same messageId")
    func planDropDuplicate() async throws {
        try await PlaySimHarness.withPushes { sim, receiver in
            let plan = try await sim.post(
                "sim/push/faults", ["rules": [["fault": "drop", "count": 1], ["fault": "duplicate", "count": 1]]])
            #expect(plan.status == 200)
            try sim.simulator.sendTestNotification(packageName: PlaySimHarness.package)
            try sim.simulator.sendTestNotification(packageName: PlaySimHarness.package)
            await sim.simulator.deliverDue()
            let records = sim.simulator.pushRecords()
            #expect(records.map(\.dropped) == [true, false])
            #expect(records.map(\.duplicated) == [true, false])
            // The first was dropped (so the duplicate rule, matching it too, was spent on it); the second is sent once.
            #expect(receiver.received.count == 1)
            try sim.simulator.setPushFaults(.init(rules: [.init(fault: .duplicate, count: 1)]))
            try sim.simulator.sendTestNotification(packageName: PlaySimHarness.package)
            await sim.simulator.deliverDue()
            #expect(receiver.received.count == 3)
            let ids = receiver.received.suffix(2).map { $0.message["messageId"] as? String }
            #expect(ids[0] != nil && ids[0] == ids[1])
            #expect(sim.simulator.pushRecords().last?.attempts.map(\.duplicate) == [false, true])
        }
    }

    @Test("delay holds the first delivery the given seconds of the clock")
    func delay() async throws {
        try await PlaySimHarness.withPushes { sim, receiver in
            try sim.simulator.setPushFaults(.init(rules: [.init(fault: .delay, count: 1, delayS: 120)]))
            try sim.simulator.sendTestNotification(packageName: PlaySimHarness.package)
            #expect(await sim.simulator.deliverDue() == 0)
            sim.clock.advance(by: 119)
            #expect(await sim.simulator.deliverDue() == 0)
            sim.clock.advance(by: 1)
            #expect(await sim.simulator.deliverDue() == 1)
            #expect(receiver.received.count == 1)
        }
    }

    @Test("wrong key, wrong audience, expired: each token fails the check a receiver makes; the next attempt is good")
    func badTokens() async throws {
        try await PlaySimHarness.withPushes(statuses: [401, 204, 401, 204, 401, 204]) { sim, receiver in
            for (index, kind) in [PlayPushFaultKind.wrongKey, .wrongAudience, .expiredToken].enumerated() {
                try sim.simulator.setPushFaults(.init(rules: [.init(fault: kind, count: 1)]))
                try sim.simulator.sendTestNotification(packageName: PlaySimHarness.package)
                await sim.simulator.deliverDue()
                sim.clock.advance(by: 10)
                await sim.simulator.deliverDue()
                let bad = receiver.received[2 * index]
                let good = receiver.received[2 * index + 1]
                let badBearer = try #require(bad.bearer)
                let claims = try await sim.verifiedClaims(badBearer)
                let now = Int(sim.clock.now().timeIntervalSince1970)
                switch kind {
                case .wrongKey: #expect(claims == nil)
                case .wrongAudience:
                    #expect(claims?["aud"] as? String != sim.simulator.configuration.push.endpoint)
                default: #expect((claims?["exp"] as? Int ?? .max) < now)
                }
                let goodBearer = try #require(good.bearer)
                let goodClaims = try #require(try await sim.verifiedClaims(goodBearer))
                #expect(goodClaims["aud"] as? String == sim.simulator.configuration.push.endpoint)
                #expect((goodClaims["exp"] as? Int ?? 0) > now)
                #expect(sim.simulator.pushRecords().last?.attempts.map(\.badToken) == [kind, nil])
            }
        }
    }
}
