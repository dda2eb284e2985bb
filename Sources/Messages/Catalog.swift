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
///
/// Google Play: `play_apps` names each Play app by its package name with its keys as *file references*, and
/// `play_products` its products (product ids are the store's own, so an id may be listed in both stores). An
/// entitlement name means the same in both stores: premium bought on either is one entitlement.
/// ```json
/// "play_apps": [
///   { "package_name": "com.example.app", "licensing_key_file": "/run/secrets/play-licensing-key",
///     "service_account_key_file": "/run/secrets/play-service-account.json" }
/// ],
/// "play_products": [
///   { "id": "coins_100", "type": "consumable" },
///   { "id": "premium_forever", "type": "non_consumable", "entitlements": ["premium"] },
///   { "id": "pro", "type": "subscription", "base_plans": ["monthly", "yearly"], "entitlements": ["premium"] }
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
    }

    /// An App Store Server API key by reference: its ids and the path of its `.p8` private key.
    public struct ServerAPIKeyReference: Sendable, Hashable {
        public var keyID: String
        public var issuerID: String
        public var privateKeyFile: String

    }

    /// One product: its App Store product id, its type and the entitlements it grants.
    public struct Product: Sendable, Hashable {
        public var id: String
        public var type: ProductType
        public var entitlements: [String]
        /// What to tell Apple when a customer asks for a refund (`refund_preference`: `DECLINE`, `GRANT_FULL` or
        /// `GRANT_PRORATED`; Send Consumption Information), a shorthand for the refund policy's rule
        /// `catalog:<product id>` (docs/REFUNDS.md). Nil: the refund policy decides.
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

    /// One Google Play app: its package name and where its keys are (paths, never values).
    public struct PlayApp: Sendable, Hashable {
        public var packageName: String
        /// `licensing_key_file`: the file holding the app's licensing key as the Play Console shows it (base64 of an
        /// X.509 SubjectPublicKeyInfo, RSA), which signs the purchase data a client receives.
        public var licensingKeyFile: String
        /// `service_account_key_file`: the JSON key file of the service account that reads this app's purchases
        /// from the Google Play Developer API.
        public var serviceAccountKeyFile: String

        public init(packageName: String, licensingKeyFile: String, serviceAccountKeyFile: String) {
            self.packageName = packageName
            self.licensingKeyFile = licensingKeyFile
            self.serviceAccountKeyFile = serviceAccountKeyFile
        }
    }

    /// One Google Play product: its product id, its type and the entitlements it grants (names shared with the App
    /// Store's products).
    public struct PlayProduct: Sendable, Hashable {
        public var id: String
        /// `consumable`, `non_consumable`, or `subscription` (``ProductType/autoRenewable``).
        public var type: ProductType
        /// A subscription's base plan ids (`base_plans`); empty for a one-time product.
        public var basePlans: [String]
        public var entitlements: [String]
        /// What to tell Google when it reviews a refund of this product (`refund_preference`: `DECLINE`, `APPROVE`
        /// or `NEUTRAL`, Google's `refundPreference`), a shorthand for the refund policy's rule `catalog:<product id>`
        /// (docs/REFUNDS.md); nil: the refund policy decides.
        public var refundPreference: String?
        /// Whether a free sample, trial or description of the content was given before the purchase
        /// (`sample_content_provided`; nil: false).
        public var sampleContentProvided: Bool?

        /// The values `refund_preference` may take for a Play product (Google's `refundPreference`).
        public static let refundPreferences = ["DECLINE", "APPROVE", "NEUTRAL"]

        /// The types a Play product may have, as `play_products` spells them.
        public static let typeNames: [(name: String, type: ProductType)] = [
            ("consumable", .consumable), ("non_consumable", .nonConsumable), ("subscription", .autoRenewable),
        ]

        /// The type as `play_products` spells it.
        public var typeName: String {
            Self.typeNames.first { $0.type == type }?.name ?? type.rawValue
        }

        public init(
            id: String, type: ProductType, basePlans: [String] = [], entitlements: [String]? = nil,
            refundPreference: String? = nil, sampleContentProvided: Bool? = nil
        ) {
            self.id = id
            self.type = type
            self.basePlans = basePlans
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
    /// The Google Play apps of the deployment, in the file's order (`play_apps`). Default: empty (a Google Play
    /// purchase names no app this deployment sells).
    public var playApps: [PlayApp]
    /// Google Play products by id (`play_products`). Default: empty (any product).
    public private(set) var playProducts: [String: PlayProduct]

    /// A catalog; every app's bundle id is added to `bundleIDs`.
    public init(
        bundleIDs: Set<String> = [], products: [Product] = [], apps: [App] = [], playApps: [PlayApp] = [],
        playProducts: [PlayProduct] = []
    ) {
        self.bundleIDs = bundleIDs.union(apps.map(\.bundleID))
        self.products = Dictionary(products.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        self.apps = apps
        self.playApps = playApps
        self.playProducts = Dictionary(playProducts.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// Whether the catalog lists `app` (a bundle id, a package name) among the apps of `store`.
    public func listsApp(_ app: String, in store: Store) -> Bool {
        switch store {
        case .appStore: bundleIDs.contains(app)
        case .googlePlay: playApp(packageName: app) != nil
        }
    }

    /// Whether the catalog lists `productID` among the products of `store`.
    public func listsProduct(_ productID: String, in store: Store) -> Bool {
        switch store {
        case .appStore: products[productID] != nil
        case .googlePlay: playProducts[productID] != nil
        }
    }

    /// The Play app of `packageName`, or nil when the catalog lists none.
    public func playApp(packageName: String) -> PlayApp? {
        playApps.first { $0.packageName == packageName }
    }

    /// A catalog that checks nothing.
    public static let any = Catalog()

    /// The type of a product, or nil when the catalog does not sell it.
    public func productType(of productID: String) -> ProductType? { products[productID]?.type }

    /// The type of a product of `store`, or nil when the catalog does not sell it there.
    public func productType(of productID: String, in store: Store) -> ProductType? {
        switch store {
        case .appStore: products[productID]?.type
        case .googlePlay: playProducts[productID]?.type
        }
    }

    /// The type of a product of `store`. A product the catalog does not list for that store (the worker's catalog
    /// may have changed since the verdict) is judged by its transaction: with an expiry it is treated as an
    /// auto-renewable subscription, without one as a non-consumable. A consumable cannot be recognised that way;
    /// list it. Only `store`'s list is read: product ids are each store's own, so one id may mean two products.
    public func type(of productID: String, expiresDate: Date?, in store: Store = .appStore) -> ProductType {
        if let listed = productType(of: productID, in: store) { return listed }
        return expiresDate == nil ? .nonConsumable : .autoRenewable
    }

    /// The entitlements a product of `store` grants (none for a consumable; the product's own id when that store's
    /// list does not name it).
    public func entitlements(of productID: String, type: ProductType, in store: Store = .appStore) -> [String] {
        if type == .consumable { return [] }
        let listed: [String]? =
            switch store {
            case .appStore: products[productID]?.entitlements
            case .googlePlay: playProducts[productID]?.entitlements
            }
        return listed ?? [productID]
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
        let playApps = reading == .verification ? try self.playApps(present(object["play_apps"])) : []
        let playProducts = try self.playProducts(present(object["play_products"]))
        return Catalog(
            bundleIDs: bundleIDs, products: products, apps: apps, playApps: playApps, playProducts: playProducts)
    }

    /// Reads `play_apps`: names and paths only (the Google Play store reads the files), and a key that would put a
    /// secret in the catalog itself is refused. No error repeats a value beyond a package name or a path.
    private static func playApps(_ value: Any?) throws(CatalogError) -> [PlayApp] {
        var apps: [PlayApp] = []
        for (name, entry) in try objects(
            value, key: "play_apps", emptyHint: "leave it out when not selling on Google Play")
        {
            try refuseInline(
                ["licensing_key", "service_account_key", "private_key"], in: entry, name, what: "keys",
                files: "licensing_key_file, service_account_key_file")
            let packageName = try uniqueIdentifier(entry, "package_name", name, listed: apps.map(\.packageName))
            let files = try requiredStrings(["licensing_key_file", "service_account_key_file"], in: entry) {
                "\(name) (\(packageName)).\($0) is missing (a file path)"
            }
            apps.append(PlayApp(packageName: packageName, licensingKeyFile: files[0], serviceAccountKeyFile: files[1]))
        }
        return apps
    }

    /// Reads `play_products`, as strictly for every reader: ids, base plans and entitlement names follow the
    /// identifier rule, a subscription lists its base plans, a one-time product none, a consumable no entitlement.
    private static func playProducts(_ value: Any?) throws(CatalogError) -> [PlayProduct] {
        let types = PlayProduct.typeNames.map(\.name).joined(separator: ", ")
        var products: [PlayProduct] = []
        for (name, entry) in try objects(value, key: "play_products", emptyHint: nil) {
            let id = try uniqueIdentifier(entry, "id", name, listed: products.map(\.id))
            let product = "play product \(id)"
            guard let typeName = present(entry["type"]) as? String,
                let type = PlayProduct.typeNames.first(where: { $0.name == typeName })?.type
            else { throw CatalogError("\(product): \"type\" must be one of \(types)") }
            var basePlans: [String] = []
            if let plansValue = present(entry["base_plans"]) {
                let plans = try identifiers(plansValue, "base_plans", of: product)
                guard Set(plans).count == plans.count else {
                    throw CatalogError("\(product): a base plan is listed twice")
                }
                basePlans = plans
            }
            if type == .autoRenewable, basePlans.isEmpty {
                throw CatalogError("\(product): a subscription lists its \"base_plans\" (at least one)")
            }
            if type != .autoRenewable, !basePlans.isEmpty {
                throw CatalogError("\(product): only a subscription has \"base_plans\"")
            }
            var entitlements: [String]?
            if let value = present(entry["entitlements"]) {
                entitlements = try entitlementNames(value, type: type, of: product)
            }
            let answers = try refundAnswers(entry, preferences: PlayProduct.refundPreferences, of: product)
            products.append(
                PlayProduct(
                    id: id, type: type, basePlans: basePlans, entitlements: entitlements,
                    refundPreference: answers.refundPreference, sampleContentProvided: answers.sampleContentProvided))
        }
        return products
    }

    /// Reads `apps`. Only names and paths are read here (the worker reads the files); a key that would put a
    /// secret in the catalog itself is refused, and no error repeats a value beyond a bundle id or a path.
    private static func apps(_ value: Any?) throws(CatalogError) -> [App] {
        var apps: [App] = []
        var appAppleIDs: Set<Int64> = []
        for (name, entry) in try objects(value, key: "apps", emptyHint: "leave it out for one app") {
            try refuseInline(
                ["shared_secret", "private_key", "server_api_key"], in: entry, name, what: "secrets",
                files: "shared_secret_file, server_api.private_key_file")
            var app = App(bundleID: try uniqueIdentifier(entry, "bundle_id", name, listed: apps.map(\.bundleID)))
            if let idValue = present(entry["app_apple_id"]) {
                // JSON numbers arrive as NSNumber, and so does `true`, which is refused.
                guard let number = idValue as? NSNumber, !number.isJSONBoolean,
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
                let fields = try requiredStrings(["key_id", "issuer_id", "private_key_file"], in: key) {
                    "\(name).server_api.\($0) is missing (a non-empty string)"
                }
                app.serverAPI = ServerAPIKeyReference(keyID: fields[0], issuerID: fields[1], privateKeyFile: fields[2])
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
                entitlements = try entitlementNames(value, type: type, of: "product \(id)")
            }
        }
        var answers: (refundPreference: String?, sampleContentProvided: Bool?) = (nil, nil)
        if problem.reading == .verification {
            // The consumption answers: only the worker sends them, so only its reading reads them.
            answers = try refundAnswers(entry, preferences: Product.refundPreferences, of: "product \(id)")
        }
        return Product(
            id: id, type: type, entitlements: entitlements, refundPreference: answers.refundPreference,
            sampleContentProvided: answers.sampleContentProvided)
    }

    /// The objects of an optional list of the catalog (`apps`, `play_apps`, `play_products`), each with its name in
    /// errors (`apps[2]`). A list given empty is refused, with `emptyHint` saying what to do instead, where one is
    /// given.
    private static func objects(
        _ value: Any?, key: String, emptyHint: String?
    ) throws(CatalogError) -> [(name: String, entry: [String: Any])] {
        guard let value else { return [] }
        guard let list = value as? [Any] else { throw CatalogError("\(key) has the wrong type (a list of objects)") }
        if let emptyHint, list.isEmpty { throw CatalogError("\(key) is empty (\(emptyHint))") }
        var objects: [(name: String, entry: [String: Any])] = []
        for (index, element) in list.enumerated() {
            let name = "\(key)[\(index)]"
            guard let entry = element as? [String: Any] else { throw CatalogError("\(name) has the wrong type") }
            objects.append((name, entry))
        }
        return objects
    }

    /// Refuses a key that would put a secret in the catalog itself: the catalog names `what` by file only.
    private static func refuseInline(
        _ keys: [String], in entry: [String: Any], _ name: String, what: String, files: String
    ) throws(CatalogError) {
        for inline in keys where entry[inline] != nil {
            throw CatalogError("\(name).\(inline): the catalog names \(what) by file only (\(files))")
        }
    }

    /// The identifier under `field` (a bundle id, a package name, a product id), not one `listed` already.
    private static func uniqueIdentifier(
        _ entry: [String: Any], _ field: String, _ name: String, listed: [String]
    ) throws(CatalogError) -> String {
        guard let id = present(entry[field]) as? String, Identifier.isValid(id) else {
            throw CatalogError("\(name).\(field) must be a string of 1 to \(Identifier.maximumBytes) bytes")
        }
        guard !listed.contains(id) else { throw CatalogError("\(name).\(field) \(id) is listed twice") }
        return id
    }

    /// The non-empty strings under `fields` (paths, key ids), in order; `missing` words the error for one absent.
    private static func requiredStrings(
        _ fields: [String], in entry: [String: Any], missing: (String) -> String
    ) throws(CatalogError) -> [String] {
        var values: [String] = []
        for field in fields {
            guard let text = present(entry[field]) as? String, !text.isEmpty else { throw CatalogError(missing(field)) }
            values.append(text)
        }
        return values
    }

    /// A product's list of identifiers under `field` (`entitlements`, `base_plans`).
    private static func identifiers(_ value: Any, _ field: String, of product: String) throws(CatalogError) -> [String]
    {
        guard let names = (value as? [Any]).flatMap({ $0 as? [String] }), names.allSatisfy(Identifier.isValid) else {
            throw CatalogError(
                "\(product): \"\(field)\" must be a list of strings of 1 to \(Identifier.maximumBytes) bytes")
        }
        return names
    }

    /// A product's `entitlements`, which a consumable leaves empty (it is counted).
    private static func entitlementNames(
        _ value: Any, type: ProductType, of product: String
    ) throws(CatalogError) -> [String] {
        let names = try identifiers(value, "entitlements", of: product)
        if type == .consumable, !names.isEmpty {
            throw CatalogError("\(product): a consumable grants no entitlement (it is counted)")
        }
        return names
    }

    /// A product's answers to its store's refund questions (`refund_preference`, one of `preferences`, and
    /// `sample_content_provided`), each optional: refused when malformed, never ignored, since a wrong answer to a
    /// store cannot be taken back.
    private static func refundAnswers(
        _ entry: [String: Any], preferences: [String], of product: String
    ) throws(CatalogError) -> (refundPreference: String?, sampleContentProvided: Bool?) {
        var refundPreference: String?
        if let value = present(entry["refund_preference"]) {
            guard let text = value as? String, preferences.contains(text) else {
                throw CatalogError(
                    "\(product): \"refund_preference\" must be one of " + preferences.joined(separator: ", "))
            }
            refundPreference = text
        }
        var sampleContentProvided: Bool?
        if let value = present(entry["sample_content_provided"]) {
            guard let flag = value as? Bool else {
                throw CatalogError("\(product): \"sample_content_provided\" must be true or false")
            }
            sampleContentProvided = flag
        }
        return (refundPreference, sampleContentProvided)
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
        case playApps = "play_apps"
        case playProducts = "play_products"
    }

    private enum PlayAppKeys: String, CodingKey {
        case packageName = "package_name"
        case licensingKeyFile = "licensing_key_file"
        case serviceAccountKeyFile = "service_account_key_file"
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
        case basePlans = "base_plans"
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
            try Self.encodeProduct(
                id: product.id, type: product.type, typeName: product.type.rawValue, basePlans: [],
                entitlements: product.entitlements, refundPreference: product.refundPreference,
                sampleContentProvided: product.sampleContentProvided, into: &list)
        }
        try encodePlay(into: &container)
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

    /// `play_apps` and `play_products`, each only when listed, so catalogs without Google Play keep their bytes.
    private func encodePlay(into container: inout KeyedEncodingContainer<CodingKeys>) throws {
        if !playApps.isEmpty {
            var list = container.nestedUnkeyedContainer(forKey: .playApps)
            for app in playApps {
                var entry = list.nestedContainer(keyedBy: PlayAppKeys.self)
                try entry.encode(app.packageName, forKey: .packageName)
                try entry.encode(app.licensingKeyFile, forKey: .licensingKeyFile)
                try entry.encode(app.serviceAccountKeyFile, forKey: .serviceAccountKeyFile)
            }
        }
        if !playProducts.isEmpty {
            var list = container.nestedUnkeyedContainer(forKey: .playProducts)
            for product in playProducts.values.sorted(by: { $0.id < $1.id }) {
                try Self.encodeProduct(
                    id: product.id, type: product.type, typeName: product.typeName, basePlans: product.basePlans,
                    entitlements: product.entitlements, refundPreference: product.refundPreference,
                    sampleContentProvided: product.sampleContentProvided, into: &list)
            }
        }
    }

    /// One entry of `products` or `play_products` (each store spells its types): `base_plans` only when there are
    /// some, `entitlements` only when they are not the default (the product's own id; none for a consumable).
    private static func encodeProduct(
        id: String, type: ProductType, typeName: String, basePlans: [String], entitlements: [String],
        refundPreference: String?, sampleContentProvided: Bool?, into list: inout any UnkeyedEncodingContainer
    ) throws {
        var entry = list.nestedContainer(keyedBy: ProductKeys.self)
        try entry.encode(id, forKey: .id)
        try entry.encode(typeName, forKey: .type)
        if !basePlans.isEmpty { try entry.encode(basePlans, forKey: .basePlans) }
        if entitlements != Product(id: id, type: type).entitlements {
            try entry.encode(entitlements, forKey: .entitlements)
        }
        try entry.encodeIfPresent(refundPreference, forKey: .refundPreference)
        try entry.encodeIfPresent(sampleContentProvided, forKey: .sampleContentProvided)
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
