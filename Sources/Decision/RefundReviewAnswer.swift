import Foundation
import Messages

/// What the answer to Google Play's pending refund review (`orders.reviewrefund`) says about an order, decided from
/// the ledger's claim on it, the catalog's `play_products` and the refund policy; the Google Play client turns it
/// into Google's request.
///
/// - The preference is the policy's answer in Google's words (``RefundPolicy/Answer/googleRefundPreference``:
///   `APPROVE`, `DECLINE`, or `NEUTRAL` for data only); `no_response` makes no call.
/// - The share consumed is stated for a subscription period only (time used of the period the claim covers, 0 to
///   100 %, in thousandths of a percent); a one-time product's use is not known to the ledger, so none is sent.
public struct RefundReviewAnswer: Sendable, Hashable {
    /// `DECLINE`, `APPROVE` or `NEUTRAL`.
    public var refundPreference: String
    /// The product's `sample_content_provided` (false when the catalog does not say).
    public var sampleContentProvided: Bool
    /// The share of the purchase used, in thousandths of a percent (0 to 100,000); nil when not known.
    public var consumptionPercentageMilliunits: Int?
    /// The rule that made the answer, and its answer: `no_response` makes no call.
    public var decision: RefundPolicy.Decision

    public init(
        refundPreference: String, sampleContentProvided: Bool, consumptionPercentageMilliunits: Int? = nil,
        decision: RefundPolicy.Decision = RefundPolicy.Decision(rule: "default", answer: .dataOnly)
    ) {
        self.refundPreference = refundPreference
        self.sampleContentProvided = sampleContentProvided
        self.consumptionPercentageMilliunits = consumptionPercentageMilliunits
        self.decision = decision
    }

    /// The answer for the order whose ledger claim is `claim` (nil: nobody was granted it), with `productID` the
    /// product the review names, of app `packageName`, under `policy` (nil: the policy without a file), with
    /// `accountClaims` the claims of the order's owner, at `now`.
    public init(
        claim: TransactionClaim?, productID: String, catalog: Catalog, now: Date, policy: RefundPolicy? = nil,
        packageName: String? = nil, accountClaims: [TransactionClaim] = []
    ) {
        let facts = RefundFacts(
            store: .googlePlay, claim: claim, productID: productID, app: packageName, environment: nil,
            accountClaims: accountClaims, catalog: catalog, now: now)
        self.init(facts: facts, catalog: catalog, policy: policy ?? RefundPolicy(catalog: catalog))
    }

    /// The answer for a review whose facts are `facts`.
    public init(facts: RefundFacts, catalog: Catalog, policy: RefundPolicy) {
        let decision = policy.decide(facts)
        var consumed: Int?
        if facts.delivered, facts.productType == .autoRenewable, let share = facts.consumedPercent {
            consumed = Int((share * 1_000).rounded())
        }
        self.init(
            refundPreference: decision.answer.googleRefundPreference,
            sampleContentProvided: catalog.playProducts[facts.productID]?.sampleContentProvided ?? false,
            consumptionPercentageMilliunits: consumed, decision: decision)
    }
}
