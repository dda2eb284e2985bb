import Entitlements
import Foundation
import Messages

/// Verdicts, catalogs and clocks for the entitlement suites.
enum EntitlementFixtures {
    static let t0 = Date(timeIntervalSince1970: 1_790_000_000)

    static func at(_ seconds: Double) -> Date { t0.addingTimeInterval(seconds) }

    static let day: Double = 86_400

    static let catalog = Catalog(
        products: [
            .init(id: "pro.monthly", type: .autoRenewable, entitlements: ["premium"]),
            .init(id: "pro.yearly", type: .autoRenewable, entitlements: ["premium"]),
            .init(id: "lifetime", type: .nonConsumable, entitlements: ["premium"]),
            .init(id: "no.ads", type: .nonConsumable),
            .init(id: "coins.100", type: .consumable),
            .init(id: "gems_50", type: .consumable),
            .init(id: "season.pass", type: .nonRenewing, entitlements: ["season"]),
        ],
        playProducts: [
            .init(id: "premium_sub", type: .autoRenewable, basePlans: ["monthly"], entitlements: ["premium"]),
            .init(id: "premium_forever", type: .nonConsumable, entitlements: ["premium"]),
            .init(id: "gems_50", type: .consumable),
        ])

    static func transaction(
        _ id: String, product: String = "pro.monthly", original: String? = nil, purchased: Double = 0,
        expires: Double? = nil, revoked: Double? = nil, quantity: Int? = nil, billingRetry: Bool? = nil,
        grace: Double? = nil, orderID: String? = nil, purchaseToken: String? = nil
    ) -> Verdict.Transaction {
        Verdict.Transaction(
            transactionID: id, originalTransactionID: original ?? id, productID: product, purchaseDate: at(purchased),
            expiresDate: expires.map(at), revokedAt: revoked.map(at), quantity: quantity, inBillingRetry: billingRetry,
            gracePeriodExpiresDate: grace.map(at), orderID: orderID, purchaseToken: purchaseToken)
    }

    static func verdict(
        _ job: String, account: String, _ outcome: Verdict.Outcome, reason: Verdict.Reason? = nil,
        decided: Double, transactions: [Verdict.Transaction] = [], by: Verdict.DecidedBy? = nil,
        store: Store = .appStore
    ) -> Verdict {
        Verdict(
            verdictID: Verdict.legacyVerdictID(jobID: job), jobID: job, accountID: account, outcome: outcome,
            reason: reason ?? (outcome == .granted ? nil : .malformed),
            decidedBy: by ?? (store == .googlePlay ? .googlePlay : .apple), store: store, environment: "Production",
            transactions: transactions, decidedAt: at(decided))
    }

    /// Applies verdicts in order to a fresh state, returning the state and each result.
    static func project(
        _ verdicts: [Verdict], into state: ProjectionState = ProjectionState(), catalog: Catalog = catalog
    ) -> (ProjectionState, [EntitlementProjection.Result]) {
        var state = state
        var results: [EntitlementProjection.Result] = []
        for verdict in verdicts {
            results.append(
                EntitlementProjection.apply(.verdict(verdict), to: &state, catalog: catalog, recordedAt: at(1)))
        }
        return (state, results)
    }

    static func entitlements(
        of account: String, in state: ProjectionState, at instant: Date, catalog: Catalog = catalog
    ) -> [String: EntitlementSummary] {
        Dictionary(
            uniqueKeysWithValues: EntitlementSummary.summarize(
                state.transactions(ofAccount: account), catalog: catalog, at: instant
            ).map { ($0.entitlementID, $0) })
    }

    static func eventKinds(_ state: ProjectionState, account: String) -> [LifecycleEvent.Kind] {
        state.events.filter { $0.accountID == account }.map(\.kind)
    }

    static func json(_ object: [String: Any]) -> [UInt8] {
        Array(try! JSONSerialization.data(withJSONObject: object))
    }

    /// A verdict's JSON as the worker writes it, with fields replaced or removed (`NSNull` removes).
    static func verdictJSON(_ verdict: Verdict, replacing changes: [String: Any] = [:]) -> [UInt8] {
        var object = try! JSONSerialization.jsonObject(with: Data(MessageCodec().encode(verdict))) as! [String: Any]
        for (key, value) in changes {
            if value is NSNull { object[key] = nil } else { object[key] = value }
        }
        return json(object)
    }
}
