import Foundation

/// What the operator sells: the bundle ids a receipt may name, each product's type, and the entitlements each
/// product grants. The one catalog type: the local analysis, the decision rules and the entitlement service read
/// the same file (`VERIFY_CATALOG_FILE`).
///
/// JSON form (keys in snake case; unknown keys are ignored):
/// ```json
/// {
///   "bundle_ids": ["com.example.app"],
///   "products": [
///     { "id": "coins.100", "type": "consumable" },
///     { "id": "premium", "type": "non_consumable" },
///     { "id": "pro.monthly", "type": "auto_renewable", "entitlements": ["premium"] },
///     { "id": "season.pass", "type": "non_renewing" }
///   ]
/// }
/// ```
/// An empty `bundle_ids` list or `products` list means "do not check" (useful for `inspect`). A product without
/// `entitlements` grants one entitlement named after the product; a consumable grants none (it is counted).
public struct Catalog: Sendable, Hashable {
    /// One product: its App Store product id, its type and the entitlements it grants.
    public struct Product: Sendable, Hashable {
        public var id: String
        public var type: ProductType
        public var entitlements: [String]
        /// What to tell Apple when a customer asks for a refund (`refund_preference`: `DECLINE`, `GRANT_FULL` or
        /// `GRANT_PRORATED`; Send Consumption Information). Nil: no preference is sent.
        public var refundPreference: String?
        /// Whether a free sample, trial or description of the content was given before purchase
        /// (`sample_content_provided`; Send Consumption Information). Nil: false.
        public var sampleContentProvided: Bool?

        /// The values `refund_preference` may take (Apple's `refundPreference`).
        public static let refundPreferences = ["DECLINE", "GRANT_FULL", "GRANT_PRORATED"]

        public init(
            id: String, type: ProductType, entitlements: [String]? = nil, refundPreference: String? = nil,
            sampleContentProvided: Bool? = nil
        ) {
            self.id = id
            self.type = type
            self.entitlements = type == .consumable ? [] : (entitlements ?? [id])
            self.refundPreference = refundPreference
            self.sampleContentProvided = sampleContentProvided
        }
    }

    /// Bundle ids a receipt may name. Default: empty (any bundle id).
    public var bundleIDs: Set<String>
    /// Products by id. Default: empty (any product).
    public private(set) var products: [String: Product]

    public init(bundleIDs: Set<String> = [], products: [Product] = []) {
        self.bundleIDs = bundleIDs
        self.products = Dictionary(products.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// A catalog that checks nothing.
    public static let any = Catalog()

    /// The type of a product, or nil when the catalog does not sell it.
    public func productType(of productID: String) -> ProductType? { products[productID]?.type }

    /// The type of a product. A product the catalog does not list (the worker's catalog may have changed since
    /// the verdict) is judged by its transaction: with an expiry it is treated as an auto-renewable subscription,
    /// without one as a non-consumable. A consumable cannot be recognised that way; list it.
    public func type(of productID: String, expiresDate: Date?) -> ProductType {
        if let product = products[productID] { return product.type }
        return expiresDate == nil ? .nonConsumable : .autoRenewable
    }

    /// The entitlements a product grants (none for a consumable; the product's own id when not listed).
    public func entitlements(of productID: String, type: ProductType) -> [String] {
        if type == .consumable { return [] }
        return products[productID]?.entitlements ?? [productID]
    }
}

extension Catalog {
    /// Who reads the file. Both read the same JSON; each keeps the strictness it always had, so a file accepted
    /// before is accepted now, byte for byte.
    public enum Reading: Sendable, Hashable {
        /// The worker, `submit` and `inspect`: `bundle_ids` and `products` may be absent (the worker then refuses
        /// an empty list itself); `entitlements` is carried when well formed and otherwise ignored.
        case verification
        /// The entitlement service: `products` is required, ids and entitlement names follow the contract's
        /// identifier rule, a consumable lists no entitlement; `bundle_ids` is not read.
        case entitlements
    }

    /// Reads the catalog's JSON. Throws ``CatalogError`` naming the product and the problem, in one short line,
    /// worded as each reader always worded it (docs/CONFIGURATION.md quotes the worker's).
    public static func load(json: Data, for reading: Reading = .verification) throws(CatalogError) -> Catalog {
        let problem = Problem(reading: reading)
        guard let parsed = try? JSONSerialization.jsonObject(with: json, options: [.fragmentsAllowed]) else {
            throw problem("not JSON", "the catalog is not a JSON object")
        }
        guard let object = parsed as? [String: Any] else {
            throw problem("the top level has the wrong type", "the catalog is not a JSON object")
        }
        var bundleIDs: Set<String> = []
        if reading == .verification, let value = present(object["bundle_ids"]) {
            guard let list = value as? [Any] else { throw CatalogError("bundle_ids has the wrong type") }
            for (index, element) in list.enumerated() {
                guard let name = element as? String else {
                    throw CatalogError("bundle_ids[\(index)] has the wrong type")
                }
                bundleIDs.insert(name)
            }
        }
        let noList = "the catalog has no \"products\" list of objects"
        var list: [Any] = []
        switch (present(object["products"]), reading) {
        case (nil, .verification): break
        case (nil, .entitlements): throw CatalogError(noList)
        case (let value?, _):
            guard let entries = value as? [Any] else { throw problem("products has the wrong type", noList) }
            list = entries
        }
        var products: [Product] = []
        for (index, element) in list.enumerated() {
            guard let entry = element as? [String: Any] else {
                throw problem("products[\(index)] has the wrong type", noList)
            }
            products.append(try product(entry, at: index, problem))
        }
        return Catalog(bundleIDs: bundleIDs, products: products)
    }

    /// One problem in each reader's words.
    private struct Problem {
        var reading: Reading

        func callAsFunction(_ verification: String, _ entitlements: String) -> CatalogError {
            CatalogError(reading == .verification ? verification : entitlements)
        }
    }

    private static func product(
        _ entry: [String: Any], at index: Int, _ problem: Problem
    ) throws(CatalogError) -> Product {
        let badID = "products[\(index)]: \"id\" must be a string of 1 to \(Identifier.maximumBytes) bytes"
        guard let idValue = present(entry["id"]) else { throw problem("products[\(index)].id is missing", badID) }
        guard let id = idValue as? String else { throw problem("products[\(index)].id has the wrong type", badID) }
        if problem.reading == .entitlements, !Identifier.isValid(id) { throw CatalogError(badID) }
        let types = ProductType.allCases.map(\.rawValue).joined(separator: ", ")
        let badType = "product \(id): \"type\" must be one of \(types)"
        guard let typeValue = present(entry["type"]) else {
            throw problem("products[\(index)].type is missing", badType)
        }
        guard let typeText = typeValue as? String else {
            throw problem("products[\(index)].type has the wrong type", badType)
        }
        guard let type = ProductType(rawValue: typeText) else {
            throw problem("products[\(index)].type is not one of \(types)", badType)
        }
        var entitlements: [String]?
        switch problem.reading {
        case .verification:
            // The worker never read this key: a malformed list is ignored there, as it always was.
            entitlements = present(entry["entitlements"]).flatMap { ($0 as? [Any]).flatMap { $0 as? [String] } }
        case .entitlements:
            if let value = entry["entitlements"] {
                guard let names = (value as? [Any]).flatMap({ $0 as? [String] }), names.allSatisfy(Identifier.isValid)
                else {
                    throw CatalogError(
                        "product \(id): \"entitlements\" must be a list of strings of 1 to "
                            + "\(Identifier.maximumBytes) bytes")
                }
                if type == .consumable, !names.isEmpty {
                    throw CatalogError("product \(id): a consumable grants no entitlement (it is counted)")
                }
                entitlements = names
            }
        }
        var refundPreference: String?
        var sampleContentProvided: Bool?
        if problem.reading == .verification {
            // Optional keys of the consumption answers (issue 16.4): refused when malformed, never ignored, since a
            // wrong answer to Apple cannot be taken back.
            if let value = present(entry["refund_preference"]) {
                guard let text = value as? String, Product.refundPreferences.contains(text) else {
                    throw CatalogError(
                        "product \(id): \"refund_preference\" must be one of "
                            + Product.refundPreferences.joined(separator: ", "))
                }
                refundPreference = text
            }
            if let value = present(entry["sample_content_provided"]) {
                guard let flag = value as? Bool else {
                    throw CatalogError("product \(id): \"sample_content_provided\" must be true or false")
                }
                sampleContentProvided = flag
            }
        }
        return Product(
            id: id, type: type, entitlements: entitlements, refundPreference: refundPreference,
            sampleContentProvided: sampleContentProvided)
    }

    /// A member's value, nil when absent or JSON `null` (as a decoder's `decodeIfPresent` reads them).
    private static func present(_ value: Any?) -> Any? {
        guard let value, !(value is NSNull) else { return nil }
        return value
    }
}

extension Catalog: Encodable {
    private enum CodingKeys: String, CodingKey {
        case bundleIDs = "bundle_ids"
        case products
    }

    private enum ProductKeys: String, CodingKey {
        case id, type, entitlements
        case refundPreference = "refund_preference"
        case sampleContentProvided = "sample_content_provided"
    }

    /// The JSON form ``load(json:for:)`` reads, in a stable order; a product's `entitlements` only when they are
    /// not the default (the product's own id), so catalogs written before carry the same bytes.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(bundleIDs.sorted(), forKey: .bundleIDs)
        var list = container.nestedUnkeyedContainer(forKey: .products)
        for product in products.values.sorted(by: { $0.id < $1.id }) {
            var entry = list.nestedContainer(keyedBy: ProductKeys.self)
            try entry.encode(product.id, forKey: .id)
            try entry.encode(product.type, forKey: .type)
            if product.entitlements != Product(id: product.id, type: product.type).entitlements {
                try entry.encode(product.entitlements, forKey: .entitlements)
            }
            try entry.encodeIfPresent(product.refundPreference, forKey: .refundPreference)
            try entry.encodeIfPresent(product.sampleContentProvided, forKey: .sampleContentProvided)
        }
    }
}

/// A catalog that cannot be used, with the reason (no value from the file beyond a product id).
public struct CatalogError: Error, Sendable, Hashable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// The contract's identifier rule: 1 to 256 bytes of UTF-8, and (here) no control characters, so an id is safe in
/// a log line, a header and a URL path.
public enum Identifier {
    public static let maximumBytes = 256

    public static func isValid(_ text: String) -> Bool {
        let count = text.utf8.count
        guard count >= 1, count <= maximumBytes else { return false }
        return !text.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }
    }
}
