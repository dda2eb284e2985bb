import Messages

/// What a consumption answer (the reply to a CONSUMPTION_REQUEST) says about a purchase, decided from the ledger's
/// claim and the catalog; the store's client turns it into the store's request (Send Consumption Information).
public struct ConsumptionAnswer: Sendable, Hashable {
    /// Whether the customer has the purchase: granted and not taken back.
    public var delivered: Bool
    /// Whether a free sample, trial or description of the content was given before the purchase (the product's
    /// `sample_content_provided`; false for a product the catalog does not list).
    public var sampleContentProvided: Bool
    /// What the operator wants done with a refund (the product's `refund_preference`, one of
    /// ``Catalog/Product/refundPreferences``); nil sends none.
    public var refundPreference: String?

    public init(delivered: Bool, sampleContentProvided: Bool, refundPreference: String? = nil) {
        self.delivered = delivered
        self.sampleContentProvided = sampleContentProvided
        self.refundPreference = refundPreference
    }

    /// The answer for the transaction whose ledger claim is `claim` (nil: nobody was granted it), its product's facts
    /// read from `catalog`.
    public init(claim: TransactionClaim?, catalog: Catalog) {
        let product = claim.flatMap { catalog.products[$0.productID] }
        self.init(
            delivered: claim != nil && claim?.revokedAt == nil,
            sampleContentProvided: product?.sampleContentProvided ?? false,
            refundPreference: product?.refundPreference)
    }
}
