import Foundation
import Messages
import Testing

@testable import Decision
@testable import Worker

/// Every App Store Server Notification V2 type through the pure rules (docs/LEDGER.md, "Notification types").
@Suite("Ledger rules: notification types")
struct NotificationRulesTests {
    typealias F = LedgerFixtures

    static let first = F.renewal("s1", purchased: F.days(-35), expires: F.days(5))
    static let owned = [F.claim(first, account: "acct-A")]

    static func notification(
        _ type: String, _ transactions: [PurchaseTransaction], subtype: String? = nil, signed: Date? = nil,
        autoRenew: Bool? = nil, appAppleID: Int64? = nil, environment: AppleEnvironment = .production
    ) -> PurchaseEvidence {
        var evidence = F.apple(transactions, environment: environment)
        evidence.source = .signature
        evidence.appleStatus = nil
        evidence.notification = SubscriptionNotification(
            kind: NotificationTable.kind(ofNotificationType: type, subtype: subtype), appleType: type, subtype: subtype,
            signedDate: signed, autoRenew: autoRenew, appAppleID: appAppleID)
        return evidence
    }

    static func decide(
        _ evidence: PurchaseEvidence, claims: [TransactionClaim] = owned, job: String = "n-1",
        policy: DecisionPolicy = F.policy(allowSandbox: true)
    ) throws -> LedgerDecision {
        try #require(F.decision(F.decide(F.notificationJob(job), evidence, claims: claims, policy: policy)))
    }

    @Test("each of Apple's types maps to its kind; a type Apple adds later is `other`")
    func typeTable() {
        let table: [(String, SubscriptionNotification.Kind)] = [
            ("SUBSCRIBED", .renewed), ("DID_RENEW", .renewed), ("OFFER_REDEEMED", .renewed),
            ("ONE_TIME_CHARGE", .renewed), ("DID_CHANGE_RENEWAL_PREF", .other),
            ("DID_CHANGE_RENEWAL_STATUS", .renewalStatusChanged), ("DID_FAIL_TO_RENEW", .renewalFailed),
            ("GRACE_PERIOD_EXPIRED", .gracePeriodExpired), ("EXPIRED", .expired), ("PRICE_INCREASE", .other),
            ("PRICE_CHANGE", .other), ("REFUND", .refunded), ("REFUND_DECLINED", .refundDeclined),
            ("REFUND_REVERSED", .refundReversed), ("CONSUMPTION_REQUEST", .consumptionRequest),
            ("RENEWAL_EXTENDED", .extended), ("RENEWAL_EXTENSION", .extended), ("REVOKE", .revoked),
            ("TEST", .other), ("EXTERNAL_PURCHASE_TOKEN", .other), ("RESCIND_CONSENT", .other),
            ("METADATA_UPDATE", .other), ("MIGRATION", .other), ("SOMETHING_APPLE_ADDS_IN_2027", .other),
        ]
        for (type, kind) in table {
            #expect(NotificationTable.kind(ofNotificationType: type, subtype: nil) == kind, "\(type)")
        }
    }

    @Test("REFUND_REVERSED gives back what the refund took")
    func refundReversed() throws {
        let refundedClaim = [
            F.claim(F.renewal("s1", purchased: F.days(-35), expires: F.days(5), revoked: F.days(-1)), account: "acct-A")
        ]
        let decision = try Self.decide(
            Self.notification("REFUND_REVERSED", [Self.first], signed: F.days(0)), claims: refundedClaim)
        #expect(decision.verdict.accountID == "acct-A")
        #expect(decision.verdict.outcome == .alreadyGranted)
        #expect(decision.verdict.transactions.first?.revokedAt == nil)
        #expect(
            decision.writes == [
                .reinstate(transactionID: "s1"),
                .recordNotification(originalTransactionID: "sub-1", signedAt: F.days(0), autoRenew: nil),
            ])
        // Not revoked (a reversal arriving twice): nothing to reinstate.
        let again = try Self.decide(Self.notification("REFUND_REVERSED", [Self.first]))
        #expect(again.writes.isEmpty && again.verdict.outcome == .alreadyGranted)
    }

    @Test("RENEWAL_EXTENDED and RENEWAL_EXTENSION move the expiry forward")
    func extended() throws {
        var extendedTransaction = Self.first
        extendedTransaction.expiresDate = F.days(35)
        for type in ["RENEWAL_EXTENDED", "RENEWAL_EXTENSION"] {
            let decision = try Self.decide(Self.notification(type, [extendedTransaction]))
            #expect(decision.verdict.outcome == .alreadyGranted)
            #expect(decision.verdict.transactions.first?.expiresDate == F.days(35))
            #expect(
                decision.writes == [
                    .extendSubscription(transactionID: "s1", expiresDate: F.days(35), gracePeriodExpiresDate: nil)
                ])
        }
        // Extending an expired subscription gives access back.
        let lapsed = [F.claim(F.renewal("s1", purchased: F.days(-35), expires: F.days(-2)), account: "acct-A")]
        let revived = try Self.decide(Self.notification("RENEWAL_EXTENDED", [extendedTransaction]), claims: lapsed)
        #expect(revived.verdict.outcome == .alreadyGranted)
    }

    @Test("DID_CHANGE_RENEWAL_STATUS records auto-renew on or off, the entitlement unchanged")
    func renewalStatus() throws {
        let off = try Self.decide(
            Self.notification(
                "DID_CHANGE_RENEWAL_STATUS", [Self.first], subtype: "AUTO_RENEW_DISABLED", signed: F.days(0),
                autoRenew: false))
        #expect(off.verdict.outcome == .alreadyGranted)
        #expect(
            off.writes == [.recordNotification(originalTransactionID: "sub-1", signedAt: F.days(0), autoRenew: false)])
    }

    @Test("REVOKE revokes only the family member's transaction, not the family's others")
    func revokeOneMember() throws {
        let member = F.renewal("s1-member", purchased: F.days(-35), expires: F.days(5))
        let claims = Self.owned + [F.claim(member, account: "acct-A")]
        var revoked = member
        revoked.revokedAt = F.days(-1)
        let decision = try Self.decide(Self.notification("REVOKE", [revoked]), claims: claims)
        #expect(decision.verdict.reason == .revoked)
        #expect(decision.writes == [.revoke(transactionID: "s1-member", revokedAt: F.days(-1))])
    }

    @Test(
        "CONSUMPTION_REQUEST, REFUND_DECLINED, PRICE_INCREASE, METADATA_UPDATE, MIGRATION and unknown types re-state the entitlement"
    )
    func informational() throws {
        for type in [
            "CONSUMPTION_REQUEST", "REFUND_DECLINED", "PRICE_INCREASE", "PRICE_CHANGE", "DID_CHANGE_RENEWAL_PREF",
            "METADATA_UPDATE", "MIGRATION", "NEW_TYPE_FROM_APPLE",
        ] {
            let decision = try Self.decide(Self.notification(type, [Self.first]))
            #expect(decision.verdict.outcome == .alreadyGranted, "\(type)")
            #expect(decision.verdict.accountID == "acct-A", "\(type)")
            #expect(decision.writes.isEmpty, "\(type)")
        }
        let request = Self.notification("CONSUMPTION_REQUEST", [Self.first])
        #expect(request.notification?.kind == .consumptionRequest)
        #expect(request.notification?.appleType == "CONSUMPTION_REQUEST")
    }

    @Test("a notification about no transaction (TEST, SUMMARY, token, consent) is recorded and changes nothing")
    func transactionless() throws {
        for type in ["TEST", "RENEWAL_EXTENSION", "EXTERNAL_PURCHASE_TOKEN", "RESCIND_CONSENT"] {
            let decision = try Self.decide(Self.notification(type, []))
            #expect(decision.verdict.outcome == .rejected, "\(type)")
            #expect(decision.verdict.reason == .notificationRecorded, "\(type)")
            #expect(decision.writes.isEmpty, "\(type)")
        }
    }

    @Test("in production a notification must name the configured appAppleId; sandbox names none")
    func appAppleID() throws {
        let policy = DecisionPolicy(allowSandbox: true, now: F.now, catalog: F.catalog, appAppleID: 1234)
        let wrong = try Self.decide(Self.notification("DID_RENEW", [Self.first], appAppleID: 999), policy: policy)
        #expect(wrong.verdict.outcome == .rejected && wrong.verdict.reason == .wrongApp)
        #expect(wrong.writes.isEmpty)
        let missing = try Self.decide(Self.notification("TEST", []), policy: policy)
        #expect(missing.verdict.reason == .wrongApp)
        let right = try Self.decide(Self.notification("DID_RENEW", [Self.first], appAppleID: 1234), policy: policy)
        #expect(right.verdict.outcome == .alreadyGranted)
        let sandbox = try Self.decide(
            Self.notification("DID_RENEW", [Self.first], environment: .sandbox), policy: policy)
        #expect(sandbox.verdict.outcome == .alreadyGranted)
        // Not configured: not checked.
        #expect(
            try Self.decide(Self.notification("DID_RENEW", [Self.first], appAppleID: 999)).verdict.reason
                == .alreadyOwned)
    }

    @Test("an older notification arriving after a newer one is answered from the ledger and changes nothing")
    func outOfOrder() throws {
        // REFUND (signed day -2) was late: REFUND_REVERSED (signed day -1) was applied first.
        var claim = F.claim(Self.first, account: "acct-A")
        claim.notificationSignedAt = F.days(-1)
        var refund = Self.first
        refund.revokedAt = F.days(-3)
        let late = try Self.decide(Self.notification("REFUND", [refund], signed: F.days(-2)), claims: [claim])
        #expect(late.writes.isEmpty, "the older refund never undoes the reversal")
        #expect(late.verdict.outcome == .alreadyGranted)
        #expect(late.verdict.decidedBy == .ledger)
        #expect(late.verdict.transactions.first?.revokedAt == nil)
        // An older EXPIRED after a newer renewal: still active.
        let expired = try Self.decide(Self.notification("EXPIRED", [Self.first], signed: F.days(-2)), claims: [claim])
        #expect(expired.writes.isEmpty && expired.verdict.outcome == .alreadyGranted)
        // The same signedDate (a redelivery under another job id) applies again, idempotently.
        let same = try Self.decide(Self.notification("REFUND", [refund], signed: F.days(-1)), claims: [claim])
        #expect(same.writes.contains(.revoke(transactionID: "s1", revokedAt: F.days(-3))))
        // A newer one applies and records its date.
        let newer = try Self.decide(Self.notification("REFUND", [refund], signed: F.days(0)), claims: [claim])
        #expect(
            newer.writes == [
                .revoke(transactionID: "s1", revokedAt: F.days(-3)),
                .recordNotification(originalTransactionID: "sub-1", signedAt: F.days(0), autoRenew: nil),
            ])
        #expect(newer.verdict.reason == .revoked)
    }

    @Test("a late renewal the ledger never saw is claimed as Apple signed it; the newer state stays")
    func lateRenewalClaimed() throws {
        // Two renewals 151 ms apart (the chaos harness's case): the second's DID_RENEW was applied first.
        let second = F.renewal("s3", purchased: F.days(-1), expires: F.days(29))
        var secondClaim = F.claim(second, account: "acct-A")
        secondClaim.notificationSignedAt = F.days(-1)
        let claims = [F.claim(Self.first, account: "acct-A"), secondClaim]
        let skipped = F.renewal("s2", purchased: F.days(-2), expires: F.days(28))
        let late = try Self.decide(Self.notification("DID_RENEW", [skipped], signed: F.days(-2)), claims: claims)
        #expect(late.writes.count == 1)
        guard case .claim(let claimed)? = late.writes.first else { throw LedgerTestFailure("no claim written") }
        #expect(claimed.transactionID == "s2" && claimed.accountID == "acct-A")
        #expect(claimed.expiresDate == F.days(28) && claimed.revokedAt == nil)
        #expect(late.verdict.outcome == .alreadyGranted)
        #expect(late.verdict.accountID == "acct-A")
        // Once claimed, the same late notification again writes nothing.
        let again = try Self.decide(
            Self.notification("DID_RENEW", [skipped], signed: F.days(-2)),
            claims: claims + [F.claim(skipped, account: "acct-A")])
        #expect(again.writes.isEmpty)
        // A late REFUND of a transaction the ledger never saw claims it revoked, and leaves the others alone.
        var refunded = skipped
        refunded.revokedAt = F.days(-1)
        let refund = try Self.decide(Self.notification("REFUND", [refunded], signed: F.days(-2)), claims: claims)
        guard case .claim(let revoked)? = refund.writes.first, refund.writes.count == 1 else {
            throw LedgerTestFailure("no single claim written: \(refund.writes)")
        }
        #expect(revoked.transactionID == "s2" && revoked.revokedAt == F.days(-1))
        #expect(refund.verdict.outcome == .alreadyGranted)
    }

    @Test("missing fields: no signedDate, no transaction id owner, no bundle → a documented verdict, never a crash")
    func missingFields() throws {
        // Without signedDate the notification is applied, but cannot be ordered (nothing recorded for order).
        let unsigned = try Self.decide(Self.notification("DID_RENEW", [Self.first]))
        #expect(unsigned.writes.isEmpty && unsigned.verdict.outcome == .alreadyGranted)
        // A transaction nobody owns.
        let stranger = F.renewal("x1", original: "sub-x", purchased: F.days(-1), expires: F.days(29))
        #expect(try Self.decide(Self.notification("DID_RENEW", [stranger])).verdict.reason == .unclaimed)
        // An empty notificationType: `other`.
        #expect(NotificationTable.kind(ofNotificationType: "", subtype: nil) == .other)
    }
}
