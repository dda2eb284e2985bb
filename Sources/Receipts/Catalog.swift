import Foundation

/// What the operator sells: the bundle ids a receipt may name, and the products with their types.
///
/// JSON form (keys in snake case; unknown keys are ignored):
/// ```json
/// {
///   "bundle_ids": ["com.example.app"],
///   "products": [
///     { "id": "coins.100", "type": "consumable" },
///     { "id": "premium", "type": "non_consumable" },
///     { "id": "pro.monthly", "type": "auto_renewable" },
///     { "id": "season.pass", "type": "non_renewing" }
///   ]
/// }
/// ```
/// An empty `bundle_ids` list or `products` list means "do not check" (useful for `inspect`).
public struct Catalog: Sendable, Hashable, Codable {
    /// The type of an in-app product, as App Store Connect defines them.
    public enum ProductType: String, Sendable, Hashable, Codable, CaseIterable {
        case consumable
        case nonConsumable = "non_consumable"
        case autoRenewable = "auto_renewable"
        case nonRenewing = "non_renewing"
    }

    /// One product: its App Store product id and type.
    public struct Product: Sendable, Hashable, Codable {
        public var id: String
        public var type: ProductType
        public init(id: String, type: ProductType) {
            self.id = id
            self.type = type
        }
    }

    /// Bundle ids a receipt may name. Default: empty (any bundle id).
    public var bundleIDs: Set<String>
    /// Products by id. Default: empty (any product).
    public var products: [String: ProductType]

    public init(bundleIDs: Set<String> = [], products: [Product] = []) {
        self.bundleIDs = bundleIDs
        self.products = Dictionary(products.map { ($0.id, $0.type) }, uniquingKeysWith: { first, _ in first })
    }

    /// A catalog that checks nothing.
    public static let any = Catalog()

    /// The type of a product, or nil when the catalog does not sell it.
    public func productType(of productID: String) -> ProductType? { products[productID] }

    enum CodingKeys: String, CodingKey {
        case bundleIDs = "bundle_ids"
        case products
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let bundles = try container.decodeIfPresent([String].self, forKey: .bundleIDs) ?? []
        let products = try container.decodeIfPresent([Product].self, forKey: .products) ?? []
        self.init(bundleIDs: Set(bundles), products: products)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(bundleIDs.sorted(), forKey: .bundleIDs)
        try container.encode(
            products.sorted { $0.key < $1.key }.map { Product(id: $0.key, type: $0.value) }, forKey: .products)
    }

    /// Loads a catalog from its JSON form (see the type's documentation).
    public static func load(json: Data) throws -> Catalog {
        try JSONDecoder().decode(Catalog.self, from: json)
    }
}
