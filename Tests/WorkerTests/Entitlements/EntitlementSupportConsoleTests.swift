import Entitlements
import Foundation
import Messages
import Testing

/// Customers who "paid and have nothing", looked up in the support console in headless Chromium (as
/// `Entitlement console in a browser`): a replayed purchase, a refund, a family member whose access was revoked and
/// a partly refunded subscription, each answered in one look. The screenshots in docs/ are made here
/// (`VERIFY_UPDATE_SCREENSHOT=1`).
@Suite("Entitlement console for support in a browser", .timeLimit(.minutes(5)))
struct EntitlementSupportConsoleTests {
    typealias F = EntitlementFixtures

    static let owner = "acct-owner-7"
    static let replayer = "acct-replay-3"
    static let refunded = "acct-refund-4"
    static let member = "acct-family-5"
    static let partial = "acct-partial-6"
    static let playAccount = "acct-play-8"
    static let playOrder = "GPA.3371-5520-9811-40021..2"

    static let verdicts: [Verdict] = [
        F.verdict(
            "owner-buys", account: owner, .granted, decided: 1 * F.day,
            transactions: [F.transaction("2000000111", product: "lifetime", purchased: 1 * F.day)], by: .apple),
        F.verdict("replay-junk", account: replayer, .rejected, reason: .malformed, decided: 2 * F.day, by: .prefilter),
        F.verdict(
            "replay", account: replayer, .rejected, reason: .replayed, decided: 3 * F.day,
            transactions: [F.transaction("2000000111", product: "lifetime", purchased: 1 * F.day)], by: .ledger),
        F.verdict(
            "refund-buys", account: refunded, .granted, decided: 1 * F.day,
            transactions: [F.transaction("2000000222", product: "no.ads", purchased: 1 * F.day)], by: .signature),
        F.verdict(
            "member-buys", account: member, .granted, decided: 1 * F.day,
            transactions: [
                F.transaction("2000000333", product: "pro.monthly", purchased: 1 * F.day, expires: 31 * F.day)
            ]),
        F.verdict(
            "partial-buys", account: partial, .granted, decided: 1 * F.day,
            transactions: [
                F.transaction("2000000444", product: "pro.yearly", purchased: 1 * F.day, expires: 366 * F.day)
            ]),
        F.verdict(
            "play-buys", account: playAccount, .granted, decided: 2 * F.day,
            transactions: [
                F.transaction(
                    "play-renewal-2", product: "premium_sub", original: "play-token-8", purchased: 2 * F.day,
                    expires: 32 * F.day, orderID: playOrder, purchaseToken: "play-token-8")
            ], store: .googlePlay),
    ]

    /// A refund verdict as a worker that states revocations writes it (`revocation_type` and the rest on its
    /// transaction); nil fields are left out.
    static func revocation(
        _ job: String, account: String, _ transaction: Verdict.Transaction, type: String?, percentage: Int? = nil
    ) -> [UInt8] {
        let verdict = F.verdict(
            job, account: account, .rejected, reason: .revoked, decided: 5 * F.day, transactions: [transaction])
        var extra: [String: Any] = [:]
        if let type { extra["revocation_type"] = type }
        if let percentage { extra["revocation_percentage"] = percentage }
        extra["revocation_reason"] = 0
        return F.verdictJSON(
            verdict,
            replacing: ["transactions": [EntitlementSupportAPITests.transactionJSON(of: verdict, extra: extra)]])
    }

    static let raw: [[UInt8]] = [
        revocation(
            "refund", account: refunded,
            F.transaction("2000000222", product: "no.ads", purchased: 1 * F.day, revoked: 5 * F.day),
            type: "REFUND_FULL"),
        revocation(
            "family-revoke", account: member,
            F.transaction(
                "2000000333", product: "pro.monthly", purchased: 1 * F.day, expires: 31 * F.day, revoked: 5 * F.day),
            type: "FAMILY_REVOKE"),
        revocation(
            "partial-refund", account: partial,
            F.transaction(
                "2000000444", product: "pro.yearly", purchased: 1 * F.day, expires: 366 * F.day, revoked: 5 * F.day),
            type: "REFUND_PRORATED", percentage: 40_000),
    ]

    static let tokens = "support:\(EntitlementAPIHarness.token) support\nrobot:\(EntitlementAPIHarness.otherToken)\n"

    static let screenshots = [
        "console-replayed.png", "console-refunded.png", "console-family-revoked.png", "console-partly-refunded.png",
    ]

    @Test("a replayed account, a refund, a family-revoked member and a partly refunded subscription at one look")
    func customersWithNothing() async throws {
        try await EntitlementAPIHarness.with(verdicts: Self.verdicts, raw: Self.raw, tokensFile: Self.tokens) { h in
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "support-console-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let page = try await EntitlementConsoleBrowserTests.browse(
                url: "http://127.0.0.1:\(h.port)/console", token: EntitlementAPIHarness.token,
                queries: [Self.replayer, Self.refunded, Self.member, Self.partial, Self.playOrder],
                screenshotDirectory: directory)
            #expect(page.caller == "Signed in as support (support)")
            #expect(page.lookups.count == 5)
            guard page.lookups.count == 5 else { return }

            let replayed = page.lookups[0]
            #expect(replayed.found && replayed.account == Self.replayer)
            #expect(
                replayed.summary
                    == "No entitlement: the purchase this account sent belongs to another account (\(Self.owner)).")
            #expect(
                replayed.timeline.first.map {
                    $0.contains("Rejected") && $0.contains("replayed")
                        && $0.contains("This purchase belongs to another account: \(Self.owner).")
                } == true)
            #expect(replayed.timeline.contains { $0.contains("malformed") && $0.contains("not a receipt") })

            let refund = page.lookups[1]
            #expect(refund.pills.contains { $0.hasPrefix("no.ads · Refunded") })
            #expect(refund.summary.contains("no.ads is not active: the purchase was refunded"))
            #expect(refund.timeline.contains { $0.contains("refunded the purchase in full") })

            let family = page.lookups[2]
            #expect(family.pills.contains { $0.hasPrefix("premium · Family Sharing ended") })
            #expect(
                family.summary.contains("premium is not active: Family Sharing of the purchase ended for this member"))
            #expect(family.transactions.contains { $0.first == "2000000333" && $0[2] == "Family Sharing ended" })
            #expect(family.timeline.contains { $0.contains("Family Sharing ended for this member") })

            let part = page.lookups[3]
            #expect(part.pills.contains { $0.hasPrefix("premium · Partly refunded 40 %") })
            #expect(part.summary.contains("premium is not active: the purchase was partly refunded (40 %)"))
            #expect(part.transactions.contains { $0.first == "2000000444" && $0[2] == "Partly refunded 40 %" })
            #expect(part.timeline.contains { $0.contains("refunded part of the purchase (40 % of the price)") })

            let byOrder = page.lookups[4]
            #expect(byOrder.account == Self.playAccount)
            #expect(byOrder.note.hasPrefix("Order \(Self.playOrder) belongs to this account"))

            for (index, name) in Self.screenshots.enumerated() {
                let png = try Data(contentsOf: directory.appendingPathComponent("\(index + 1).png"))
                #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]))
                if ProcessInfo.processInfo.environment["VERIFY_UPDATE_SCREENSHOT"] == "1" {
                    try png.write(to: TestEnvironment.packageRoot.appendingPathComponent("docs/\(name)"))
                }
            }
        }
    }

    @Test("a token without the support scope is told the purchase is another account's, never which")
    func ownerHiddenFromOtherCallers() async throws {
        try await EntitlementAPIHarness.with(verdicts: Self.verdicts, tokensFile: Self.tokens) { h in
            let page = try await EntitlementConsoleBrowserTests.browse(
                url: "http://127.0.0.1:\(h.port)/console", token: EntitlementAPIHarness.otherToken,
                queries: [Self.replayer])
            #expect(page.caller == "Signed in as robot")
            let replayed = try #require(page.lookups.first)
            #expect(replayed.summary == "No entitlement: the purchase this account sent belongs to another account.")
            #expect(
                replayed.timeline.first?.contains(
                    "This purchase belongs to another account (its id is shown to support staff only).") == true)
            #expect(!replayed.timeline.joined().contains(Self.owner))
        }
    }
}
