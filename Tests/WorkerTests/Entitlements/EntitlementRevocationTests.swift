import Foundation
import Messages
import Testing

@testable import Entitlements

/// How Apple revoked a purchase reaches the entitlement history and the refund event; a family member's revocation
/// ends only that member's entitlement.
@Suite("Entitlement projection: revocation detail and family sharing")
struct EntitlementRevocationTests {
    typealias F = EntitlementFixtures
    let day = EntitlementFixtures.day

    static func revoked(
        _ transaction: Verdict.Transaction, at: Double, _ revocation: Revocation, ownership: OwnershipType? = nil
    ) -> Verdict.Transaction {
        var transaction = transaction
        transaction.revokedAt = F.at(at)
        transaction.revocation = revocation
        transaction.ownershipType = ownership
        return transaction
    }

    @Test("a prorated refund: the refund event and the history carry its type and percentage")
    func proratedRefund() throws {
        let sub = F.transaction("t1", expires: 30 * day)
        let prorated = Revocation(type: .refundProrated, percentage: 25_000, reason: 0)
        let (state, _) = F.project([
            F.verdict("j1", account: "a1", .granted, decided: 10, transactions: [sub]),
            F.verdict(
                "n1", account: "a1", .rejected, reason: .revoked, decided: 5 * day,
                transactions: [Self.revoked(sub, at: 5 * day, prorated)]),
        ])
        #expect(F.entitlements(of: "a1", in: state, at: F.at(6 * day))["premium"]?.active == false)
        let refund = try #require(state.events.first { $0.kind == .refund })
        #expect(refund.revocation == prorated)
        let json = try JSONSerialization.jsonObject(with: JSONEncoder().encode(refund)) as? [String: Any]
        #expect(json?["revocation_type"] as? String == "REFUND_PRORATED")
        #expect(json?["revocation_percentage"] as? Int == 25_000)
        #expect(try JSONDecoder().decode(LifecycleEvent.self, from: JSONEncoder().encode(refund)) == refund)
        // The bytes the store keeps, Kafka carries and a webhook receives say the same, and read back the same.
        let published = try JSONSerialization.jsonObject(with: Data(refund.json)) as? [String: Any]
        #expect(published?["revocation_type"] as? String == "REFUND_PRORATED")
        #expect(published?["revocation_percentage"] as? Int == 25_000)
        #expect(published?["revocation_reason"] as? Int == 0)
        #expect(try StoredJSON.decode(LifecycleEvent.self, String(decoding: refund.json, as: UTF8.self)) == refund)
        let entry = try #require(state.history.first { $0.verdictID != nil && $0.reason == "revoked" })
        #expect(entry.transactions.first?.revocation == prorated)
        // Other events carry none.
        #expect(state.events.first { $0.kind == .initialPurchase }?.revocation == nil)
    }

    @Test("a family member's REVOKE ends the member's entitlement only; its event says FAMILY_REVOKE")
    func familyRevoke() throws {
        let purchaser = F.transaction("p1", expires: 30 * day)
        var member = F.transaction("m1", original: "p1", expires: 30 * day)
        member.ownershipType = .familyShared
        let family = Revocation(type: .familyRevoke, reason: 0)
        let (state, _) = F.project([
            F.verdict("j1", account: "purchaser", .granted, decided: 10, transactions: [purchaser]),
            F.verdict("j2", account: "member", .granted, decided: 20, transactions: [member]),
            F.verdict(
                "n1", account: "member", .rejected, reason: .revoked, decided: 2 * day,
                transactions: [Self.revoked(member, at: 2 * day, family, ownership: .familyShared)]),
        ])
        #expect(F.entitlements(of: "member", in: state, at: F.at(3 * day))["premium"]?.active == false)
        #expect(F.entitlements(of: "purchaser", in: state, at: F.at(3 * day))["premium"]?.active == true)
        let refund = try #require(state.events.first { $0.kind == .refund })
        #expect(refund.accountID == "member" && refund.revocation?.type == .familyRevoke)
    }
}
