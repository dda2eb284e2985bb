import Foundation

/// What the operator sells, as the entitlement service needs it: each product's type and the entitlements it
/// grants. It reads the worker's catalog file (`VERIFY_CATALOG_FILE`), with one optional key per product:
///
/// ```json
/// {"products": [
///   {"id": "pro.monthly", "type": "auto_renewable", "entitlements": ["premium"]},
///   {"id": "premium.lifetime", "type": "non_consumable", "entitlements": ["premium"]},
///   {"id": "coins.100", "type": "consumable"}
/// ]}
/// ```
///
/// A product without `entitlements` grants one entitlement named after the product. A consumable grants none: the
/// account gets a count of its purchases instead. Unknown keys (`bundle_ids`) are ignored.
public struct EntitlementCatalog: Sendable, Hashable {
    /// A product's type, as App Store Connect defines them.
    public enum ProductType: String, Sendable, Hashable, Codable, CaseIterable {
        case consumable
        case nonConsumable = "non_consumable"
        case autoRenewable = "auto_renewable"
        case nonRenewing = "non_renewing"
    }

    /// One product: its id, type and the entitlements it grants.
    public struct Product: Sendable, Hashable {
        public var id: String
        public var type: ProductType
        public var entitlements: [String]

        public init(id: String, type: ProductType, entitlements: [String]? = nil) {
            self.id = id
            self.type = type
            self.entitlements = type == .consumable ? [] : (entitlements ?? [id])
        }
    }

    public private(set) var products: [String: Product]

    public init(products: [Product] = []) {
        self.products = Dictionary(products.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
    }

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

    /// Reads the catalog's JSON. Throws ``CatalogError`` naming the product and the problem.
    public static func load(json: Data) throws(CatalogError) -> EntitlementCatalog {
        guard let object = try? JSONSerialization.jsonObject(with: json) as? [String: Any] else {
            throw CatalogError("the catalog is not a JSON object")
        }
        guard let list = object["products"] as? [[String: Any]] else {
            throw CatalogError("the catalog has no \"products\" list of objects")
        }
        var products: [Product] = []
        for (index, entry) in list.enumerated() {
            guard let id = entry["id"] as? String, Identifier.isValid(id) else {
                throw CatalogError("products[\(index)]: \"id\" must be a string of 1 to 256 bytes")
            }
            guard let typeText = entry["type"] as? String, let type = ProductType(rawValue: typeText) else {
                throw CatalogError(
                    "product \(id): \"type\" must be one of "
                        + ProductType.allCases.map(\.rawValue).joined(separator: ", "))
            }
            var entitlements: [String]?
            if let value = entry["entitlements"] {
                guard let names = value as? [String], names.allSatisfy(Identifier.isValid) else {
                    throw CatalogError("product \(id): \"entitlements\" must be a list of strings of 1 to 256 bytes")
                }
                if type == .consumable, !names.isEmpty {
                    throw CatalogError("product \(id): a consumable grants no entitlement (it is counted)")
                }
                entitlements = names
            }
            products.append(Product(id: id, type: type, entitlements: entitlements))
        }
        return EntitlementCatalog(products: products)
    }
}

/// A catalog that cannot be used, with the reason (no value from the file beyond a product id).
public struct CatalogError: Error, Sendable, CustomStringConvertible {
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
