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
///
/// Several apps: an optional `apps` list names each app with its credentials as *file references*
/// (the catalog never holds a secret); each app's `bundle_id` is a bundle id a receipt may name:
/// ```json
/// "apps": [
///   { "bundle_id": "com.example.app", "app_apple_id": 1234567890, "shared_secret_file": "/run/secrets/app-secret",
///     "server_api": { "key_id": "ABC123DEFG", "issuer_id": "57246542-…", "private_key_file": "/run/secrets/app.p8" } }
/// ]
/// ```
public struct Catalog: Sendable, Hashable {
    /// One app of the deployment: its bundle id, its Apple id and where its secrets are (paths, never values).
    public struct App: Sendable, Hashable {
        public var bundleID: String
        /// `app_apple_id`: production notifications of this app must name it. Nil checks nothing.
        public var appAppleID: Int64?
        /// `shared_secret_file`: the file holding the app's verifyReceipt shared secret. Nil sends none.
        public var sharedSecretFile: String?
        /// `server_api`: the app's App Store Server API key. Nil: no Server API calls for this app.
        public var serverAPI: ServerAPIKeyReference?

        public init(
            bundleID: String, appAppleID: Int64? = nil, sharedSecretFile: String? = nil,
            serverAPI: ServerAPIKeyReference? = nil
        ) {
            self.bundleID = bundleID
            self.appAppleID = appAppleID
            self.sharedSecretFile = sharedSecretFile
            self.serverAPI = serverAPI
        }
    }

    /// An App Store Server API key by reference: its ids and the path of its `.p8` private key.
    public struct ServerAPIKeyReference: Sendable, Hashable {
        public var keyID: String
        public var issuerID: String
        public var privateKeyFile: String

        public init(keyID: String, issuerID: String, privateKeyFile: String) {
            self.keyID = keyID
            self.issuerID = issuerID
            self.privateKeyFile = privateKeyFile
        }
    }

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
    /// The apps of the deployment, in the file's order (`apps`). Default: empty (one app, configured by the worker's
    /// own keys: `shared_secret`, `server_api_key`, `apple_app_apple_id`).
    public var apps: [App]

    /// A catalog; every app's bundle id is added to `bundleIDs`.
    public init(bundleIDs: Set<String> = [], products: [Product] = [], apps: [App] = []) {
        self.bundleIDs = bundleIDs.union(apps.map(\.bundleID))
        self.products = Dictionary(products.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        self.apps = apps
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
        let apps = reading == .verification ? try self.apps(present(object["apps"])) : []
        return Catalog(bundleIDs: bundleIDs, products: products, apps: apps)
    }

    /// Reads `apps`. Only names and paths are read here (the worker reads the files); a key that would put a
    /// secret in the catalog itself is refused, and no error repeats a value beyond a bundle id or a path.
    private static func apps(_ value: Any?) throws(CatalogError) -> [App] {
        guard let value else { return [] }
        guard let list = value as? [Any] else { throw CatalogError("apps has the wrong type (a list of objects)") }
        guard !list.isEmpty else { throw CatalogError("apps is empty (leave it out for one app)") }
        var apps: [App] = []
        var appAppleIDs: Set<Int64> = []
        for (index, element) in list.enumerated() {
            let name = "apps[\(index)]"
            guard let entry = element as? [String: Any] else { throw CatalogError("\(name) has the wrong type") }
            for inline in ["shared_secret", "private_key", "server_api_key"] where entry[inline] != nil {
                throw CatalogError(
                    "\(name).\(inline): the catalog names secrets by file only (shared_secret_file, "
                        + "server_api.private_key_file)")
            }
            guard let bundleID = present(entry["bundle_id"]) as? String, Identifier.isValid(bundleID) else {
                throw CatalogError("\(name).bundle_id must be a string of 1 to \(Identifier.maximumBytes) bytes")
            }
            guard !apps.contains(where: { $0.bundleID == bundleID }) else {
                throw CatalogError("\(name).bundle_id \(bundleID) is listed twice")
            }
            var app = App(bundleID: bundleID)
            if let idValue = present(entry["app_apple_id"]) {
                // JSON numbers arrive as NSNumber; `true` arrives as a subclass of it and is refused (`is Bool`
                // cannot tell: it holds for the number 1 too).
                guard let number = idValue as? NSNumber, Swift.type(of: number) == NSNumber.self,
                    let id = Int64(exactly: number.doubleValue),
                    id > 0
                else { throw CatalogError("\(name).app_apple_id must be a positive whole number") }
                guard appAppleIDs.insert(id).inserted else {
                    throw CatalogError("\(name).app_apple_id \(id) is listed twice")
                }
                app.appAppleID = id
            }
            if let fileValue = present(entry["shared_secret_file"]) {
                guard let path = fileValue as? String, !path.isEmpty else {
                    throw CatalogError("\(name).shared_secret_file must be a file path")
                }
                app.sharedSecretFile = path
            }
            if let keyValue = present(entry["server_api"]) {
                guard let key = keyValue as? [String: Any] else {
                    throw CatalogError("\(name).server_api must be an object (key_id, issuer_id, private_key_file)")
                }
                var fields: [String: String] = [:]
                for field in ["key_id", "issuer_id", "private_key_file"] {
                    guard let text = present(key[field]) as? String, !text.isEmpty else {
                        throw CatalogError("\(name).server_api.\(field) is missing (a non-empty string)")
                    }
                    fields[field] = text
                }
                app.serverAPI = ServerAPIKeyReference(
                    keyID: fields["key_id"] ?? "", issuerID: fields["issuer_id"] ?? "",
                    privateKeyFile: fields["private_key_file"] ?? "")
            }
            apps.append(app)
        }
        return apps
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
            // Optional keys of the consumption answers: refused when malformed, never ignored, since a
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
        case apps
    }

    private enum AppKeys: String, CodingKey {
        case bundleID = "bundle_id"
        case appAppleID = "app_apple_id"
        case sharedSecretFile = "shared_secret_file"
        case serverAPI = "server_api"
    }

    private enum ServerAPIKeys: String, CodingKey {
        case keyID = "key_id"
        case issuerID = "issuer_id"
        case privateKeyFile = "private_key_file"
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
        // Only when listed, so single-app catalogs keep their bytes.
        guard !apps.isEmpty else { return }
        var appList = container.nestedUnkeyedContainer(forKey: .apps)
        for app in apps {
            var entry = appList.nestedContainer(keyedBy: AppKeys.self)
            try entry.encode(app.bundleID, forKey: .bundleID)
            try entry.encodeIfPresent(app.appAppleID, forKey: .appAppleID)
            try entry.encodeIfPresent(app.sharedSecretFile, forKey: .sharedSecretFile)
            if let key = app.serverAPI {
                var keyEntry = entry.nestedContainer(keyedBy: ServerAPIKeys.self, forKey: .serverAPI)
                try keyEntry.encode(key.keyID, forKey: .keyID)
                try keyEntry.encode(key.issuerID, forKey: .issuerID)
                try keyEntry.encode(key.privateKeyFile, forKey: .privateKeyFile)
            }
        }
    }
}

/// A catalog that cannot be used, with the reason (no value from the file beyond a product id).
public struct CatalogError: Error, Sendable, Hashable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// The contract's identifier rule: 1 to 256 bytes of UTF-8 and no control character (C0, DEL or C1), so an id is
/// safe in a log line, a header, a URL path and every database the ledger runs on.
public enum Identifier {
    public static let maximumBytes = 256

    public static func isValid(_ text: String) -> Bool {
        let count = text.utf8.count
        guard count >= 1, count <= maximumBytes else { return false }
        return !hasControlCharacter(text)
    }

    /// Whether `text` holds a control character: U+0000 to U+001F, U+007F or U+0080 to U+009F.
    public static func hasControlCharacter(_ text: String) -> Bool {
        text.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }
    }
}
