import Foundation
import Messages

/// What the answer to Google Play's pending refund review (`orders.reviewrefund`) says about an order, decided from
/// the ledger's claim on it and the catalog's `play_products`; the Google Play client turns it into Google's request.
///
/// - The preference is the product's `refund_preference` (`NEUTRAL` when the catalog names none) while the customer
///   has the purchase. A purchase the customer does not have (no claim, or taken back) is answered `APPROVE`: a
///   customer who received nothing is owed the refund, and declining invites a chargeback.
/// - The share consumed is stated for a subscription period only (time used of the period the claim covers, 0 to
///   100 %, in thousandths of a percent); a one-time product's use is not known to the ledger, so none is sent.
public struct RefundReviewAnswer: Sendable, Hashable {
    /// `DECLINE`, `APPROVE` or `NEUTRAL`.
    public var refundPreference: String
    /// The product's `sample_content_provided` (false when the catalog does not say).
    public var sampleContentProvided: Bool
    /// The share of the purchase used, in thousandths of a percent (0 to 100,000); nil when not known.
    public var consumptionPercentageMilliunits: Int?

    public init(refundPreference: String, sampleContentProvided: Bool, consumptionPercentageMilliunits: Int? = nil) {
        self.refundPreference = refundPreference
        self.sampleContentProvided = sampleContentProvided
        self.consumptionPercentageMilliunits = consumptionPercentageMilliunits
    }

    /// The answer for the order whose ledger claim is `claim` (nil: nobody was granted it), with `productID` the
    /// product the review names, at `now`.
    public init(claim: TransactionClaim?, productID: String, catalog: Catalog, now: Date) {
        let product = catalog.playProducts[claim?.productID ?? productID]
        let delivered = claim != nil && claim?.revokedAt == nil
        var consumed: Int?
        if let claim, delivered, claim.productType == .autoRenewable, let start = claim.purchaseDate,
            let end = claim.expiresDate, end > start
        {
            let share = now.timeIntervalSince(start) / end.timeIntervalSince(start)
            consumed = Int((min(max(share, 0), 1) * 100_000).rounded())
        }
        self.init(
            refundPreference: delivered ? (product?.refundPreference ?? "NEUTRAL") : "APPROVE",
            sampleContentProvided: product?.sampleContentProvided ?? false,
            consumptionPercentageMilliunits: consumed)
    }
}
