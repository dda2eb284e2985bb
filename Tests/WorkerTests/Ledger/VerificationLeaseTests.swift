import Foundation
import Messages
import Testing

@testable import Decision
@testable import Ledger

/// The verification lease against both backends (a real SQLite file and a real PostgreSQL): one holder at a time,
/// a crashed holder's lease taken over at its expiry, Apple's answer kept for the others, and the table swept.
@Suite("Verification leases", .timeLimit(.minutes(2)))
struct VerificationLeaseTests {
    typealias F = LedgerFixtures
    typealias S = LedgerTestSupport

    static let start = Date(timeIntervalSince1970: 1_800_000_000)

    static func store(_ ledger: any Ledger) throws -> any VerificationLeaseStore {
        ledger
    }

    /// Apple's evidence for a consumable and a subscription, with every field the rules read set; dates on whole
    /// seconds, so they compare equal after the milliseconds of the JSON.
    static var answer: PurchaseEvidence {
        let day = { (n: Double) in Date(timeIntervalSince1970: 1_800_000_000 + n * 86_400) }
        var evidence = F.apple([
            F.purchase("t1", product: "com.example.gems", purchased: day(-10)),
            F.purchase(
                "t2", product: "com.example.monthly", purchased: day(-5), original: "sub-1", expires: day(20),
                revoked: day(1), grace: day(23), billingRetry: true),
        ])
        evidence.transactions[0].productType = .consumable
        evidence.transactions[0].quantity = 3
        evidence.appleStatus = 0
        return evidence
    }

    @Test(
        "one holder at a time; the holder itself may take its unanswered lease again", arguments: LedgerBackend.allCases
    )
    func oneHolder(backend: LedgerBackend) async throws {
        try await S.withLedger(backend) { ledger, _ in
            let leases = try Self.store(ledger)
            let first = try await leases.acquireVerificationLease(
                key: "receipt:aa", holder: "w1", now: Self.start, duration: .seconds(10))
            #expect(first == .acquired(expiresAt: Self.start.addingTimeInterval(10)))
            let other = try await leases.acquireVerificationLease(
                key: "receipt:aa", holder: "w2", now: Self.start.addingTimeInterval(9.999), duration: .seconds(10))
            #expect(other == .held(by: "w1", until: Self.start.addingTimeInterval(10)))
            // w1's job was cancelled and another job of w1 leads now: it takes the lease again, for longer.
            let again = try await leases.acquireVerificationLease(
                key: "receipt:aa", holder: "w1", now: Self.start.addingTimeInterval(5), duration: .seconds(10))
            #expect(again == .acquired(expiresAt: Self.start.addingTimeInterval(15)))
            // Another key is another lease.
            let unrelated = try await leases.acquireVerificationLease(
                key: "transaction:1000", holder: "w2", now: Self.start, duration: .seconds(10))
            #expect(unrelated == .acquired(expiresAt: Self.start.addingTimeInterval(10)))
        }
    }

    @Test("a crashed holder's lease is taken over at its expiry, not before", arguments: LedgerBackend.allCases)
    func expiredLeaseTakenOver(backend: LedgerBackend) async throws {
        try await S.withLedger(backend) { ledger, _ in
            let leases = try Self.store(ledger)
            _ = try await leases.acquireVerificationLease(
                key: "receipt:bb", holder: "crashed", now: Self.start, duration: .seconds(2))
            let before = try await leases.acquireVerificationLease(
                key: "receipt:bb", holder: "w2", now: Self.start.addingTimeInterval(1.999), duration: .seconds(10))
            #expect(before == .held(by: "crashed", until: Self.start.addingTimeInterval(2)))
            let at = try await leases.acquireVerificationLease(
                key: "receipt:bb", holder: "w2", now: Self.start.addingTimeInterval(2), duration: .seconds(10))
            #expect(at == .acquired(expiresAt: Self.start.addingTimeInterval(12)))
            // The crashed holder, back, finds w2's lease.
            let back = try await leases.acquireVerificationLease(
                key: "receipt:bb", holder: "crashed", now: Self.start.addingTimeInterval(3), duration: .seconds(10))
            #expect(back == .held(by: "w2", until: Self.start.addingTimeInterval(12)))
        }
    }

    @Test(
        "Apple's answer is kept for the others until it expires; a release lets the next one in at once",
        arguments: LedgerBackend.allCases)
    func answerAndRelease(backend: LedgerBackend) async throws {
        try await S.withLedger(backend) { ledger, _ in
            let leases = try Self.store(ledger)
            _ = try await leases.acquireVerificationLease(
                key: "receipt:cc", holder: "w1", now: Self.start, duration: .seconds(10))
            try await leases.recordVerificationAnswer(
                key: "receipt:cc", holder: "w1", evidence: Self.answer, now: Self.start.addingTimeInterval(1),
                keepFor: .seconds(10))
            for holder in ["w1", "w2"] {
                let found = try await leases.acquireVerificationLease(
                    key: "receipt:cc", holder: holder, now: Self.start.addingTimeInterval(10.5), duration: .seconds(10))
                #expect(found == .answered(Self.answer))
            }
            // Another holder's late answer does not replace the first one while it lives.
            var late = Self.answer
            late.rejection = .appleRejected
            try await leases.recordVerificationAnswer(
                key: "receipt:cc", holder: "w2", evidence: late, now: Self.start.addingTimeInterval(2),
                keepFor: .seconds(10))
            let still = try await leases.acquireVerificationLease(
                key: "receipt:cc", holder: "w3", now: Self.start.addingTimeInterval(3), duration: .seconds(10))
            #expect(still == .answered(Self.answer))
            // Expired, the answer is gone: the next asker takes the lease.
            let expired = try await leases.acquireVerificationLease(
                key: "receipt:cc", holder: "w3", now: Self.start.addingTimeInterval(11), duration: .seconds(10))
            #expect(expired == .acquired(expiresAt: Self.start.addingTimeInterval(21)))

            // A release without an answer: only by the holder, and the next asker gets the lease at once.
            try await leases.releaseVerificationLease(key: "receipt:cc", holder: "w1")
            let notReleased = try await leases.acquireVerificationLease(
                key: "receipt:cc", holder: "w4", now: Self.start.addingTimeInterval(12), duration: .seconds(10))
            #expect(notReleased == .held(by: "w3", until: Self.start.addingTimeInterval(21)))
            try await leases.releaseVerificationLease(key: "receipt:cc", holder: "w3")
            let released = try await leases.acquireVerificationLease(
                key: "receipt:cc", holder: "w4", now: Self.start.addingTimeInterval(12), duration: .seconds(10))
            #expect(released == .acquired(expiresAt: Self.start.addingTimeInterval(22)))
        }
    }

    @Test(
        "of 24 workers asking at once through their own connections, exactly one holds the lease",
        arguments: LedgerBackend.allCases)
    func raceForOneLease(backend: LedgerBackend) async throws {
        let url = try S.freshURL(backend)
        defer { S.removeFiles(of: url) }
        let ledgers = try (0..<3).map { _ in try LedgerFactory.make(url: url, configuration: S.patient) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for ledger in ledgers { group.addTask { try await ledger.run() } }
            defer { group.cancelAll() }
            try await ledgers[0].migrate()
            let states = try await withThrowingTaskGroup(of: VerificationLeaseState.self) { race in
                for worker in 0..<24 {
                    let leases = try Self.store(ledgers[worker % ledgers.count])
                    race.addTask {
                        try await leases.acquireVerificationLease(
                            key: "receipt:race", holder: "w\(worker)", now: Self.start, duration: .seconds(10))
                    }
                }
                return try await race.reduce(into: []) { $0.append($1) }
            }
            let acquired = states.filter { if case .acquired = $0 { true } else { false } }
            #expect(acquired.count == 1)
            let holders = Set(
                states.compactMap { state -> String? in
                    if case .held(let holder, _) = state { holder } else { nil }
                })
            #expect(holders.count == 1)
            #expect(states.count == 24)
        }
    }

    @Test("expired leases and answers are swept; live ones stay", arguments: LedgerBackend.allCases)
    func sweep(backend: LedgerBackend) async throws {
        try await S.withLedger(backend) { ledger, _ in
            let leases = try Self.store(ledger)
            for (index, key) in ["receipt:1", "receipt:2", "receipt:3"].enumerated() {
                _ = try await leases.acquireVerificationLease(
                    key: key, holder: "w1", now: Self.start.addingTimeInterval(Double(index)), duration: .seconds(10))
            }
            try await leases.recordVerificationAnswer(
                key: "receipt:1", holder: "w1", evidence: Self.answer, now: Self.start, keepFor: .seconds(10))
            #expect(try await leases.removeExpiredVerificationLeases(before: Self.start.addingTimeInterval(11)) == 2)
            let left = try await leases.acquireVerificationLease(
                key: "receipt:3", holder: "w2", now: Self.start.addingTimeInterval(11), duration: .seconds(10))
            #expect(left == .held(by: "w1", until: Self.start.addingTimeInterval(12)))
            #expect(try await leases.removeExpiredVerificationLeases(before: Self.start.addingTimeInterval(11)) == 0)
        }
    }

    @Test("evidence survives its JSON whole; another version or an unknown case reads as no answer")
    func evidenceJSON() throws {
        let evidence = Self.answer
        let text = evidence.jsonText()
        #expect(PurchaseEvidence(jsonText: text) == evidence)
        var notification = PurchaseEvidence(source: .signature, authenticity: .authentic, environment: .sandbox)
        notification.notification = SubscriptionNotification(kind: .renewalFailed, appleType: "DID_FAIL_TO_RENEW")
        notification.rejection = .expired
        #expect(PurchaseEvidence(jsonText: notification.jsonText()) == notification)
        notification.notification = SubscriptionNotification(
            kind: .renewalStatusChanged, appleType: "DID_CHANGE_RENEWAL_STATUS", subtype: "AUTO_RENEW_DISABLED",
            signedDate: Self.start, autoRenew: false, appAppleID: 1234)
        #expect(PurchaseEvidence(jsonText: notification.jsonText()) == notification)
        #expect(PurchaseEvidence(jsonText: text.replacingOccurrences(of: #""v":1"#, with: #""v":2"#)) == nil)
        #expect(PurchaseEvidence(jsonText: text.replacingOccurrences(of: "authentic", with: "unheard")) == nil)
        #expect(PurchaseEvidence(jsonText: "not json") == nil)
        // What the ledger keeps is the evidence: ids and products, never a receipt.
        #expect(!text.contains("MIIbase64"))
    }
}
