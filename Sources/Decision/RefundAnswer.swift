import Foundation
import Messages

/// What the answer to a store's refund question says about a purchase, decided from the ledger's claim, the catalog
/// and the refund policy; the store's client turns it into the store's request: Apple's consumption answer (the reply
/// to a CONSUMPTION_REQUEST, Send Consumption Information) or the answer to Google Play's pending refund review
/// (`orders.reviewrefund`).
///
/// - The preference is the policy's answer in the store's words (``appleRefundPreference``,
///   ``googleRefundPreference``); `no_response` makes no call.
/// - The share consumed (0 to 100 %, in thousandths of a percent) is stated for a subscription period (time used of
///   the period the claim covers) and for a one-time product whose units consumed and purchased the operator's
///   consumption lookup reported (``RefundFacts/recordUnits(consumed:purchased:)``); otherwise none is sent.
public struct RefundAnswer: Sendable, Hashable {
    /// Whether the customer has the purchase: granted and not taken back.
    public var delivered: Bool
    /// Whether a free sample, trial or description of the content was given before the purchase (the product's
    /// `sample_content_provided` in the catalog of the purchase's store; false for a product the catalog does not
    /// list).
    public var sampleContentProvided: Bool
    /// The share of the purchase used, in thousandths of a percent (0 to 100,000); nil when not known.
    public var consumptionPercentageMilliunits: Int?
    /// The rule that made the answer, and its answer: `no_response` makes no call.
    public var decision: RefundPolicy.Decision

    public init(
        delivered: Bool, sampleContentProvided: Bool, consumptionPercentageMilliunits: Int? = nil,
        decision: RefundPolicy.Decision = RefundPolicy.Decision(rule: "default", answer: .dataOnly)
    ) {
        self.delivered = delivered
        self.sampleContentProvided = sampleContentProvided
        self.consumptionPercentageMilliunits = consumptionPercentageMilliunits
        self.decision = decision
    }

    /// The answer for a question whose facts are `facts`.
    public init(facts: RefundFacts, catalog: Catalog, policy: RefundPolicy) {
        let sampleContentProvided =
            switch facts.store {
            case .appStore: catalog.products[facts.productID]?.sampleContentProvided
            case .googlePlay: catalog.playProducts[facts.productID]?.sampleContentProvided
            }
        var consumed: Int?
        if facts.delivered, facts.productType == .autoRenewable || facts.isOneTimeProduct && facts.unitsConsumed != nil,
            let share = facts.consumedPercent
        {
            consumed = Int((share * 1_000).rounded())
        }
        self.init(
            delivered: facts.delivered, sampleContentProvided: sampleContentProvided ?? false,
            consumptionPercentageMilliunits: consumed, decision: policy.decide(facts))
    }

    /// Apple's `refundPreference` for the policy's answer (``RefundPolicy/Answer/appleRefundPreference``); nil sends
    /// none.
    public var appleRefundPreference: String? { decision.answer.appleRefundPreference }

    /// Google's `refundPreference` for the policy's answer (``RefundPolicy/Answer/googleRefundPreference``:
    /// `APPROVE`, `DECLINE`, or `NEUTRAL` for data only).
    public var googleRefundPreference: String { decision.answer.googleRefundPreference }
}
