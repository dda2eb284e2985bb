import Foundation
import Logging
import Messages
import SQLiteStorage
import Testing

@testable import Decision
@testable import Ledger

/// Revocation detail and family claims stored by both ledgers (schema version 8), read back by the rules and shown by
/// `ledger show`.
@Suite("Ledger backends: revocation detail and family sharing", .serialized, .timeLimit(.minutes(2)))
struct RevocationLedgerTests {
    typealias F = LedgerFixtures
    typealias S = LedgerTestSupport
    typealias R = RevocationRulesTests

    static func notification(
        _ type: String, _ kind: SubscriptionNotification.Kind, _ transaction: PurchaseTransaction, signed: Date
    ) -> PurchaseEvidence {
        LedgerNotificationWriteTests.notification(type, kind, transaction, signed: signed)
    }

    @Test(
        "a prorated refund is stored with its percentage, shown by ledger show, and cleared by REFUND_REVERSED",
        arguments: LedgerBackend.allCases)
    func proratedRefundStored(backend: LedgerBackend) async throws {
        try await S.withLedger(backend) { ledger, _ in
            #expect(try await S.settle(ledger, F.job(), F.apple([R.purchaser])).outcome == .granted)
            let refunded = try await S.settle(
                ledger, F.notificationJob("n-1"),
                Self.notification(
                    "REFUND", .refunded, R.revoked(R.purchaser, at: F.days(-1), R.prorated), signed: F.days(-1)))
            #expect(refunded.reason == .revoked)
            #expect(refunded.transactions.first?.revocation == R.prorated)

            let claim = try #require(
                try await ledger.snapshot(jobID: "x", transactionIDs: ["s1"], originalTransactionIDs: []).claim("s1"))
            #expect(claim.revocation == R.prorated)
            #expect(claim.revokedAt.map { abs($0.timeIntervalSince(F.days(-1))) < 0.001 } == true)

            let shown = try await LedgerShow.report(.transaction("s1"), ledger: ledger, now: F.now)
            let row = try #require((shown["transactions"] as? [[String: Any]])?.first)
            #expect(row["state"] as? String == "revoked")
            #expect(row["revocation_type"] as? String == "REFUND_PRORATED")
            #expect(row["revocation_percentage"] as? Int == 25_000)
            #expect(row["revocation_reason"] as? Int == 0)
            #expect(row["in_app_ownership_type"] is NSNull)

            // The refund's verdict, redelivered, is the one recorded: the detail survives the stored JSON.
            let again = try await S.settle(
                ledger, F.notificationJob("n-1"),
                Self.notification(
                    "REFUND", .refunded, R.revoked(R.purchaser, at: F.days(-1), R.prorated), signed: F.days(-1)))
            #expect(again == refunded)

            let reversed = try await S.settle(
                ledger, F.notificationJob("n-2"),
                Self.notification("REFUND_REVERSED", .refundReversed, R.purchaser, signed: F.days(-0.5)))
            #expect(reversed.outcome == .alreadyGranted)
            let restored = try #require(
                try await ledger.snapshot(jobID: "x", transactionIDs: ["s1"], originalTransactionIDs: []).claim("s1"))
            #expect(restored.revokedAt == nil && restored.revocation == nil)
        }
    }

    @Test(
        "a family member is granted beside the purchaser; FAMILY_REVOKE ends the member's access only",
        arguments: LedgerBackend.allCases)
    func familyMember(backend: LedgerBackend) async throws {
        try await S.withLedger(backend) { ledger, _ in
            #expect(try await S.settle(ledger, F.job(), F.apple([R.purchaser])).outcome == .granted)
            let member = try await S.settle(ledger, F.job("job-m", account: "acct-M"), F.apple([R.member()]))
            #expect(member.outcome == .granted && member.accountID == "acct-M")
            #expect(member.transactions.first?.ownershipType == .familyShared)
            let replay = try await S.settle(ledger, F.job("job-x", account: "acct-X"), F.apple([R.member()]))
            #expect(replay.reason == .replayed)

            // A newer notification about the purchaser's subscription first: the member's older one still applies.
            let renewalPref = try await S.settle(
                ledger, F.notificationJob("n-0"),
                Self.notification("DID_CHANGE_RENEWAL_PREF", .other, R.purchaser, signed: F.days(0)))
            #expect(renewalPref.accountID == "acct-A")
            let revoked = try await S.settle(
                ledger, F.notificationJob("n-1"),
                Self.notification(
                    "REVOKE", .revoked, R.member(revoked: F.days(-1), revocation: R.familyRevoke), signed: F.days(-1)))
            #expect(revoked.accountID == "acct-M" && revoked.reason == .revoked)

            let claims = try await ledger.snapshot(
                jobID: "x", transactionIDs: ["s1", "m1"], originalTransactionIDs: [])
            #expect(claims.claim("m1")?.ownershipType == .familyShared)
            #expect(claims.claim("m1")?.revocation == R.familyRevoke)
            #expect(claims.claim("m1")?.revokedAt != nil)
            #expect(claims.claim("s1")?.revokedAt == nil, "the purchaser keeps access")
            #expect(try await S.settle(ledger, F.job("job-p"), F.local([R.purchaser])).outcome == .alreadyGranted)

            let shown = try await LedgerShow.report(.account("acct-M"), ledger: ledger, now: F.now)
            let row = try #require((shown["transactions"] as? [[String: Any]])?.first)
            #expect(row["in_app_ownership_type"] as? String == "FAMILY_SHARED")
            #expect(row["revocation_type"] as? String == "FAMILY_REVOKE")
            #expect(row["subscription_state"] as? String == "revoked")
            let purchaser = try await LedgerShow.report(.account("acct-A"), ledger: ledger, now: F.now)
            let purchaserRow = try #require((purchaser["transactions"] as? [[String: Any]])?.first)
            #expect(
                purchaserRow["subscription_state"] as? String == "active", "the member's claim is not the purchaser's")
        }
    }

    @Test("version 8 migrates a version 7 ledger: old claims read with no detail, and a later refund adds it")
    func migrationFromVersion7() async throws {
        let url = try S.freshURL(.sqlite)
        defer { S.removeFiles(of: url) }
        let path = String(url.dropFirst("sqlite:".count))
        try await LedgerFactory.withLedger(url: url, configuration: S.patient) { ledger in
            _ = try await S.settle(ledger, F.job(), F.apple([R.purchaser]))
            try await ledger.revoke(transactionID: "s1", at: F.days(-2))
        }
        // Back to version 7, as a build without version 8 left it.
        let old = try SQLiteLedger(path: path, logger: .init(label: "test"))
        try await old.executor.run { connection, _ in
            for column in ["revocation_type", "revocation_percentage", "revocation_reason", "ownership_type"] {
                try connection.execute("ALTER TABLE transaction_claims DROP COLUMN \(column)")
            }
            try connection.execute("DELETE FROM ledger_migrations WHERE version = 8")
        }
        await old.close()
        try await LedgerFactory.withLedger(url: url, configuration: S.patient) { ledger in
            #expect(try await ledger.schemaVersions() == LedgerSchema.sqlite.map(\.version))
            let before = try #require(
                try await ledger.snapshot(jobID: "x", transactionIDs: ["s1"], originalTransactionIDs: []).claim("s1"))
            #expect(before.revokedAt != nil && before.revocation == nil && before.ownershipType == nil)
            _ = try await S.settle(
                ledger, F.notificationJob("n-1"),
                Self.notification(
                    "REFUND", .refunded, R.revoked(R.purchaser, at: F.days(-1), R.full), signed: F.days(-1)))
            let after = try #require(
                try await ledger.snapshot(jobID: "x", transactionIDs: ["s1"], originalTransactionIDs: []).claim("s1"))
            #expect(after.revocation == R.full)
            #expect(
                after.revokedAt.map { abs($0.timeIntervalSince(F.days(-2))) < 0.001 } == true, "the first date stays")
        }
    }
}
