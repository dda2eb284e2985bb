import Foundation
import Messages

/// What a consumption answer (the reply to a CONSUMPTION_REQUEST) says about a purchase, decided from the ledger's
/// claim, the catalog and the refund policy; the store's client turns it into the store's request (Send Consumption
/// Information).
public struct ConsumptionAnswer: Sendable, Hashable {
    /// Whether the customer has the purchase: granted and not taken back.
    public var delivered: Bool
    /// Whether a free sample, trial or description of the content was given before the purchase (the product's
    /// `sample_content_provided`; false for a product the catalog does not list).
    public var sampleContentProvided: Bool
    /// Apple's `refundPreference` for the policy's answer (``RefundPolicy/Answer/appleRefundPreference``); nil sends
    /// none.
    public var refundPreference: String?
    /// The rule that made the answer, and its answer: `no_response` sends nothing.
    public var decision: RefundPolicy.Decision

    public init(
        delivered: Bool, sampleContentProvided: Bool, refundPreference: String? = nil,
        decision: RefundPolicy.Decision = RefundPolicy.Decision(rule: "default", answer: .dataOnly)
    ) {
        self.delivered = delivered
        self.sampleContentProvided = sampleContentProvided
        self.refundPreference = refundPreference
        self.decision = decision
    }

    /// The answer for the transaction whose ledger claim is `claim` (nil: nobody was granted it), its product's facts
    /// read from `catalog`, under `policy` (nil: the policy without a file, ``RefundPolicy/init(catalog:)``), with
    /// `accountClaims` the claims of the purchase's owner, at `now`.
    public init(
        claim: TransactionClaim?, catalog: Catalog, policy: RefundPolicy? = nil, accountClaims: [TransactionClaim] = [],
        environment: String? = nil, now: Date = Date()
    ) {
        let facts = RefundFacts(
            store: .appStore, claim: claim, productID: claim?.productID ?? "", app: nil, environment: environment,
            accountClaims: accountClaims, catalog: catalog, now: now)
        self.init(facts: facts, catalog: catalog, policy: policy ?? RefundPolicy(catalog: catalog))
    }

    /// The answer for a question whose facts are `facts`.
    public init(facts: RefundFacts, catalog: Catalog, policy: RefundPolicy) {
        let decision = policy.decide(facts)
        self.init(
            delivered: facts.delivered,
            sampleContentProvided: catalog.products[facts.productID]?.sampleContentProvided ?? false,
            refundPreference: decision.answer.appleRefundPreference, decision: decision)
    }
}
