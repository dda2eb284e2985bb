/// A Google Play purchase as a job carries it (`google_play`): what the app's client received from Play Billing.
///
/// A one-time purchase is identified by its order id, a subscription by its purchase token; both are read from
/// Google, never taken from here. `purchaseData` and `signature` come together or not at all.
public struct GooglePlayPurchase: Sendable, Hashable {
    /// The app's package name (`package_name`).
    public var packageName: String
    /// The product the client bought (`product_id`): a one-time product's id or a subscription's id.
    public var productID: String
    /// The purchase token Play Billing gave the client (`purchase_token`).
    public var purchaseToken: String
    /// The purchase's JSON exactly as the client received it (`purchase_data`, `Purchase.getOriginalJson()`). The
    /// signature covers these exact bytes, so the text is carried and checked as received, never re-serialised.
    public var purchaseData: String?
    /// Base64 of the SHA1withRSA signature of ``purchaseData`` by the app's licensing key (`signature`,
    /// `Purchase.getSignature()`).
    public var signature: String?

    public init(
        packageName: String, productID: String, purchaseToken: String, purchaseData: String? = nil,
        signature: String? = nil
    ) {
        self.packageName = packageName
        self.productID = productID
        self.purchaseToken = purchaseToken
        self.purchaseData = purchaseData
        self.signature = signature
    }

    /// The contract's rules for the object: the package and product follow the identifier rule, the token is not
    /// empty (its shape is judged when the proof is read: a token of another shape is a verdict, not a dead letter),
    /// and the signed data comes with its signature. Errors name the field, never its value.
    func validate() throws {
        try ReceiptJob.checkIdentifier(packageName, field: "google_play.package_name")
        try ReceiptJob.checkIdentifier(productID, field: "google_play.product_id")
        if purchaseToken.isEmpty {
            throw MessageError(.invalidValue, field: "google_play.purchase_token", "must not be empty")
        }
        switch (purchaseData, signature) {
        case (nil, nil): break
        case (let data?, let signature?):
            if data.isEmpty {
                throw MessageError(.invalidValue, field: "google_play.purchase_data", "must not be empty")
            }
            if signature.isEmpty {
                throw MessageError(.invalidValue, field: "google_play.signature", "must not be empty")
            }
        case (nil, _?):
            throw MessageError(.missingField, field: "google_play.purchase_data", "required with signature")
        case (_?, nil):
            throw MessageError(.missingField, field: "google_play.signature", "required with purchase_data")
        }
    }
}

extension GooglePlayPurchase: Codable {
    enum CodingKeys: String, CodingKey, CaseIterable {
        case packageName = "package_name"
        case productID = "product_id"
        case purchaseToken = "purchase_token"
        case purchaseData = "purchase_data"
        case signature
    }
}
