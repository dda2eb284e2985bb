import Foundation
import Messages
import Testing

@testable import Decision

/// The refund policy (docs/REFUNDS.md): each condition at, just under and just over its limit, the order of the
/// rules, the built-in rules, the facts read from the ledger, and the policy file's checks.
@Suite("Decision: the refund policy")
struct RefundPolicyTests {
    static let day = 86_400.0
    static let start = Date(timeIntervalSince1970: 1_800_000_000)

    static func facts(
        store: Store = .appStore, app: String? = "com.example.app", product: String = "coins",
        type: ProductType? = .consumable, age: Double? = 3 * day, consumed: Double? = nil, refunds: Int = 0,
        environment: String? = "Production", delivered: Bool = true
    ) -> RefundFacts {
        RefundFacts(
            store: store, app: app, productID: product, productType: type, purchaseAge: age, consumedPercent: consumed,
            earlierRefunds: refunds, environment: environment, delivered: delivered)
    }

    static func matches(_ rule: RefundPolicy.Rule, _ facts: RefundFacts) -> Bool { rule.matches(facts) }

    @Test("purchase age: at the minimum and the maximum it matches, a second outside either it does not")
    func purchaseAge() {
        let rule = RefundPolicy.Rule(
            name: "r", purchaseAge: .init(minimum: 2 * Self.day, maximum: 5 * Self.day), answer: .noRefund)
        #expect(rule.matches(Self.facts(age: 2 * Self.day)))
        #expect(!rule.matches(Self.facts(age: 2 * Self.day - 1)))
        #expect(rule.matches(Self.facts(age: 5 * Self.day)))
        #expect(!rule.matches(Self.facts(age: 5 * Self.day + 1)))
        #expect(!rule.matches(Self.facts(age: nil)), "an unknown purchase date never matches")
    }

    @Test("consumed share: at the minimum and the maximum it matches, just outside it does not; unknown never")
    func consumed() {
        let rule = RefundPolicy.Rule(name: "r", consumedPercent: .init(minimum: 10, maximum: 50), answer: .noRefund)
        #expect(rule.matches(Self.facts(consumed: 10)))
        #expect(!rule.matches(Self.facts(consumed: 9.999)))
        #expect(rule.matches(Self.facts(consumed: 50)))
        #expect(!rule.matches(Self.facts(consumed: 50.001)))
        #expect(!rule.matches(Self.facts(consumed: nil)))
    }

    @Test("units consumed: at the minimum and the maximum it matches, one outside either it does not; unknown never")
    func unitsConsumed() {
        let rule = RefundPolicy.Rule(name: "r", unitsConsumed: .init(minimum: 2, maximum: 5), answer: .noRefund)
        func coins(_ consumed: Int?) -> RefundFacts {
            var facts = Self.facts()
            if let consumed { facts.recordUnits(consumed: consumed, purchased: 10) }
            return facts
        }
        #expect(rule.matches(coins(2)))
        #expect(!rule.matches(coins(1)))
        #expect(rule.matches(coins(5)))
        #expect(!rule.matches(coins(6)))
        #expect(!rule.matches(coins(nil)), "no lookup, or the lookup did not know: never matches")
        let unused = RefundPolicy.Rule(name: "unused", unitsConsumed: .init(maximum: 0), answer: .fullRefund)
        #expect(!unused.isCatchAll)
        #expect(unused.matches(coins(0)))
        #expect(!unused.matches(coins(3)))
    }

    @Test("a one-time product's units make its consumed share, at most 100 %; a subscription keeps its period's")
    func unitsMakeTheShare() {
        var coins = Self.facts()
        coins.recordUnits(consumed: 5, purchased: 10)
        #expect(coins.consumedPercent == 50)
        #expect(coins.unitsConsumed == 5 && coins.unitsPurchased == 10)
        let half = RefundPolicy.Rule(name: "r", consumedPercent: .init(minimum: 50), answer: .noRefund)
        #expect(half.matches(coins))
        var all = Self.facts()
        all.recordUnits(consumed: 10, purchased: 10)
        #expect(all.consumedPercent == 100)
        var unknownTotal = Self.facts()
        unknownTotal.recordUnits(consumed: 3, purchased: nil)
        #expect(unknownTotal.consumedPercent == nil && unknownTotal.unitsConsumed == 3)
        var none = Self.facts()
        none.recordUnits(consumed: 0, purchased: 0)
        #expect(none.consumedPercent == nil, "no units purchased: no share")
        var subscription = Self.facts(type: .autoRenewable, consumed: 25)
        subscription.recordUnits(consumed: 9, purchased: 10)
        #expect(subscription.consumedPercent == 25)
        // The answer states the share for a one-time product once its units are known, and only then.
        let catalog = Catalog.any
        #expect(
            RefundAnswer(facts: coins, catalog: catalog, policy: RefundPolicy(rules: []))
                .consumptionPercentageMilliunits
                == 50_000)
        #expect(
            RefundAnswer(facts: Self.facts(consumed: 40), catalog: catalog, policy: RefundPolicy(rules: []))
                .consumptionPercentageMilliunits == nil)
    }

    @Test("earlier refunds: at the minimum and the maximum it matches, one outside either it does not")
    func earlierRefunds() {
        let rule = RefundPolicy.Rule(name: "r", earlierRefunds: .init(minimum: 1, maximum: 3), answer: .noRefund)
        #expect(rule.matches(Self.facts(refunds: 1)))
        #expect(!rule.matches(Self.facts(refunds: 0)))
        #expect(rule.matches(Self.facts(refunds: 3)))
        #expect(!rule.matches(Self.facts(refunds: 4)))
        let open = RefundPolicy.Rule(name: "r", earlierRefunds: .init(minimum: 2), answer: .noRefund)
        #expect(open.matches(Self.facts(refunds: 1_000)))
        #expect(!open.matches(Self.facts(refunds: 1)))
    }

    @Test("store, app, product, product type, environment and delivered: in the list or equal, else not")
    func sets() {
        #expect(RefundPolicy.Rule(name: "r", store: .appStore, answer: .dataOnly).matches(Self.facts()))
        #expect(!RefundPolicy.Rule(name: "r", store: .googlePlay, answer: .dataOnly).matches(Self.facts()))
        let apps = RefundPolicy.Rule(name: "r", apps: ["com.example.app"], answer: .dataOnly)
        #expect(apps.matches(Self.facts()))
        #expect(!apps.matches(Self.facts(app: "com.example.other")))
        #expect(!apps.matches(Self.facts(app: nil)))
        let products = RefundPolicy.Rule(name: "r", products: ["coins", "gems"], answer: .dataOnly)
        #expect(products.matches(Self.facts(product: "gems")))
        #expect(!products.matches(Self.facts(product: "coins.big")))
        let types = RefundPolicy.Rule(name: "r", productTypes: [.autoRenewable], answer: .dataOnly)
        #expect(types.matches(Self.facts(type: .autoRenewable)))
        #expect(!types.matches(Self.facts(type: .consumable)))
        #expect(!types.matches(Self.facts(type: nil)))
        let sandbox = RefundPolicy.Rule(name: "r", environments: ["Sandbox"], answer: .noResponse)
        #expect(sandbox.matches(Self.facts(environment: "SANDBOX")), "environments compare without case")
        #expect(!sandbox.matches(Self.facts(environment: "Production")))
        #expect(!sandbox.matches(Self.facts(environment: nil)))
        let undelivered = RefundPolicy.Rule(name: "r", delivered: false, answer: .fullRefund)
        #expect(undelivered.matches(Self.facts(delivered: false)))
        #expect(!undelivered.matches(Self.facts(delivered: true)))
    }

    @Test("a storefront condition: a listed country matches, another does not, an unknown storefront never does")
    func storefront() {
        let rule = RefundPolicy.Rule(name: "r", storefrontCountries: ["USA", "DEU"], answer: .noRefund)
        var facts = Self.facts()
        facts.storefrontCountry = "DEU"
        #expect(rule.matches(facts))
        facts.storefrontCountry = "FRA"
        #expect(!rule.matches(facts))
        facts.storefrontCountry = nil
        #expect(!rule.matches(facts))
    }

    @Test("the facts of a claim carry its storefront; without a claim there is none")
    func storefrontFromClaim() {
        var claim = TransactionClaim(
            transactionID: "1000", originalTransactionID: "1000", accountID: "acct-1", productID: "coins",
            productType: .consumable, grantedJobID: "job-1", verdictID: "verdict-1", createdAt: Self.start,
            updatedAt: Self.start)
        claim.storefront = "DEU"
        let catalog = Catalog(bundleIDs: ["com.example.app"])
        let facts = RefundFacts(
            store: .appStore, claim: claim, productID: "coins", app: nil, environment: nil, accountClaims: [claim],
            catalog: catalog, now: Self.start)
        #expect(facts.storefrontCountry == "DEU")
        let none = RefundFacts(
            store: .appStore, claim: nil, productID: "coins", app: nil, environment: nil, accountClaims: [],
            catalog: catalog, now: Self.start)
        #expect(none.storefrontCountry == nil)
    }

    @Test("top-down: the first rule that matches answers; none: the default, data only; the catalog's after the file's")
    func order() throws {
        let catalog = Catalog(
            bundleIDs: ["com.example.app"],
            products: [.init(id: "coins", type: .consumable, refundPreference: "GRANT_PRORATED")],
            playProducts: [.init(id: "coins", type: .consumable, refundPreference: "DECLINE")])
        let policy = try RefundPolicy.load(
            json: Data(
                #"""
                {"rules":[
                  {"name":"serial","min_earlier_refunds":3,"answer":"no_refund"},
                  {"name":"young","max_purchase_age_days":1,"answer":"full_refund"}
                ]}
                """#.utf8), file: "p.json", catalog: catalog)
        #expect(policy.rules.map(\.name) == ["serial", "young", "catalog:coins", "catalog:coins", "default"])
        #expect(policy.decide(Self.facts(age: 0, refunds: 3)) == .init(rule: "serial", answer: .noRefund))
        #expect(policy.decide(Self.facts(age: 0, refunds: 2)) == .init(rule: "young", answer: .fullRefund))
        #expect(
            policy.decide(Self.facts(refunds: 2)) == .init(rule: "catalog:coins", answer: .proratedRefund))
        #expect(
            policy.decide(Self.facts(store: .googlePlay, refunds: 2))
                == .init(rule: "catalog:coins", answer: .noRefund))
        // The catalog's shorthand holds while the customer has the purchase only.
        #expect(policy.decide(Self.facts(delivered: false)) == .init(rule: "default", answer: .dataOnly))
        #expect(RefundPolicy(rules: []).decide(Self.facts()) == .init(rule: "default", answer: .dataOnly))
    }

    @Test("each answer in each store's words")
    func answers() {
        let apple = RefundPolicy.Answer.allCases.map(\.appleRefundPreference)
        #expect(apple == ["GRANT_FULL", "GRANT_PRORATED", "DECLINE", nil, nil])
        let google = RefundPolicy.Answer.allCases.map(\.googleRefundPreference)
        #expect(google == ["APPROVE", "APPROVE", "DECLINE", "NEUTRAL", "NEUTRAL"])
    }

    @Test("consent per app: the file's word for a listed app, the setting for any other")
    func consent() throws {
        let policy = try RefundPolicy.load(
            json: Data(#"{"rules":[],"customer_consented":{"com.example.app":true,"com.example.b":false}}"#.utf8),
            file: "p.json", catalog: .any)
        #expect(policy.consented(app: "com.example.app", setting: false))
        #expect(!policy.consented(app: "com.example.b", setting: true))
        #expect(policy.consented(app: "com.example.c", setting: true))
        #expect(!policy.consented(app: nil, setting: false))
    }

    @Test("the facts from the ledger: age, a period's share used, the owner's other refunds, delivered")
    func factsFromClaims() {
        func claim(_ id: String, type: ProductType, expires: Date? = nil, revoked: Date? = nil) -> TransactionClaim {
            TransactionClaim(
                transactionID: id, originalTransactionID: id, accountID: "acct", productID: "p-\(id)",
                productType: type, bundleID: "com.example.app", environment: "Sandbox", purchaseDate: Self.start,
                expiresDate: expires, revokedAt: revoked, grantedJobID: "j", verdictID: "v", createdAt: Self.start,
                updatedAt: Self.start)
        }
        let month = claim("sub", type: .autoRenewable, expires: Self.start.addingTimeInterval(30 * Self.day))
        let refunded = [
            claim("a", type: .consumable, revoked: Self.start), claim("b", type: .consumable, revoked: Self.start),
        ]
        let now = Self.start.addingTimeInterval(7.5 * Self.day)
        let facts = RefundFacts(
            store: .appStore, claim: month, productID: "", app: nil, environment: nil,
            accountClaims: [month, claim("c", type: .consumable)] + refunded, catalog: .any, now: now)
        #expect(facts.purchaseAge == 7.5 * Self.day)
        #expect(facts.consumedPercent == 25)
        #expect(facts.earlierRefunds == 2)
        #expect(facts.delivered)
        #expect(facts.app == "com.example.app")
        #expect(facts.environment == "Sandbox")
        #expect(facts.productType == .autoRenewable)
        // The refunded purchase itself is not one of its owner's earlier refunds.
        let itself = RefundFacts(
            store: .appStore, claim: refunded[0], productID: "", app: nil, environment: nil,
            accountClaims: refunded, catalog: .any, now: now)
        #expect(itself.earlierRefunds == 1)
        #expect(!itself.delivered)
        #expect(itself.consumedPercent == nil, "a one-time product's use is unknown")
        let nobody = RefundFacts(
            store: .googlePlay, claim: nil, productID: "x", app: "com.example.play", environment: nil,
            accountClaims: [], catalog: .any, now: now)
        #expect(nobody.purchaseAge == nil && !nobody.delivered && nobody.app == "com.example.play")
    }

    // MARK: - The file's checks

    static let refused: [(json: String, expected: String)] = [
        (#"{"rules":[],"default":"data_only"}"#, #"refund policy p.json: field "default": unknown field"#),
        (
            #"{"rules":[{"name":"a","answer":"full_refund","min_units_consumed":5,"max_units_consumed":4}]}"#,
            #"rule 1 "a": field "min_units_consumed": 5 is above max_units_consumed 4: the rule could never match"#
        ),
        (
            #"{"rules":[{"name":"a","answer":"full_refund","max_units_consumed":-1}]}"#,
            #"rule 1 "a": field "max_units_consumed": -1 is out of range (0 to 1000000000)"#
        ),
        (
            #"{"rules":[{"name":"a","answer":"full_refund","min_units_consumed":1.5}]}"#,
            #"rule 1 "a": field "min_units_consumed": must be a whole number"#
        ),
        (
            #"{"rules":[{"name":"a","answer":"full_refund","max_units_consumed":"0"}]}"#,
            #"rule 1 "a": field "max_units_consumed": must be a number"#
        ),
        (
            #"{"rules":[{"name":"a","answer":"full_refund","max_units_consumed":false}]}"#,
            #"rule 1 "a": field "max_units_consumed": must be a number"#
        ),
        (
            #"{"rules":[{"name":"a","answer":"no_refund","max_age_days":3}]}"#,
            #"refund policy p.json: rule 1 "a": field "max_age_days": unknown field"#
        ),
        (
            #"{"rules":[{"name":"a","answer":"always_decline"}]}"#,
            #"rule 1 "a": field "answer": must be one of full_refund, prorated_refund, no_refund, data_only, no_response"#
        ),
        (
            #"{"rules":[{"name":"a","answer":"no_refund","max_consumed_percent":120}]}"#,
            #"rule 1 "a": field "max_consumed_percent": 120 is out of range (0 to 100)"#
        ),
        (
            #"{"rules":[{"name":"a","answer":"no_refund","min_consumed_percent":-0.5}]}"#,
            #"rule 1 "a": field "min_consumed_percent": -0.5 is out of range (0 to 100)"#
        ),
        (
            #"{"rules":[{"name":"a","answer":"no_refund","min_purchase_age_days":5,"max_purchase_age_days":2}]}"#,
            #"rule 1 "a": field "min_purchase_age_days": 5 is above max_purchase_age_days 2: the rule could never match"#
        ),
        (
            #"{"rules":[{"name":"all","answer":"data_only"},{"name":"late","answer":"no_refund","store":"app_store"}]}"#,
            #"rule 2 "late": can never match: rule "all" before it has no condition"#
        ),
        (
            #"{"rules":[{"name":"a","answer":"no_refund","products":[]}]}"#,
            #"rule 1 "a": field "products": empty: the rule could never match"#
        ),
        (
            #"{"rules":[{"name":"a","answer":"no_refund","min_earlier_refunds":1.5}]}"#,
            #"rule 1 "a": field "min_earlier_refunds": must be a whole number"#
        ),
        (
            #"{"rules":[{"name":"a","answer":"no_refund","store":"amazon"}]}"#,
            #"rule 1 "a": field "store": must be app_store or google_play"#
        ),
        (
            #"{"rules":[{"name":"a","answer":"no_refund","product_types":["subscription"]}]}"#,
            #"rule 1 "a": field "product_types": "subscription" is not one of"#
        ),
        (
            #"{"rules":[{"name":"a","answer":"no_refund","storefront_countries":["US"]}]}"#,
            #"rule 1 "a": field "storefront_countries": "US" is not an ISO 3166-1 alpha-3 code"#
        ),
        (
            #"{"rules":[{"name":"a","answer":"no_refund","delivered":1}]}"#,
            #"rule 1 "a": field "delivered": must be true or false"#
        ),
        (
            #"{"rules":[{"name":"a","answer":"no_refund","max_purchase_age_days":true}]}"#,
            #"rule 1 "a": field "max_purchase_age_days": must be a number"#
        ),
        (
            #"{"rules":[{"name":"a","answer":"no_refund","store":"app_store"},{"name":"a","answer":"data_only"}]}"#,
            #"rule 2 "a": field "name": used by an earlier rule"#
        ),
        (#"{"rules":[{"name":"default","answer":"no_refund"}]}"#, #"rule 1 "default": field "name": reserved"#),
        (#"{"rules":[{"answer":"no_refund"}]}"#, #"rule 1: field "name": required"#),
        (#"{"rules":{}}"#, #"field "rules": required: a list of rules"#),
        (#"[]"#, "refund policy p.json: not a JSON object"),
        (#"{"rules":[],"customer_consented":{"com.example.app":"yes"}}"#, #"field "customer_consented""#),
    ]

    @Test("a faulty file is refused with one line naming the file, the rule and the field", arguments: refused)
    func refusedFiles(json: String, expected: String) {
        let error = #expect(throws: RefundPolicyError.self) {
            try RefundPolicy.load(json: Data(json.utf8), file: "p.json", catalog: .any)
        }
        let line = error?.description ?? ""
        #expect(line.contains(expected), "\(line)")
        #expect(line.hasPrefix("refund policy p.json"))
        #expect(!line.contains("\n"))
    }

    @Test("a file that cannot be read is refused naming it")
    func unreadable() {
        let error = #expect(throws: RefundPolicyError.self) {
            try RefundPolicy.load(path: "/nonexistent/refunds.json", catalog: .any)
        }
        #expect(error?.description == "refund policy /nonexistent/refunds.json: cannot be read")
    }

    @Test("every documented field is read")
    func everyField() throws {
        let policy = try RefundPolicy.load(
            json: Data(
                #"""
                {"rules":[{"name":"all.fields","answer":"prorated_refund","store":"google_play",
                  "apps":["com.example.play"],"products":["p"],"product_types":["non_renewing"],
                  "min_purchase_age_days":0.5,"max_purchase_age_days":30,"min_consumed_percent":0,
                  "max_consumed_percent":100,"min_earlier_refunds":0,"max_earlier_refunds":2,
                  "storefront_countries":["USA"],"environments":["Production"],"delivered":true,
                  "min_units_consumed":0,"max_units_consumed":1000000000}],
                 "customer_consented":{}}
                """#.utf8), file: "p.json", catalog: .any)
        let rule = try #require(policy.rules.first)
        #expect(
            rule
                == RefundPolicy.Rule(
                    name: "all.fields", store: .googlePlay, apps: ["com.example.play"], products: ["p"],
                    productTypes: [.nonRenewing], purchaseAge: .init(minimum: 0.5 * Self.day, maximum: 30 * Self.day),
                    consumedPercent: .init(minimum: 0, maximum: 100),
                    unitsConsumed: .init(minimum: 0, maximum: 1_000_000_000),
                    earlierRefunds: .init(minimum: 0, maximum: 2), storefrontCountries: ["USA"],
                    environments: ["Production"], delivered: true, answer: .proratedRefund))
        #expect(Set(RefundPolicy.ruleFields).count == 17)
    }
}
