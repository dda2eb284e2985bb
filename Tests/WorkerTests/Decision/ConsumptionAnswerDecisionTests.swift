import Decision
import Foundation
import Messages
import Testing

/// The consumption answer's facts are decided from the ledger's claim and the catalog, in Decision alone.
@Suite("Decision: the consumption answer")
struct ConsumptionAnswerDecisionTests {
    static let catalog = Catalog(
        bundleIDs: ["com.example.app"],
        products: [
            .init(id: "coins.100", type: .consumable, refundPreference: "GRANT_FULL", sampleContentProvided: true),
            .init(id: "pro.lifetime", type: .nonConsumable),
        ])

    static func claim(_ productID: String, type: ProductType, revokedAt: Date? = nil) -> TransactionClaim {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        return TransactionClaim(
            transactionID: "1000", originalTransactionID: "1000", accountID: "acct-1", productID: productID,
            productType: type, revokedAt: revokedAt, grantedJobID: "job-1", verdictID: "verdict-1", createdAt: now,
            updatedAt: now)
    }

    /// The answer to Apple for the transaction whose ledger claim is `claim` (nil: nobody was granted it), under the
    /// policy without a file, as the worker builds it.
    static func answer(claim: TransactionClaim?) -> RefundAnswer {
        let facts = RefundFacts(
            store: .appStore, claim: claim, productID: claim?.productID ?? "", app: nil, environment: nil,
            accountClaims: [], catalog: catalog, now: Date())
        return RefundAnswer(facts: facts, catalog: catalog, policy: RefundPolicy(catalog: catalog))
    }

    @Test("a consumable the catalog lists: delivered, with its sample content and refund preference")
    func consumable() {
        let answer = Self.answer(claim: Self.claim("coins.100", type: .consumable))
        #expect(
            answer
                == RefundAnswer(
                    delivered: true, sampleContentProvided: true,
                    decision: RefundPolicy.Decision(rule: "catalog:coins.100", answer: .fullRefund)))
        #expect(answer.appleRefundPreference == "GRANT_FULL")
    }

    @Test("a non-consumable the catalog lists without either setting: no sample content, no refund preference")
    func nonConsumable() {
        let answer = Self.answer(claim: Self.claim("pro.lifetime", type: .nonConsumable))
        #expect(answer == RefundAnswer(delivered: true, sampleContentProvided: false))
        #expect(answer.appleRefundPreference == nil)
        let revoked = Self.answer(claim: Self.claim("pro.lifetime", type: .nonConsumable, revokedAt: Date()))
        #expect(!revoked.delivered)
    }

    @Test("a product the catalog does not list: the claim still says delivered, the product's facts are defaults")
    func unknownProduct() {
        let answer = Self.answer(claim: Self.claim("gone.product", type: .consumable))
        #expect(answer == RefundAnswer(delivered: true, sampleContentProvided: false))
        #expect(answer.appleRefundPreference == nil)
    }

    @Test("no claim in the ledger: not delivered, and no product to read")
    func noClaim() {
        let answer = Self.answer(claim: nil)
        #expect(answer == RefundAnswer(delivered: false, sampleContentProvided: false))
        #expect(answer.appleRefundPreference == nil)
    }
}
