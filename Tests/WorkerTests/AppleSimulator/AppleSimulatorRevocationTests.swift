import Foundation
import Testing

/// The simulator's prorated refunds, family-shared purchases and family revocations, each notified as Apple does.
@Suite("Apple simulator: prorated refunds and family sharing", .timeLimit(.minutes(2)))
struct AppleSimulatorRevocationTests {
    typealias L = AppleSimulatorLifecycleTests

    /// The signed transaction of the last notification posted.
    static func lastTransaction(_ transport: AppleSimRecordingTransport) throws -> [String: Any] {
        let data = try #require(transport.payloads.last?["data"] as? [String: Any])
        let jws = try #require(data["signedTransactionInfo"] as? String)
        return try #require(AppleSimNotifications.payload(jws: jws))
    }

    @Test("POST /sim/refund with a percentage: REFUND with REFUND_PRORATED and its revocationPercentage")
    func proratedRefund() async throws {
        try await L.with { sim, transport, scheduler in
            var seen = 0
            let id = try #require(
                try await sim.mint(format: "signed_transaction", environment: "Production")["transaction_id"] as? String
            )
            _ = await L.drain(scheduler, transport, from: &seen)
            let reply = try await sim.post("sim/refund", ["transaction_id": id, "percentage": 25_000, "reason": 1])
            #expect(reply.status == 200)
            #expect(reply.json["revocation_type"] as? String == "REFUND_PRORATED")
            #expect(await L.drain(scheduler, transport, from: &seen) == ["REFUND"])
            let signed = try Self.lastTransaction(transport)
            #expect(signed["revocationType"] as? String == "REFUND_PRORATED")
            #expect(signed["revocationPercentage"] as? Int == 25_000)
            #expect(signed["revocationReason"] as? Int == 1)
            #expect(signed["revocationDate"] as? Int != nil)
            let truth = try await sim.request("GET", "sim/transactions/\(id)").json
            #expect(truth["state"] as? String == "revoked")
            #expect(truth["revocation_percentage"] as? Int == 25_000)
            // A whole refund has no percentage; one out of range is refused.
            #expect(try await sim.post("sim/refund", ["transaction_id": id, "percentage": 100_001]).status == 400)
            #expect(try await sim.post("sim/refund", ["transaction_id": id, "percentage": "x"]).status == 400)
            _ = try await sim.post("sim/refund/reverse", ["transaction_id": id])
            let other = try #require(
                try await sim.mint(format: "signed_transaction", environment: "Production")["transaction_id"] as? String
            )
            _ = await L.drain(scheduler, transport, from: &seen)
            #expect(
                try await sim.post("sim/refund", ["transaction_id": other]).json["revocation_type"] as? String
                    == "REFUND_FULL")
            _ = await L.drain(scheduler, transport, from: &seen)
            #expect(try Self.lastTransaction(transport)["revocationPercentage"] == nil)
        }
    }

    @Test(
        "family sharing: a member's own FAMILY_SHARED transaction; REVOKE ends it alone; a refund revokes the members")
    func familySharing() async throws {
        try await L.with { sim, transport, scheduler in
            var seen = 0
            let purchaser = try #require(
                try await sim.mint(format: "signed_transaction", environment: "Production")["transaction_id"] as? String
            )
            _ = await L.drain(scheduler, transport, from: &seen)

            var reply = try await sim.post("sim/family/share", ["transaction_id": purchaser])
            #expect(reply.status == 200)
            let member = try #require(reply.json["transaction_id"] as? String)
            #expect(member != purchaser)
            #expect(reply.json["original_transaction_id"] as? String != purchaser)
            #expect(reply.json["in_app_ownership_type"] as? String == "FAMILY_SHARED")
            #expect(reply.json["shared_from_transaction_id"] as? String == purchaser)
            #expect(await L.drain(scheduler, transport, from: &seen) == ["ONE_TIME_CHARGE"])
            #expect(try Self.lastTransaction(transport)["inAppOwnershipType"] as? String == "FAMILY_SHARED")

            reply = try await sim.post("sim/revoke", ["transaction_id": member])
            #expect(reply.json["state"] as? String == "revoked")
            #expect(reply.json["revocation_type"] as? String == "FAMILY_REVOKE")
            #expect(await L.drain(scheduler, transport, from: &seen) == ["REVOKE"])
            let revoked = try Self.lastTransaction(transport)
            #expect(revoked["revocationType"] as? String == "FAMILY_REVOKE")
            #expect(revoked["transactionId"] as? String == member)
            let truth = try await sim.request("GET", "sim/transactions/\(purchaser)").json
            #expect(truth["state"] as? String == "active", "the purchaser keeps access")

            // A second member, then the purchaser's refund: REFUND for the purchaser, REVOKE for the member.
            let second = try #require(
                try await sim.post("sim/family/share", ["transaction_id": purchaser]).json["transaction_id"] as? String)
            _ = await L.drain(scheduler, transport, from: &seen)
            _ = try await sim.post("sim/refund", ["transaction_id": purchaser])
            #expect(await L.drain(scheduler, transport, from: &seen) == ["REFUND", "REVOKE"])
            let memberTruth = try await sim.request("GET", "sim/transactions/\(second)").json
            #expect(memberTruth["state"] as? String == "revoked")
            #expect(memberTruth["revocation_type"] as? String == "FAMILY_REVOKE")

            // Bad input: an unknown id, a member's transaction shared again, a revoked purchase.
            #expect(try await sim.post("sim/family/share", ["transaction_id": "123"]).status == 404)
            #expect(try await sim.post("sim/family/share", ["transaction_id": second]).status == 409)
            #expect(try await sim.post("sim/family/share", ["transaction_id": purchaser]).status == 409)
        }
    }
}
