import AppleClients
import Decision
import Foundation
import GooglePlayClients
import Ledger
import Messages

/// What the refund policy answers for one purchase now, and the exact request the worker would send
/// (`verify-worker refund-policy explain`). Built by the same functions the worker answers with
/// (``AppleFollowUps/consumptionAnswer(for:environment:ledger:catalog:policy:customerConsented:now:)`` and
/// ``GooglePlayFollowUps/refundReviewAnswer(orderID:productID:packageName:ledger:catalog:policy:now:)``).
public enum RefundPolicyExplanation {
    /// The explanation as a JSON object: `store`, `transaction_id`, `claimed` (whether the ledger has a claim on it),
    /// `facts`, `rule`, `answer`, `sent` (whether a
    /// request would be sent), `not_sent` (why not), `request` (method and path) and `body` (the request's JSON, as
    /// the client encodes it; null when nothing would be sent) and `consumption_lookup` (how `lookup` answered for a
    /// one-time product: `found`, `unknown`, `invalid: ...` or `lookup failed: ...`; null when not asked). The store
    /// is the claim's (its app is one of the catalog's `play_apps`: Google Play), else `store`. A Google Play review's
    /// body carries `pendingRefundToken`, which only its notification names: `pendingRefundToken` stands in for it.
    public static func explain(
        transactionID: String, store: Store?, productID: String?, ledger: any Ledger, catalog: Catalog,
        policy: RefundPolicy, customerConsented: Bool, pendingRefundToken: String = "pendingRefundToken", now: Date,
        lookup: ConsumptionLookup? = nil
    ) async throws -> [String: Any] {
        let snapshot = try await ledger.snapshot(jobID: "", transactionIDs: [transactionID], originalTransactionIDs: [])
        let claim = snapshot.claim(transactionID)
        let claimStore: Store? = claim.map {
            catalog.playApp(packageName: $0.bundleID ?? "") != nil ? .googlePlay : .appStore
        }
        var report: [String: Any] = ["transaction_id": transactionID, "claimed": claim != nil]
        let facts: RefundFacts
        let decision: RefundPolicy.Decision
        var body: Data?
        var notSent: String?
        var looked: ConsumptionLookup.Outcome?
        switch claimStore ?? store ?? .appStore {
        case .appStore:
            let plan = try await AppleFollowUps.consumptionAnswer(
                for: transactionID, environment: nil, ledger: ledger, catalog: catalog, policy: policy,
                customerConsented: customerConsented, now: now, lookup: lookup)
            facts = plan.facts
            looked = plan.lookup
            decision = plan.answer.decision
            if let information = plan.information {
                if plan.consented { body = try encoded(information) } else { notSent = "no customer consent" }
            } else {
                notSent = "no_response"
            }
            report["request"] = "PUT /inApps/v2/transactions/consumption/\(transactionID)"
        case .googlePlay:
            // The claim of an order with several products is keyed `{order id}#{product id}`.
            let orderID = claim == nil ? transactionID : String(transactionID.split(separator: "#").first ?? "")
            let product = claim?.productID ?? productID ?? ""
            let packageName = claim?.bundleID ?? catalog.playApps.first?.packageName ?? ""
            let (reviewFacts, answer, reviewLookup) = try await GooglePlayFollowUps.refundReviewAnswer(
                orderID: orderID, productID: product, packageName: packageName, ledger: ledger, catalog: catalog,
                policy: policy, now: now, lookup: lookup)
            facts = reviewFacts
            looked = reviewLookup
            decision = answer.decision
            if decision.answer == .noResponse {
                notSent = "no_response"
            } else {
                body = try encoded(
                    GooglePlayRefundReview(
                        pendingRefundToken: pendingRefundToken, sampleContentProvided: answer.sampleContentProvided,
                        refundPreference: answer.googleRefundPreference,
                        consumptionPercentageMilliunits: answer.consumptionPercentageMilliunits))
            }
            report["request"] = "POST applications/\(packageName)/orders/\(orderID):reviewrefund"
        }
        report["store"] = facts.store.rawValue
        report["facts"] = Self.json(facts)
        report["rule"] = decision.rule
        report["answer"] = decision.answer.rawValue
        report["sent"] = body != nil
        report["not_sent"] = notSent ?? NSNull()
        report["consumption_lookup"] = looked?.summary ?? NSNull()
        report["body"] = try body.map { try JSONSerialization.jsonObject(with: $0) } ?? NSNull()
        return report
    }

    /// The facts as the policy saw them; an unknown one is null.
    static func json(_ facts: RefundFacts) -> [String: Any] {
        [
            "app": facts.app ?? NSNull(),
            "product_id": facts.productID,
            "product_type": facts.productType?.rawValue ?? NSNull(),
            "purchase_age_days": facts.purchaseAge.map { $0 / 86_400 } ?? NSNull(),
            "consumed_percent": facts.consumedPercent ?? NSNull(),
            "units_consumed": facts.unitsConsumed ?? NSNull(),
            "units_purchased": facts.unitsPurchased ?? NSNull(),
            "earlier_refunds": facts.earlierRefunds,
            "storefront_country": facts.storefrontCountry ?? NSNull(),
            "environment": facts.environment ?? NSNull(),
            "delivered": facts.delivered,
        ]
    }

    /// The body as the store's client encodes it (sorted keys).
    static func encoded(_ value: some Encodable) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return try encoder.encode(value)
    }
}
