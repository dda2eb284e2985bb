import AppleSimulator
import Entitlements
import Foundation
import Messages
import Synchronization
import Testing
import Traffic

@testable import Demo

/// The support console in a real browser: headless Chromium (Debian's `chromium` and `chromium-driver`) driven
/// through WebDriver by `scripts/console-browser.py` (standard library only). Nothing is skipped: without Chromium
/// the test fails and says how to install it.
@Suite("Entitlement console in a browser", .timeLimit(.minutes(5)))
struct EntitlementConsoleBrowserTests {
    typealias F = EntitlementFixtures

    struct Lookup: Decodable {
        var query: String
        var found: Bool
        var status: String
        var account: String
        var summary: String
        var pills: [String]
        var note: String
        var entitlements: [[String]]
        var transactions: [[String]]
        var consumables: [[String]]
        var timeline: [String]
    }

    struct PageReport: Decodable {
        var externalResources: [String]
        var wrongTokenMessage: String
        var caller: String
        var lookups: [Lookup]

        enum CodingKeys: String, CodingKey {
            case externalResources = "external_resources"
            case wrongTokenMessage = "wrong_token_message"
            case caller, lookups
        }
    }

    /// Runs the browser script against `url`; the screenshot (after the last lookup) goes to `screenshot`, and one
    /// after each lookup to `screenshotDirectory` (`1.png`, `2.png`, …).
    static func browse(
        url: String, token: String, queries: [String], screenshot: URL? = nil, screenshotDirectory: URL? = nil
    ) async throws -> PageReport {
        let done = try await TestCommand.run(
            [
                "python3", TestEnvironment.packageRoot.appendingPathComponent("scripts/console-browser.py").path,
                "--url", url, "--token", token,
            ] + queries.flatMap { ["--query", $0] } + (screenshot.map { ["--screenshot", $0.path] } ?? [])
                + (screenshotDirectory.map { ["--screenshot-dir", $0.path] } ?? []))
        guard done.succeeded else {
            throw MissingResource(
                what: "a working headless Chromium (\(done.errors.trimmingCharacters(in: .whitespacesAndNewlines)))",
                hint: "apt-get install chromium chromium-driver (scripts/setup-debian.sh installs them)")
        }
        return try JSONDecoder().decode(PageReport.self, from: Data(done.output.utf8))
    }

    @Test("logs in (a wrong token is refused), looks up accounts of a demo run, and shows what the API says")
    func demoAccounts() async throws {
        var options = DemoOptions()
        options.jobs = 150
        options.mix = TrafficMix(shares: [.otherApp: 0.3, .cracker: 0.1, .repeated: 0.15, .genuine: 0.45])
        options.progressInterval = nil
        let seen = ResultBox<(PageReport, String, String)>()
        options.entitlements = DemoEntitlements()
        options.afterDecided = { bootstrap, report, running in
            let running = try #require(running)
            let premium = try #require(
                report.entries.compactMap(\.verdicts.first).first {
                    $0.outcome == .granted && $0.transactions.contains { $0.productID.hasSuffix(".premium") }
                })
            let replayed = try #require(report.entries.compactMap(\.verdicts.first).first { $0.reason == .replayed })
            let page = try await Self.browse(
                url: running.consoleURL, token: running.token,
                queries: [
                    premium.accountID, replayed.accountID, premium.transactions[0].transactionID, "no-such-account",
                ])
            seen.set((page, premium.accountID, replayed.accountID))
        }
        _ = try await DemoRun(options: options).run()
        let (page, premiumAccount, replayedAccount) = try #require(seen.value)

        #expect(page.externalResources.isEmpty)
        #expect(page.wrongTokenMessage == "That token is not valid.")
        // The demo's token is support staff's: a replayed purchase names its owner.
        #expect(page.caller == "Signed in as demo (support)")
        let premium = page.lookups[0]
        #expect(premium.found && premium.account == premiumAccount)
        #expect(premium.summary.contains("premium is active"))
        #expect(premium.pills.first?.hasPrefix("premium · Active") == true)
        #expect(premium.entitlements.first?.prefix(2) == ["premium", "Active"])
        #expect(premium.transactions.first?[1] == "com.example.verifyworker.premium")
        #expect(premium.transactions.first?[2] == "Active")
        #expect(premium.timeline.contains { $0.contains("Purchase") && $0.contains("started with a first purchase") })
        #expect(premium.timeline.contains { $0.contains("Granted") && $0.contains("granted to this account") })
        let replayed = page.lookups[1]
        #expect(replayed.found && replayed.account == replayedAccount)
        #expect(replayed.summary.hasPrefix("No entitlement"))
        #expect(
            replayed.timeline.contains {
                $0.contains("Rejected") && $0.contains("already owned by another account")
                    && $0.contains("This purchase belongs to another account: ")
            })
        let byTransaction = page.lookups[2]
        #expect(byTransaction.account == premiumAccount)
        #expect(byTransaction.note.contains("belongs to this account"))
        let missing = page.lookups[3]
        #expect(!missing.found)
        #expect(missing.status.contains("Nothing found"))
    }

    @Test("a subscription renewed, a refund and consumables read at one look; the screenshot in docs/ is made here")
    func screenshot() async throws {
        let day = F.day
        let account = "acct-7f3k2q"
        let verdicts = [
            F.verdict(
                "web-1", account: account, .granted, decided: 0.1 * day,
                transactions: [F.transaction("2000000418", product: "pro.monthly", expires: 30 * day)]),
            F.verdict(
                "web-2", account: account, .granted, decided: 2 * day,
                transactions: [F.transaction("2000000533", product: "no.ads", purchased: 2 * day)], by: .signature),
            F.verdict(
                "web-3", account: account, .granted, decided: 5 * day,
                transactions: [F.transaction("2000000601", product: "coins.100", purchased: 5 * day, quantity: 3)],
                by: .signature),
            F.verdict(
                "web-4", account: account, .rejected, reason: .malformed, decided: 6 * day, by: .prefilter),
            F.verdict(
                "apple-notification-refund", account: account, .rejected, reason: .revoked, decided: 9 * day,
                transactions: [F.transaction("2000000533", product: "no.ads", purchased: 2 * day, revoked: 9 * day)]),
            F.verdict(
                "android-1", account: account, .granted, decided: 12 * day,
                transactions: [
                    F.transaction(
                        "GPA.3312-8841-2290-51763", product: "gems_50", purchased: 12 * day, quantity: 5,
                        orderID: "GPA.3312-8841-2290-51763")
                ], store: .googlePlay),
            F.verdict(
                "apple-notification-renew", account: account, .granted, decided: 30 * day,
                transactions: [
                    F.transaction(
                        "2000001207", product: "pro.monthly", original: "2000000418", purchased: 30 * day,
                        expires: 60 * day)
                ]),
        ]
        try await EntitlementAPIHarness.with(verdicts: verdicts, now: F.at(41 * day)) { h in
            let file = FileManager.default.temporaryDirectory.appendingPathComponent(
                "entitlements-console-\(UUID()).png")
            defer { try? FileManager.default.removeItem(at: file) }
            let page = try await Self.browse(
                url: "http://127.0.0.1:\(h.port)/console", token: EntitlementAPIHarness.token, queries: [account],
                screenshot: file)
            let lookup = try #require(page.lookups.first)
            #expect(lookup.summary.contains("premium is active until"))
            #expect(lookup.summary.contains("no.ads is not active: the purchase was refunded"))
            #expect(lookup.pills.contains { $0.hasPrefix("no.ads · Refunded") })
            #expect(lookup.consumables == [["coins.100", "3", "App Store"], ["gems_50", "5", "Google Play"]])
            #expect(lookup.transactions.contains { $0.first?.hasPrefix("2000001207") == true && $0[2] == "Active" })
            #expect(lookup.transactions.contains { $0.first == "2000000533" && $0[2] == "Refunded" })
            #expect(lookup.transactions.contains { $0.first == "GPA.3312-8841-2290-51763" && $0.last == "Google Play" })
            #expect(lookup.timeline.first?.contains("Renewal") == true)
            #expect(lookup.timeline.contains { $0.contains("Refund") && $0.contains("refunded or revoked") })
            #expect(lookup.timeline.contains { $0.contains("malformed") && $0.contains("not a receipt") })
            let png = try Data(contentsOf: file)
            #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]))
            if ProcessInfo.processInfo.environment["VERIFY_UPDATE_SCREENSHOT"] == "1" {
                try png.write(to: TestEnvironment.packageRoot.appendingPathComponent("docs/entitlements-console.png"))
            }
        }
    }
}

extension EntitlementConsoleBrowserTests {
    @Test("one account across stores: an App Store and a Google Play purchase, each labelled with its store")
    func accountAcrossStores() async throws {
        let day = F.day
        let account = "acct-both-stores"
        let verdicts = [
            F.verdict(
                "ios-1", account: account, .granted, decided: 1 * day,
                transactions: [
                    F.transaction("2000000701", product: "pro.monthly", purchased: 1 * day, expires: 8 * day)
                ]),
            F.verdict(
                "android-1", account: account, .granted, decided: 3 * day,
                transactions: [
                    F.transaction(
                        "GPA.1200-3400-5600-78901", product: "premium_forever", original: "play-token-1",
                        purchased: 3 * day, orderID: "GPA.1200-3400-5600-78901", purchaseToken: "play-token-1")
                ], store: .googlePlay),
        ]
        try await EntitlementAPIHarness.with(verdicts: verdicts, now: F.at(10 * day)) { h in
            let page = try await Self.browse(
                url: "http://127.0.0.1:\(h.port)/console", token: EntitlementAPIHarness.token,
                queries: [account, "GPA.1200-3400-5600-78901"])
            let lookup = try #require(page.lookups.first)
            #expect(lookup.found && lookup.account == account)
            // The App Store subscription ended on day 8; premium stands on the Google Play purchase.
            #expect(lookup.summary.contains("premium is active (does not expire)"))
            #expect(lookup.entitlements.first?.prefix(3) == ["premium", "Active", "premium_forever"])
            #expect(lookup.entitlements.first?.last == "Google Play")
            #expect(lookup.transactions.count == 2)
            #expect(lookup.transactions.contains { $0[0] == "2000000701" && $0.last == "App Store" })
            #expect(
                lookup.transactions.contains {
                    $0[0] == "GPA.1200-3400-5600-78901of play-token-1" && $0.last == "Google Play"
                })
            #expect(
                lookup.timeline.contains {
                    $0.contains("Granted") && $0.contains("Google Play · decided by google_play")
                })
            #expect(lookup.timeline.contains { $0.contains("Granted") && $0.contains("App Store") })
            let byOrder = try #require(page.lookups.last)
            #expect(byOrder.account == account)
            #expect(byOrder.note.contains("belongs to this account"))
        }
    }

    @Test("a Google Play subscription on account hold and one paused are named so, not as expired")
    func playHoldAndPause() async throws {
        let day = F.day
        func period(_ order: String, token: String, retry: Bool, paused: Bool) -> Verdict.Transaction {
            var item = F.transaction(
                order, product: "premium_sub", original: token, purchased: 1 * day, expires: 5 * day,
                billingRetry: retry, orderID: order, purchaseToken: token)
            item.paused = paused
            return item
        }
        let verdicts = [
            F.verdict(
                "hold-1", account: "acct-hold", .granted, decided: 1 * day,
                transactions: [period("GPA.31", token: "tok-hold", retry: false, paused: false)], store: .googlePlay),
            F.verdict(
                "hold-2", account: "acct-hold", .rejected, reason: .expired, decided: 5 * day,
                transactions: [period("GPA.31", token: "tok-hold", retry: true, paused: false)], store: .googlePlay),
            F.verdict(
                "pause-1", account: "acct-pause", .granted, decided: 1 * day,
                transactions: [period("GPA.32", token: "tok-pause", retry: false, paused: false)], store: .googlePlay),
            F.verdict(
                "pause-2", account: "acct-pause", .rejected, reason: .expired, decided: 5 * day,
                transactions: [period("GPA.32", token: "tok-pause", retry: false, paused: true)], store: .googlePlay),
        ]
        try await EntitlementAPIHarness.with(verdicts: verdicts, now: F.at(6 * day)) { h in
            let page = try await Self.browse(
                url: "http://127.0.0.1:\(h.port)/console", token: EntitlementAPIHarness.token,
                queries: ["acct-hold", "acct-pause"])
            let hold = try #require(page.lookups.first)
            #expect(hold.summary.contains("on account hold while Google Play retries the payment"))
            #expect(hold.pills.contains { $0.contains("Account hold") })
            #expect(hold.transactions.contains { $0.contains("Account hold") })
            let paused = try #require(page.lookups.last)
            #expect(paused.summary.contains("the customer paused the subscription"))
            #expect(paused.pills.contains { $0.contains("Paused") })
            #expect(paused.transactions.contains { $0.contains("Paused") })
        }
    }
}

/// A value set once by one task and read by another after it finished.
final class ResultBox<T: Sendable>: Sendable {
    private let storage = Mutex<T?>(nil)
    func set(_ value: T) { storage.withLock { $0 = value } }
    var value: T? { storage.withLock { $0 } }
}
