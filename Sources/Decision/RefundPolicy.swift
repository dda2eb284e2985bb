import Foundation
import Messages

/// The operator's refund policy: rules evaluated top-down, the first that matches a refund question's facts
/// (``RefundFacts``) giving the answer. It answers both stores' questions: Apple's CONSUMPTION_REQUEST (Send
/// Consumption Information) and Google Play's pending refund review (`orders.reviewrefund`). The file format is in
/// docs/REFUNDS.md (``load(json:file:catalog:)``).
///
/// Whatever the rules, the policy ends with the ``defaultRule`` (`data_only`): a question no rule matches is answered
/// with the facts and no preference. Before it come, after the file's rules, the catalog's `refund_preference`
/// shorthand rules (``catalogRules(_:)``), so a catalog that names a preference keeps answering as it did.
public struct RefundPolicy: Sendable, Hashable {
    /// What a rule answers.
    public enum Answer: String, Sendable, Hashable, CaseIterable {
        /// Prefer that the store grants the refund: Apple `GRANT_FULL`, Google `APPROVE`.
        case fullRefund = "full_refund"
        /// Prefer a refund of the unused share: Apple `GRANT_PRORATED`; Google has no such preference, `APPROVE`.
        case proratedRefund = "prorated_refund"
        /// Prefer that the store declines the refund: Apple `DECLINE`, Google `DECLINE`.
        case noRefund = "no_refund"
        /// The facts without a preference: Apple's body without `refundPreference`, Google `NEUTRAL`.
        case dataOnly = "data_only"
        /// Send nothing: no Apple request, no Google call (the review lapses). Recorded as `not_sent`.
        case noResponse = "no_response"
    }

    /// A bound of a numeric condition, both ends inclusive; nil for an open end.
    public struct Bounds<Value: Comparable & Sendable & Hashable>: Sendable, Hashable {
        public var minimum: Value?
        public var maximum: Value?

        /// Whether `value` lies within; an unknown value (nil) never does.
        public func contains(_ value: Value?) -> Bool {
            guard let value else { return false }
            if let minimum, value < minimum { return false }
            if let maximum, value > maximum { return false }
            return true
        }
    }

    /// One rule: its conditions (all must hold; an absent one holds for anything) and its answer.
    public struct Rule: Sendable, Hashable {
        public var name: String
        public var store: Store?
        /// Bundle ids and package names.
        public var apps: Set<String>?
        public var products: Set<String>?
        public var productTypes: Set<ProductType>?
        /// The purchase's age when the question is answered, in seconds.
        public var purchaseAge: Bounds<Double>?
        /// The share of the purchase used, in percent (0 to 100).
        public var consumedPercent: Bounds<Double>?
        /// The units of a one-time product consumed, as the operator's consumption lookup reports them.
        public var unitsConsumed: Bounds<Int>?
        /// The account's other transactions that were refunded or revoked.
        public var earlierRefunds: Bounds<Int>?
        /// Storefront countries (ISO 3166-1 alpha-3, upper case), compared with the claim's storefront; a purchase
        /// whose storefront is not known (a legacy receipt) never matches.
        public var storefrontCountries: Set<String>?
        /// `Production`, `Sandbox`, `Xcode` (compared without case).
        public var environments: Set<String>?
        /// Whether the customer has the purchase (granted and not taken back).
        public var delivered: Bool?
        public var answer: Answer

        /// Whether the rule has no condition, so that it matches every question.
        public var isCatchAll: Bool {
            store == nil && apps == nil && products == nil && productTypes == nil && purchaseAge == nil
                && consumedPercent == nil && earlierRefunds == nil && storefrontCountries == nil
                && environments == nil && delivered == nil && unitsConsumed == nil
        }

        /// Whether every condition holds for `facts`. A condition on a fact that is not known (the age of a purchase
        /// without a date, the share or the units used of a one-time product the consumption lookup did not report,
        /// the storefront) does not hold.
        public func matches(_ facts: RefundFacts) -> Bool {
            if let store, store != facts.store { return false }
            if let apps, !apps.contains(facts.app ?? "") { return false }
            if let products, !products.contains(facts.productID) { return false }
            if let productTypes, !(facts.productType.map(productTypes.contains) ?? false) { return false }
            if let purchaseAge, !purchaseAge.contains(facts.purchaseAge) { return false }
            if let consumedPercent, !consumedPercent.contains(facts.consumedPercent) { return false }
            if let unitsConsumed, !unitsConsumed.contains(facts.unitsConsumed) { return false }
            if let earlierRefunds, !earlierRefunds.contains(facts.earlierRefunds) { return false }
            if let storefrontCountries, !storefrontCountries.contains(facts.storefrontCountry ?? "") { return false }
            if let environments {
                guard let environment = facts.environment?.lowercased(),
                    environments.contains(where: { $0.lowercased() == environment })
                else { return false }
            }
            if let delivered, delivered != facts.delivered { return false }
            return true
        }
    }

    /// What a policy decided for one question: the rule and its answer.
    public struct Decision: Sendable, Hashable {
        public var rule: String
        public var answer: Answer

        public init(rule: String, answer: Answer) {
            self.rule = rule
            self.answer = answer
        }
    }

    /// The rule every policy ends with.
    public static let defaultRule = Rule(name: "default", answer: .dataOnly)

    /// The rules in order, the ``defaultRule`` last.
    public private(set) var rules: [Rule]
    /// Consent to sharing consumption data per App Store app (bundle id), where the operator set it in the policy
    /// file; an app not listed follows `consumption_customer_consented`.
    public var customerConsented: [String: Bool]

    /// A policy of `rules` (the ``defaultRule`` is added after them).
    public init(rules: [Rule], customerConsented: [String: Bool] = [:]) {
        self.rules = rules + [Self.defaultRule]
        self.customerConsented = customerConsented
    }

    /// The policy without a file: the catalog's shorthand rules, then the default (data only).
    public init(catalog: Catalog) {
        self.init(rules: Self.catalogRules(catalog))
    }

    /// The first rule that matches `facts` (the ``defaultRule`` when no other does).
    public func decide(_ facts: RefundFacts) -> Decision {
        let rule = rules.first { $0.matches(facts) } ?? Self.defaultRule
        return Decision(rule: rule.name, answer: rule.answer)
    }

    /// Whether the customers of App Store app `bundleID` consented to sharing consumption data: the policy file's
    /// word for the app, else the operator's setting (`consumption_customer_consented`).
    public func consented(app bundleID: String?, setting: Bool) -> Bool {
        bundleID.flatMap { customerConsented[$0] } ?? setting
    }

    /// The catalog's `refund_preference` fields as rules, named `catalog:<product id>`: each matches its store's
    /// product while the customer has it (``Rule/delivered``), and answers the store's value (Apple `GRANT_FULL`,
    /// `GRANT_PRORATED`, `DECLINE`; Google `APPROVE`, `DECLINE`, `NEUTRAL`). App Store products first, each list in
    /// product id order.
    public static func catalogRules(_ catalog: Catalog) -> [Rule] {
        let apple: [Rule] = catalog.products.values.sorted { $0.id < $1.id }.compactMap { product in
            guard let answer = product.refundPreference.flatMap(Self.answer(appleValue:)) else { return nil }
            return Rule(
                name: "catalog:\(product.id)", store: .appStore, products: [product.id], delivered: true,
                answer: answer)
        }
        let play: [Rule] = catalog.playProducts.values.sorted { $0.id < $1.id }.compactMap { product in
            guard let answer = product.refundPreference.flatMap(Self.answer(googleValue:)) else { return nil }
            return Rule(
                name: "catalog:\(product.id)", store: .googlePlay, products: [product.id], delivered: true,
                answer: answer)
        }
        return apple + play
    }

    /// The answer an Apple `refundPreference` value stands for.
    static func answer(appleValue: String) -> Answer? {
        switch appleValue {
        case "GRANT_FULL": .fullRefund
        case "GRANT_PRORATED": .proratedRefund
        case "DECLINE": .noRefund
        default: nil
        }
    }

    /// The answer a Google `refundPreference` value stands for.
    static func answer(googleValue: String) -> Answer? {
        switch googleValue {
        case "APPROVE": .fullRefund
        case "DECLINE": .noRefund
        case "NEUTRAL": .dataOnly
        default: nil
        }
    }
}

extension RefundPolicy.Answer {
    /// Apple's `refundPreference` for this answer; nil sends none (data only, and no response, which sends nothing).
    public var appleRefundPreference: String? {
        switch self {
        case .fullRefund: "GRANT_FULL"
        case .proratedRefund: "GRANT_PRORATED"
        case .noRefund: "DECLINE"
        case .dataOnly, .noResponse: nil
        }
    }

    /// Google's `refundPreference` for this answer (`NEUTRAL` for data only; no response makes no call).
    public var googleRefundPreference: String {
        switch self {
        case .fullRefund, .proratedRefund: "APPROVE"
        case .noRefund: "DECLINE"
        case .dataOnly, .noResponse: "NEUTRAL"
        }
    }
}

/// The facts a refund question is decided on, read from the ledger at the time of the answer.
public struct RefundFacts: Sendable, Hashable {
    public var store: Store
    /// The bundle id or package name (nil when the ledger has no claim naming it).
    public var app: String?
    public var productID: String
    /// The product's type: the claim's, else the catalog's; nil when neither knows the product.
    public var productType: ProductType?
    /// Seconds since the purchase; nil when its date is not known.
    public var purchaseAge: Double?
    /// The share used (0 to 100): of a subscription period the claim covers, or of a one-time product's units
    /// (``recordUnits(consumed:purchased:)``); nil for a period without dates, or a one-time product whose units
    /// purchased the consumption lookup did not report.
    public var consumedPercent: Double?
    /// The account's other transactions that were refunded or revoked (0 when nobody holds the purchase).
    public var earlierRefunds: Int
    /// The country of the purchase's storefront (ISO 3166-1 alpha-3), as its claim records it; nil when nobody holds
    /// the purchase or the store did not say (a legacy receipt).
    public var storefrontCountry: String?
    public var environment: String?
    /// Whether the customer has the purchase: granted and not taken back.
    public var delivered: Bool
    /// The units of a one-time product consumed (coins, credits), as the operator's consumption lookup reports them;
    /// nil when no lookup is set or it does not know.
    public var unitsConsumed: Int?
    /// The units the purchase gave, when the consumption lookup reports them.
    public var unitsPurchased: Int?

    public init(
        store: Store, app: String?, productID: String, productType: ProductType?, purchaseAge: Double?,
        consumedPercent: Double?, earlierRefunds: Int, storefrontCountry: String? = nil, environment: String?,
        delivered: Bool
    ) {
        self.store = store
        self.app = app
        self.productID = productID
        self.productType = productType
        self.purchaseAge = purchaseAge
        self.consumedPercent = consumedPercent
        self.earlierRefunds = earlierRefunds
        self.storefrontCountry = storefrontCountry
        self.environment = environment
        self.delivered = delivered
    }

    /// The facts of the purchase whose ledger claim is `claim` (nil: nobody was granted it), named `productID` and
    /// `app` by the question itself when the ledger has no claim, with `accountClaims` the claims of its owner (every
    /// one the account holds, this one included), at `now`.
    public init(
        store: Store, claim: TransactionClaim?, productID: String, app: String?, environment: String?,
        accountClaims: [TransactionClaim], catalog: Catalog, now: Date
    ) {
        let product = claim?.productID ?? productID
        var consumed: Double?
        if let claim, claim.productType == .autoRenewable || claim.productType == .nonRenewing,
            let start = claim.purchaseDate, let end = claim.expiresDate, end > start
        {
            consumed = min(max(now.timeIntervalSince(start) / end.timeIntervalSince(start), 0), 1) * 100
        }
        let earlier = accountClaims.filter { $0.revokedAt != nil && $0.transactionID != claim?.transactionID }
        self.init(
            store: store, app: claim?.bundleID ?? app, productID: product,
            productType: claim?.productType ?? catalog.productType(of: product, in: store),
            purchaseAge: claim?.purchaseDate.map { now.timeIntervalSince($0) }, consumedPercent: consumed,
            earlierRefunds: claim == nil ? 0 : earlier.count, storefrontCountry: claim?.storefront,
            environment: claim?.environment ?? environment,
            delivered: claim != nil && claim?.revokedAt == nil)
    }
}

extension RefundFacts {
    /// Whether the product is a one-time product (consumable or non-consumable), whose use only the operator's
    /// backend knows (the consumption lookup).
    public var isOneTimeProduct: Bool { productType == .consumable || productType == .nonConsumable }

    /// Records the units of a one-time product consumed and purchased, as the consumption lookup reported them. With
    /// units purchased above 0 the share used follows (consumed / purchased, at most 100 %), so a rule on the
    /// consumed share applies to consumables as it does to subscriptions. A subscription keeps its period's share.
    public mutating func recordUnits(consumed: Int, purchased: Int?) {
        unitsConsumed = consumed
        unitsPurchased = purchased
        if isOneTimeProduct, let purchased, purchased > 0 {
            consumedPercent = min(Double(consumed) / Double(purchased), 1) * 100
        }
    }
}
