import Foundation
import Testing

@testable import Chaos

@Suite("Chaos: the printed summary")
struct ChaosReportTests {
    /// Every family's figures, as one printed report.
    struct Summary: ChaosPrintedReport {
        var notifications = ChaosNotificationReport()
        var play = ChaosPlayReport()
        var playLifecycle = ChaosPlayLifecycleReport()
        var liveFuzz = ChaosLiveFuzzReport()
    }

    static func keys(of value: Any, into keys: inout Set<String>) {
        if let object = value as? [String: Any] {
            for (key, nested) in object {
                keys.insert(key)
                Self.keys(of: nested, into: &keys)
            }
        } else if let array = value as? [Any] {
            for nested in array { Self.keys(of: nested, into: &keys) }
        }
    }

    @Test("every key of the summary is snake case; the Google Play figures are their names in snake case")
    func snakeCaseKeys() throws {
        var summary = Summary()
        summary.play.outcomes = ["granted": 1]
        summary.play.requests = ["purchases.productsv2.getproductpurchasev2": 2]
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(summary.json.utf8)) as? [String: Any])
        var keys: Set<String> = []
        Self.keys(of: object, into: &keys)
        // Outcome and route names are the run's data, kept as they are.
        keys.subtract(["granted", "purchases.productsv2.getproductpurchasev2"])
        let notSnakeCase = keys.filter { key in
            key.unicodeScalars.contains { !("a"..."z").contains($0) && !("0"..."9").contains($0) && $0 != "_" }
        }
        #expect(notSnakeCase.isEmpty, "\(notSnakeCase.sorted())")
        let play = try #require(object["play"] as? [String: Any])
        #expect(
            Set(play.keys) == [
                "jobs", "jobs_decided", "lost", "outcomes", "purchases_minted", "purchases_granted",
                "acknowledged_once", "consumed_once", "requests", "faults_injected",
            ])
        #expect((play["requests"] as? [String: Int]) == ["purchases.productsv2.getproductpurchasev2": 2])
        let fuzz = try #require(object["live_fuzz"] as? [String: Any])
        #expect(fuzz["max_rss_mb"] != nil && fuzz["rss_limit_mb"] != nil && fuzz["elapsed_s"] != nil)
        #expect((object["notifications"] as? [String: Any])?["reconcile_budget_per_s"] != nil)
    }

    @Test("a lifecycle family that did not settle is one run failure naming the first step missing")
    func unsettled() {
        func violations(retriesOver: Bool, swept: Bool) -> [ChaosViolation] {
            ChaosViolation.unsettled(
                "Play lifecycle", retriesOver: retriesOver, swept: swept, retrying: "still retrying",
                unswept: "no sweep")
        }
        #expect(violations(retriesOver: true, swept: true).isEmpty)
        #expect(violations(retriesOver: true, swept: false) == [.runFailed("Play lifecycle: no sweep")])
        #expect(violations(retriesOver: false, swept: true) == [.runFailed("Play lifecycle: still retrying")])
        #expect(violations(retriesOver: false, swept: false) == [.runFailed("Play lifecycle: still retrying")])
    }
}
