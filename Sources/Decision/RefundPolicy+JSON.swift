import Foundation
import Messages

/// A policy file the worker refuses to start with: one line naming the file, the rule and the field.
public struct RefundPolicyError: Error, Sendable, Hashable, CustomStringConvertible {
    public var file: String
    /// `rule 2 "late-refunds"`, or nil for a fault of the file as a whole.
    public var rule: String?
    public var field: String?
    public var problem: String

    public var description: String {
        var text = "refund policy \(file)"
        if let rule { text += ": \(rule)" }
        if let field { text += ": field \"\(field)\"" }
        return text + ": \(problem)"
    }
}

extension RefundPolicy {
    /// The fields a rule may have (docs/REFUNDS.md).
    public static let ruleFields: [String] = [
        "name", "answer", "store", "apps", "products", "product_types", "min_purchase_age_days",
        "max_purchase_age_days", "min_consumed_percent", "max_consumed_percent", "min_earlier_refunds",
        "max_earlier_refunds", "storefront_countries", "environments", "delivered", "min_units_consumed",
        "max_units_consumed",
    ]

    /// The fields the file's top level may have.
    public static let fileFields: [String] = ["rules", "customer_consented"]

    /// Reads the policy file at `path` (``load(json:file:catalog:)``).
    public static func load(path: String, catalog: Catalog) throws(RefundPolicyError) -> RefundPolicy {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw RefundPolicyError(file: path, problem: "cannot be read")
        }
        return try load(json: data, file: path, catalog: catalog)
    }

    /// Reads a policy file's JSON: `{"rules": [...], "customer_consented": {...}}`. Every fault is refused, the first
    /// one found thrown as one line: an unknown field, a value of the wrong kind, an unknown answer, store or product
    /// type, a percentage outside 0 to 100, a negative age, count or number of units, a minimum above its maximum, an empty list
    /// (a rule that could never match), a name used twice or reserved, and a rule after one without conditions
    /// (it could never match). The catalog's shorthand rules (``catalogRules(_:)``) follow the file's.
    public static func load(json: Data, file: String, catalog: Catalog) throws(RefundPolicyError) -> RefundPolicy {
        guard let object = try? JSONSerialization.jsonObject(with: json), let top = object as? [String: Any] else {
            throw RefundPolicyError(file: file, problem: "not a JSON object")
        }
        if let unknown = top.keys.sorted().first(where: { !fileFields.contains($0) }) {
            throw RefundPolicyError(
                file: file, field: unknown,
                problem: "unknown field (a policy file has \(fileFields.joined(separator: ", ")))")
        }
        guard let entries = top["rules"] as? [Any] else {
            throw RefundPolicyError(file: file, field: "rules", problem: "required: a list of rules")
        }
        var rules: [Rule] = []
        for (index, entry) in entries.enumerated() {
            var reader = RuleReader(file: file, index: index + 1, entry: entry)
            let rule = try reader.read()
            let place = "rule \(index + 1) \"\(rule.name)\""
            if rules.contains(where: { $0.name == rule.name }) {
                throw RefundPolicyError(file: file, rule: place, field: "name", problem: "used by an earlier rule")
            }
            if let catchAll = rules.first(where: \.isCatchAll) {
                throw RefundPolicyError(
                    file: file, rule: place,
                    problem: "can never match: rule \"\(catchAll.name)\" before it has no condition and matches "
                        + "every question")
            }
            rules.append(rule)
        }
        var consented: [String: Bool] = [:]
        if let value = top["customer_consented"], !(value is NSNull) {
            guard let map = value as? [String: Any] else {
                throw RefundPolicyError(
                    file: file, field: "customer_consented", problem: "must be an object of bundle id: true or false")
            }
            for (app, flag) in map {
                guard let flag = Self.bool(flag) else {
                    throw RefundPolicyError(
                        file: file, field: "customer_consented", problem: "\"\(app)\" must be true or false")
                }
                consented[app] = flag
            }
        }
        return RefundPolicy(rules: rules + catalogRules(catalog), customerConsented: consented)
    }

    /// A JSON boolean (never a number standing for one).
    static func bool(_ value: Any) -> Bool? {
        guard let number = value as? NSNumber, number.isJSONBoolean else { return nil }
        return number.boolValue
    }
}

/// Reads one rule of a policy file, refusing its first fault.
private struct RuleReader {
    var file: String
    var index: Int
    var entry: Any
    var name = ""

    init(file: String, index: Int, entry: Any) {
        self.file = file
        self.index = index
        self.entry = entry
    }

    func fault(_ field: String?, _ problem: String) -> RefundPolicyError {
        let place = name.isEmpty ? "rule \(index)" : "rule \(index) \"\(name)\""
        return RefundPolicyError(file: file, rule: place, field: field, problem: problem)
    }

    mutating func read() throws(RefundPolicyError) -> RefundPolicy.Rule {
        guard let fields = entry as? [String: Any] else { throw fault(nil, "must be an object") }
        guard let name = fields["name"] as? String,
            !name.isEmpty, name.count <= 100, name.allSatisfy({ $0.isLetter || $0.isNumber || "-_.:".contains($0) })
        else {
            throw fault("name", "required: letters, digits, - _ . or :, at most 100")
        }
        self.name = name
        if name == RefundPolicy.defaultRule.name || name.hasPrefix("catalog:") {
            throw fault("name", "reserved (the built-in rules are \"default\" and \"catalog:<product id>\")")
        }
        if let unknown = fields.keys.sorted().first(where: { !RefundPolicy.ruleFields.contains($0) }) {
            throw fault(unknown, "unknown field (a rule has \(RefundPolicy.ruleFields.joined(separator: ", ")))")
        }
        guard let answerText = fields["answer"] as? String, let answer = RefundPolicy.Answer(rawValue: answerText)
        else {
            throw fault(
                "answer",
                "must be one of \(RefundPolicy.Answer.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        var rule = RefundPolicy.Rule(name: name, answer: answer)
        if let value = fields["store"] {
            guard let text = value as? String, let store = Store(rawValue: text) else {
                throw fault("store", "must be app_store or google_play")
            }
            rule.store = store
        }
        rule.apps = try strings(fields, "apps")
        rule.products = try strings(fields, "products")
        if let types = try strings(fields, "product_types") {
            var set: Set<ProductType> = []
            for text in types {
                guard let type = ProductType(rawValue: text) else {
                    throw fault(
                        "product_types",
                        "\"\(text)\" is not one of \(ProductType.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                set.insert(type)
            }
            rule.productTypes = set
        }
        rule.purchaseAge = try bounds(fields, "purchase_age_days", range: 0...36_500).map {
            RefundPolicy.Bounds(minimum: $0.minimum.map { $0 * 86_400 }, maximum: $0.maximum.map { $0 * 86_400 })
        }
        rule.consumedPercent = try bounds(fields, "consumed_percent", range: 0...100, what: "a percentage")
        rule.earlierRefunds = try bounds(fields, "earlier_refunds", range: 0...1_000_000, whole: true).map {
            RefundPolicy.Bounds(minimum: $0.minimum.map { Int($0) }, maximum: $0.maximum.map { Int($0) })
        }
        rule.unitsConsumed = try bounds(fields, "units_consumed", range: 0...1_000_000_000, whole: true).map {
            RefundPolicy.Bounds(minimum: $0.minimum.map { Int($0) }, maximum: $0.maximum.map { Int($0) })
        }
        if let countries = try strings(fields, "storefront_countries") {
            if let bad = countries.first(where: { $0.count != 3 || !$0.allSatisfy(\.isUppercase) }) {
                throw fault("storefront_countries", "\"\(bad)\" is not an ISO 3166-1 alpha-3 code in capitals (USA)")
            }
            rule.storefrontCountries = countries
        }
        rule.environments = try strings(fields, "environments")
        if let value = fields["delivered"] {
            guard let flag = RefundPolicy.bool(value) else { throw fault("delivered", "must be true or false") }
            rule.delivered = flag
        }
        return rule
    }

    /// A list of non-empty strings; an empty list is refused (the rule could never match).
    func strings(_ fields: [String: Any], _ key: String) throws(RefundPolicyError) -> Set<String>? {
        guard let value = fields[key] else { return nil }
        guard let list = value as? [Any], list.allSatisfy({ ($0 as? String).map { !$0.isEmpty } ?? false }) else {
            throw fault(key, "must be a list of non-empty strings")
        }
        guard !list.isEmpty else { throw fault(key, "empty: the rule could never match") }
        return Set(list.compactMap { $0 as? String })
    }

    /// The `min_<key>` and `max_<key>` pair, each a number within `range` (whole when `whole`), the minimum at most
    /// the maximum.
    func bounds(
        _ fields: [String: Any], _ key: String, range: ClosedRange<Double>, whole: Bool = false,
        what: String = "a number"
    ) throws(RefundPolicyError) -> RefundPolicy.Bounds<Double>? {
        var read: [Double?] = []
        for field in ["min_\(key)", "max_\(key)"] {
            guard let value = fields[field] else {
                read.append(nil)
                continue
            }
            guard RefundPolicy.bool(value) == nil, let number = (value as? NSNumber)?.doubleValue, number.isFinite
            else {
                throw fault(field, "must be \(what)")
            }
            guard range.contains(number) else {
                throw fault(
                    field,
                    "\(Self.text(number)) is out of range (\(Self.text(range.lowerBound)) to "
                        + "\(Self.text(range.upperBound)))")
            }
            if whole, number.rounded() != number { throw fault(field, "must be a whole number") }
            read.append(number)
        }
        if let minimum = read[0], let maximum = read[1], minimum > maximum {
            throw fault(
                "min_\(key)",
                "\(Self.text(minimum)) is above max_\(key) \(Self.text(maximum)): the rule could never match")
        }
        guard read[0] != nil || read[1] != nil else { return nil }
        return RefundPolicy.Bounds(minimum: read[0], maximum: read[1])
    }

    static func text(_ number: Double) -> String {
        number.rounded() == number && abs(number) < 1e15 ? String(Int(number)) : String(number)
    }
}
