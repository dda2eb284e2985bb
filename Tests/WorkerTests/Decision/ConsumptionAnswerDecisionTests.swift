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

    @Test("a consumable the catalog lists: delivered, with its sample content and refund preference")
    func consumable() {
        let answer = ConsumptionAnswer(claim: Self.claim("coins.100", type: .consumable), catalog: Self.catalog)
        #expect(
            answer
                == ConsumptionAnswer(
                    delivered: true, sampleContentProvided: true, refundPreference: "GRANT_FULL",
                    decision: RefundPolicy.Decision(rule: "catalog:coins.100", answer: .fullRefund)))
    }

    @Test("a non-consumable the catalog lists without either setting: no sample content, no refund preference")
    func nonConsumable() {
        let answer = ConsumptionAnswer(claim: Self.claim("pro.lifetime", type: .nonConsumable), catalog: Self.catalog)
        #expect(answer == ConsumptionAnswer(delivered: true, sampleContentProvided: false, refundPreference: nil))
        let revoked = ConsumptionAnswer(
            claim: Self.claim("pro.lifetime", type: .nonConsumable, revokedAt: Date()), catalog: Self.catalog)
        #expect(!revoked.delivered)
    }

    @Test("a product the catalog does not list: the claim still says delivered, the product's facts are defaults")
    func unknownProduct() {
        let answer = ConsumptionAnswer(claim: Self.claim("gone.product", type: .consumable), catalog: Self.catalog)
        #expect(answer == ConsumptionAnswer(delivered: true, sampleContentProvided: false, refundPreference: nil))
    }

    @Test("no claim in the ledger: not delivered, and no product to read")
    func noClaim() {
        let answer = ConsumptionAnswer(claim: nil, catalog: Self.catalog)
        #expect(answer == ConsumptionAnswer(delivered: false, sampleContentProvided: false, refundPreference: nil))
    }
}
