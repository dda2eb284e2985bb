/// `purchases.subscriptionsv2.get`'s answer, `SubscriptionPurchaseV2`: the fields the decision reads. Unknown fields
/// are ignored and enum values are kept as Google spells them, so a value added by Google reads as itself.
public struct GooglePlaySubscriptionPurchase: Sendable, Hashable, Decodable {
    /// `SUBSCRIPTION_STATE_ACTIVE`, `…_PENDING`, `…_CANCELED`, `…_EXPIRED`, `…_IN_GRACE_PERIOD`, `…_ON_HOLD`, …
    public var subscriptionState: String?
    /// One item per subscribed product.
    public var lineItems: [LineItem]
    /// The token this purchase replaced (upgrade, downgrade, resubscription).
    public var linkedPurchaseToken: String?
    /// `ACKNOWLEDGEMENT_STATE_PENDING` or `ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED`.
    public var acknowledgementState: String?
    /// `externalAccountIdentifiers.obfuscatedExternalAccountId`: the account the app tagged the purchase with.
    public var obfuscatedExternalAccountID: String?
    /// Whether `testPurchase` is present: a license tester's purchase.
    public var isTestPurchase: Bool
    /// `startTime` (RFC 3339).
    public var startTime: String?
    /// `regionCode` (ISO 3166-1 alpha-2).
    public var regionCode: String?

    /// One `SubscriptionPurchaseLineItem`.
    public struct LineItem: Sendable, Hashable, Decodable {
        public var productID: String?
        /// `expiryTime` (RFC 3339).
        public var expiryTime: String?
        /// The order id of the latest successful charge (renewals get new ones).
        public var latestSuccessfulOrderID: String?
        /// Whether the item renews (`autoRenewingPlan` present), and `autoRenewingPlan.autoRenewEnabled`.
        public var autoRenewing: Bool
        public var autoRenewEnabled: Bool?

        enum CodingKeys: String, CodingKey {
            case productID = "productId", expiryTime, latestSuccessfulOrderID = "latestSuccessfulOrderId"
            case autoRenewingPlan
        }

        struct AutoRenewingPlan: Decodable { var autoRenewEnabled: Bool? }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            productID = try container.decodeIfPresent(String.self, forKey: .productID)
            expiryTime = try container.decodeIfPresent(String.self, forKey: .expiryTime)
            latestSuccessfulOrderID = try container.decodeIfPresent(String.self, forKey: .latestSuccessfulOrderID)
            let plan = try container.decodeIfPresent(AutoRenewingPlan.self, forKey: .autoRenewingPlan)
            autoRenewing = plan != nil
            autoRenewEnabled = plan?.autoRenewEnabled
        }
    }

    enum CodingKeys: String, CodingKey {
        case subscriptionState, lineItems, linkedPurchaseToken, acknowledgementState, externalAccountIdentifiers
        case testPurchase, startTime, regionCode
    }

    struct ExternalAccountIdentifiers: Decodable { var obfuscatedExternalAccountId: String? }
    struct Present: Decodable {}

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        subscriptionState = try container.decodeIfPresent(String.self, forKey: .subscriptionState)
        lineItems = try container.decodeIfPresent([LineItem].self, forKey: .lineItems) ?? []
        linkedPurchaseToken = try container.decodeIfPresent(String.self, forKey: .linkedPurchaseToken)
        acknowledgementState = try container.decodeIfPresent(String.self, forKey: .acknowledgementState)
        obfuscatedExternalAccountID =
            try container.decodeIfPresent(ExternalAccountIdentifiers.self, forKey: .externalAccountIdentifiers)?
            .obfuscatedExternalAccountId
        isTestPurchase = try container.decodeIfPresent(Present.self, forKey: .testPurchase) != nil
        startTime = try container.decodeIfPresent(String.self, forKey: .startTime)
        regionCode = try container.decodeIfPresent(String.self, forKey: .regionCode)
    }
}

/// `purchases.productsv2.getproductpurchasev2`'s answer, `ProductPurchaseV2`: the fields the decision reads, as
/// tolerant as ``GooglePlaySubscriptionPurchase``.
public struct GooglePlayProductPurchase: Sendable, Hashable, Decodable {
    /// One item per product bought.
    public var productLineItems: [LineItem]
    /// `purchaseStateContext.purchaseState`: `PURCHASED`, `CANCELLED` or `PENDING`.
    public var purchaseState: String?
    /// The order id: a one-time purchase's identity.
    public var orderID: String?
    /// The account the app tagged the purchase with.
    public var obfuscatedExternalAccountID: String?
    /// Whether `testPurchaseContext` is present: a license tester's purchase.
    public var isTestPurchase: Bool
    /// `ACKNOWLEDGEMENT_STATE_PENDING` or `ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED`.
    public var acknowledgementState: String?
    /// `purchaseCompletionTime` (RFC 3339).
    public var purchaseCompletionTime: String?
    public var regionCode: String?

    /// One `ProductLineItem`.
    public struct LineItem: Sendable, Hashable, Decodable {
        public var productID: String?
        /// `productOfferDetails.consumptionState`: `CONSUMPTION_STATE_YET_TO_BE_CONSUMED` or `…_CONSUMED`.
        public var consumptionState: String?
        /// `productOfferDetails.quantity`.
        public var quantity: Int?

        enum CodingKeys: String, CodingKey { case productID = "productId", productOfferDetails }
        struct OfferDetails: Decodable {
            var consumptionState: String?
            var quantity: Int?
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            productID = try container.decodeIfPresent(String.self, forKey: .productID)
            let offer = try container.decodeIfPresent(OfferDetails.self, forKey: .productOfferDetails)
            consumptionState = offer?.consumptionState
            quantity = offer?.quantity
        }
    }

    enum CodingKeys: String, CodingKey {
        case productLineItem, purchaseStateContext, orderId, obfuscatedExternalAccountId, testPurchaseContext
        case acknowledgementState, purchaseCompletionTime, regionCode
    }

    struct StateContext: Decodable { var purchaseState: String? }
    struct Present: Decodable {}

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        productLineItems = try container.decodeIfPresent([LineItem].self, forKey: .productLineItem) ?? []
        purchaseState = try container.decodeIfPresent(StateContext.self, forKey: .purchaseStateContext)?.purchaseState
        orderID = try container.decodeIfPresent(String.self, forKey: .orderId)
        obfuscatedExternalAccountID = try container.decodeIfPresent(String.self, forKey: .obfuscatedExternalAccountId)
        isTestPurchase = try container.decodeIfPresent(Present.self, forKey: .testPurchaseContext) != nil
        acknowledgementState = try container.decodeIfPresent(String.self, forKey: .acknowledgementState)
        purchaseCompletionTime = try container.decodeIfPresent(String.self, forKey: .purchaseCompletionTime)
        regionCode = try container.decodeIfPresent(String.self, forKey: .regionCode)
    }
}

/// An acknowledge or consume Google accepted (its answer has an empty body).
public struct GooglePlayAccepted: Sendable, Hashable {
    public init() {}
}

/// The answer to a pending refund review (`orders.reviewrefund`'s `OrdersReviewRefundRequest`): what the developer
/// prefers and what it knows of the purchase's use. Google reviews a refund once, so one answer per review.
public struct GooglePlayRefundReview: Sendable, Hashable, Encodable {
    /// The review's token, from the pending refund review notification (`pendingRefundToken`).
    public var pendingRefundToken: String
    /// Whether a free sample, trial or description was given before the purchase (`sampleContentProvided`).
    public var sampleContentProvided: Bool
    /// `DECLINE`, `APPROVE` or `NEUTRAL` (`refundPreference`).
    public var refundPreference: String
    /// How much of the purchase the customer used, in thousandths of a percent, 0 to 100,000
    /// (`consumptionPercentageMilliunits`); nil sends none.
    public var consumptionPercentageMilliunits: Int?

    /// The largest `consumptionPercentageMilliunits` Google accepts (100 %).
    public static let fullConsumption = 100_000

    public init(
        pendingRefundToken: String, sampleContentProvided: Bool, refundPreference: String,
        consumptionPercentageMilliunits: Int? = nil
    ) {
        self.pendingRefundToken = pendingRefundToken
        self.sampleContentProvided = sampleContentProvided
        self.refundPreference = refundPreference
        self.consumptionPercentageMilliunits = consumptionPercentageMilliunits.map {
            min(max($0, 0), Self.fullConsumption)
        }
    }
}
